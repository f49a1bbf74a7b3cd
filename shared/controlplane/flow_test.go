package controlplane_test

import (
	"errors"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/controlplane/cptest"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

const threeSteps = cptest.ThreeSteps

// threeStepsNoDelay retries expired leases at once (the default backoff is 1 s).
var threeStepsNoDelay = strings.Replace(threeSteps, "    tool: {kind: noop, input: {n: \"{{ n }}\"}}", "    retry: {delay: 0}\n    tool: {kind: noop, input: {n: \"{{ n }}\"}}", 1)

func echoInput(c store.Command) any {
	args, _ := c.Context["args"].(map[string]any)
	return args
}

// TestThreeStepRunsOnBothShards: register → execute → claim → events → next
// command → completion, for executions landing on both shards (R-I3).
func TestThreeStepRunsOnBothShards(t *testing.T) {
	s := newStack(t)
	s.register(t, threeSteps)
	shards := map[int]bool{}
	for i := range 4 {
		st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three", Payload: map[string]any{"n": int64(i)}})
		if err != nil {
			t.Fatal(err)
		}
		sh, _ := s.st.ShardFor(st.ExecutionID)
		shards[sh.Index()] = true
		if st.CommandsGenerated != 1 {
			t.Fatalf("commands_generated %d", st.CommandsGenerated)
		}
		s.drive(t, st.ExecutionID, echoInput)
		v := s.execution(t, st.ExecutionID)
		if v.Row.Status != lifecycle.ExecutionCompleted {
			t.Fatalf("status %s (%s)", v.Row.Status, v.Row.Error)
		}
		if got := v.Steps["middle"].Result; !reflect.DeepEqual(got, map[string]any{"m": int64(i + 1)}) {
			t.Fatalf("middle result %v", got)
		}
		if !reflect.DeepEqual(v.Result, map[string]any{"first": int64(i)}) {
			t.Fatalf("result %v (R-R7: the final ctx)", v.Result)
		}
		types := s.eventTypes(t, st.ExecutionID)
		if types[0] != "playbook.started" || types[len(types)-1] != "playbook.completed" {
			t.Fatalf("log %v", types)
		}
	}
	if len(shards) != 2 {
		t.Fatalf("executions landed on shards %v, want both", shards)
	}
}

// TestClaimRace: N workers claim one command; exactly one wins.
func TestClaimRace(t *testing.T) {
	s := newStack(t)
	s.register(t, threeSteps)
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	if err != nil {
		t.Fatal(err)
	}
	c := s.pending(t, st.ExecutionID)[0]
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.svc.Claim(s.ctx, c.IssuedEventID, "worker-"+string(rune('a'+i)), false)
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, controlplane.ErrConflict):
				conflicts.Add(1)
			default:
				t.Errorf("claim: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != 11 {
		t.Fatalf("wins %d conflicts %d", wins.Load(), conflicts.Load())
	}
}

// TestParallelLoopConcurrentReports: 50 iterations completed by 8 goroutines
// posting events; exactly one dispatch of the next step; 50 results in order.
func TestParallelLoopConcurrentReports(t *testing.T) {
	s := newStack(t)
	s.register(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fan, path: tests/fan}
workflow:
  - step: start
    loop: {in: "{{ 50 }}", iterator: i, spec: {mode: parallel, max_in_flight: 50}}
    tool: {kind: noop, input: {i: "{{ i }}"}}
    next: after
  - step: after
    tool: {kind: noop}
`)
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/fan"})
	if err != nil {
		t.Fatal(err)
	}
	cmds := s.pending(t, st.ExecutionID)
	if len(cmds) != 50 {
		t.Fatalf("%d commands issued", len(cmds))
	}
	work := make(chan store.Command)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				body, err := s.svc.Claim(s.ctx, c.IssuedEventID, "w"+string(rune('0'+w)), false)
				if err != nil {
					t.Errorf("claim: %v", err)
					continue
				}
				for _, err := range s.post(body, body.WorkerID, echoInput(c)) {
					if err != nil {
						t.Errorf("post: %v", err)
					}
				}
			}
		}()
	}
	for _, c := range cmds {
		work <- c
	}
	close(work)
	wg.Wait()
	after := s.pending(t, st.ExecutionID)
	if len(after) != 1 || after[0].Step != "after" {
		t.Fatalf("pending after the loop: %v", after)
	}
	types := s.eventTypes(t, st.ExecutionID)
	n := 0
	for _, ty := range types {
		if ty == "step.enter" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("step.enter %d times (start, after), want 2", n)
	}
	v := s.execution(t, st.ExecutionID)
	list, _ := v.Steps["start"].Result.([]any)
	if len(list) != 50 {
		t.Fatalf("loop result has %d entries", len(list))
	}
	for i, r := range list {
		if m, _ := r.(map[string]any); m["i"] != int64(i) {
			t.Fatalf("entry %d = %v", i, r)
		}
	}
}

// TestCancel: no further claims (409) and pending commands cancelled.
func TestCancel(t *testing.T) {
	s := newStack(t)
	s.register(t, threeSteps)
	st, _ := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	c := s.pending(t, st.ExecutionID)[0]
	if err := s.svc.Cancel(s.ctx, st.ExecutionID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.Claim(s.ctx, c.IssuedEventID, "w", false); !isKind(err, controlplane.ErrConflict) || err.Error() != "Execution has been cancelled" {
		t.Fatalf("claim after cancel: %v", err)
	}
	if err := s.svc.Cancel(s.ctx, st.ExecutionID, "again"); err != nil {
		t.Fatalf("cancel of a cancelled run must be a no-op: %v", err)
	}
	v := s.execution(t, st.ExecutionID)
	if v.Row.Status != lifecycle.ExecutionCancelled || len(s.pending(t, st.ExecutionID)) != 0 {
		t.Fatalf("status %s", v.Row.Status)
	}
	sh, _ := s.st.ShardFor(st.ExecutionID)
	row, _ := storetest.Command(s.ctx, sh.Pool(), c.CommandID)
	if row.Status != store.CommandCancelled {
		t.Fatalf("command %s", row.Status)
	}
	// A completed run cannot be cancelled.
	st2, _ := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	s.drive(t, st2.ExecutionID, echoInput)
	if err := s.svc.Cancel(s.ctx, st2.ExecutionID, ""); !isKind(err, controlplane.ErrConflict) {
		t.Fatalf("cancel of a completed run: %v", err)
	}
}

// TestLeaseExpiryReissue: the lease lapses, the command is re-issued (attempt 2),
// another worker completes it, and the late worker's completion is answered 409
// and ignored.
func TestLeaseExpiryReissue(t *testing.T) {
	s := newStack(t, func(c *controlplane.Config) { c.Lease = 300 * time.Millisecond })
	s.register(t, threeStepsNoDelay)
	st, _ := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	c := s.pending(t, st.ExecutionID)[0]
	late, err := s.svc.Claim(s.ctx, c.IssuedEventID, "slow", false)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	r, err := s.svc.Drain(s.ctx, 100)
	if err != nil || r.Expired != 1 {
		t.Fatalf("drain: %+v %v", r, err)
	}
	fresh, err := s.svc.Claim(s.ctx, c.IssuedEventID, "fast", false)
	if err != nil || fresh.Attempt != 2 || fresh.CommandID != c.CommandID {
		t.Fatalf("re-claim: %+v %v", fresh, err)
	}
	s.report(t, fresh, "fast", map[string]any{"n": int64(1)})
	errs := s.post(late, "slow", map[string]any{"n": int64(99)})
	for i, err := range errs {
		var fenced *controlplane.FencedError
		if !errors.As(err, &fenced) {
			t.Fatalf("late post %d: %v, want 409", i, err)
		}
	}
	v := s.execution(t, st.ExecutionID)
	if !reflect.DeepEqual(v.Steps["start"].Result, map[string]any{"n": int64(1)}) || v.Steps["start"].Attempts != 2 {
		t.Fatalf("start %+v: the late result must be ignored", v.Steps["start"])
	}
	evs, _ := s.svc.Events(s.ctx, store.EventFilter{ExecutionID: st.ExecutionID, Limit: 1000})
	ignored := 0
	for _, e := range evs {
		if e.Ignored {
			ignored++
		}
	}
	if ignored != 3 {
		t.Fatalf("%d ignored events stored, want 3", ignored)
	}
}

// TestClaimOnExpiredLease: R-L4 — the claim itself runs the sweep transition.
func TestClaimOnExpiredLease(t *testing.T) {
	// The first three claims must land within the lease: keep it long enough
	// for a loaded 2-core CI machine.
	const lease = 1500 * time.Millisecond
	s := newStack(t, func(c *controlplane.Config) { c.Lease = lease })
	s.register(t, threeStepsNoDelay)
	st, _ := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	c := s.pending(t, st.ExecutionID)[0]
	if _, err := s.svc.Claim(s.ctx, c.IssuedEventID, "a", false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.Claim(s.ctx, c.IssuedEventID, "b", false); !isKind(err, controlplane.ErrConflict) {
		t.Fatalf("claim of a live lease by another worker: %v", err)
	}
	// A NoETL worker's second claim (its legacy and shared consumers both got
	// the notification) is refused active_claim, so the command runs once; our
	// worker's (start) gets the same command again.
	var refused *controlplane.RefusedClaim
	if _, err := s.svc.Claim(s.ctx, c.IssuedEventID, "a", false); !errors.As(err, &refused) || refused.Code != controlplane.ClaimActive {
		t.Fatalf("the holder's second NoETL claim: %v, want active_claim", err)
	}
	again, err := s.svc.Claim(s.ctx, c.IssuedEventID, "a", true)
	if err != nil || again.Attempt != 1 {
		t.Fatalf("the holder re-claiming with start gets the same command: %v", err)
	}
	time.Sleep(lease + 500*time.Millisecond)
	b, err := s.svc.Claim(s.ctx, c.IssuedEventID, "b", false)
	if err != nil || b.Attempt != 2 {
		t.Fatalf("claim after expiry: %+v %v", b, err)
	}
	types := s.eventTypes(t, st.ExecutionID)
	want := []string{"command.claimed", "command.expired", "command.retry", "command.claimed"}
	if got := types[len(types)-4:]; !reflect.DeepEqual(got, want) {
		t.Fatalf("tail %v, want %v", got, want)
	}
}

// TestNATSDownThenDrain: with the NATS server down during ingest, the
// transaction still commits and its notification stays in the outbox; once NATS
// is back, the drain delivers it.
func TestNATSDownThenDrain(t *testing.T) {
	s := newStack(t)
	s.register(t, threeSteps)
	s.nats.Down()
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	if err != nil {
		t.Fatalf("execute must succeed with NATS down: %v", err)
	}
	sh, _ := s.st.ShardFor(st.ExecutionID)
	if n, _ := store.PendingOutboxCount(s.ctx, sh.Pool()); n != 1 {
		t.Fatalf("pending outbox %d", n)
	}
	if r, err := s.svc.Drain(s.ctx, 100); err != nil || r.Published != 0 {
		t.Fatalf("a drain while NATS is down published %+v (%v)", r, err)
	}
	if err := s.nats.Up(); err != nil {
		t.Fatal(err)
	}
	// R-A6: the drain claims rows a few seconds old, retrying failed ones with
	// backoff; poll until it delivers.
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := s.svc.Drain(s.ctx, 100)
		if err == nil && r.Published == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("drain never published: %+v %v", r, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if n, _ := store.PendingOutboxCount(s.ctx, sh.Pool()); n != 0 {
		t.Fatalf("pending outbox %d after drain", n)
	}
	stream, err := s.js.Stream(s.ctx, "NOETL_COMMANDS")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := stream.Info(s.ctx)
	if info.State.Msgs != 1 {
		t.Fatalf("stream has %d messages", info.State.Msgs)
	}
	msg, err := stream.GetLastMsgForSubject(s.ctx, "noetl.commands.shared.>")
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]any
	if err := jsonUnmarshal(msg.Data, &b); err != nil || b["command_id"] != s.pending(t, st.ExecutionID)[0].CommandID || b["server_url"] != "http://test" {
		t.Fatalf("body %s (%v)", msg.Data, err)
	}
}

// TestIdempotentReposts: a re-posted event (same client id) has no new effect.
func TestIdempotentReposts(t *testing.T) {
	s := newStack(t)
	s.register(t, threeSteps)
	st, _ := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	c := s.pending(t, st.ExecutionID)[0]
	body, err := s.svc.Claim(s.ctx, c.IssuedEventID, "w", false)
	if err != nil {
		t.Fatal(err)
	}
	first := s.post(body, "w", map[string]any{"n": int64(1)})
	before := s.eventTypes(t, st.ExecutionID)
	second := s.post(body, "w", map[string]any{"n": int64(1)})
	for i := range first {
		if first[i] != nil || second[i] != nil {
			t.Fatalf("posts: %v %v", first, second)
		}
	}
	if after := s.eventTypes(t, st.ExecutionID); !reflect.DeepEqual(after, before) {
		t.Fatalf("re-posts added events: %d → %d", len(before), len(after))
	}
	if p := s.pending(t, st.ExecutionID); len(p) != 1 || p[0].Step != "middle" {
		t.Fatalf("pending %v", p)
	}
	// The same execute idempotency key returns the first execution.
	a, _ := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three", IdempotencyKey: "k1"})
	b, _ := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three", IdempotencyKey: "k1"})
	if a.ExecutionID != b.ExecutionID || !b.Existing {
		t.Fatalf("idempotency key: %+v %+v", a, b)
	}
}

// TestFailureAndRetryThroughStore: an error envelope fails the command (R-R3) and
// the retry reuses the command row with attempt 2 (R-L6).
func TestFailureAndRetryThroughStore(t *testing.T) {
	s := newStack(t)
	s.register(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: flaky, path: tests/flaky}
workflow:
  - step: start
    retry: {max_attempts: 2, delay: 0}
    tool: {kind: noop}
`)
	st, _ := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/flaky"})
	c := s.pending(t, st.ExecutionID)[0]
	body, _ := s.svc.Claim(s.ctx, c.IssuedEventID, "w", false)
	meta := map[string]any{"command_id": body.CommandID, "attempt": int64(1)}
	for _, ev := range []controlplane.EventInput{
		{Type: "call.done", Payload: map[string]any{"result": map[string]any{"status": "COMPLETED", "context": map[string]any{"status": "error", "error": "boom"}}}},
		{Type: "command.completed", Status: "error"},
	} {
		ev.ExecutionID, ev.Step, ev.WorkerID, ev.Meta = st.ExecutionID, "start", "w", meta
		if _, err := s.svc.Ingest(s.ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	sh, _ := s.st.ShardFor(st.ExecutionID)
	row, _ := storetest.Command(s.ctx, sh.Pool(), c.CommandID)
	if row.Status != store.CommandPending || row.Attempt != 2 {
		t.Fatalf("after a failed attempt: %s attempt %d", row.Status, row.Attempt)
	}
	body2, err := s.svc.Claim(s.ctx, c.IssuedEventID, "w2", false)
	if err != nil || body2.Attempt != 2 {
		t.Fatalf("claim of the retry: %v", err)
	}
	s.report(t, body2, "w2", "ok")
	row, _ = storetest.Command(s.ctx, sh.Pool(), c.CommandID)
	v := s.execution(t, st.ExecutionID)
	if row.Status != store.CommandCompleted || v.Row.Status != lifecycle.ExecutionCompleted {
		t.Fatalf("command %s execution %s", row.Status, v.Row.Status)
	}
	_ = lifecycle.ExecutionCompleted
}
