package controlplane_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/dev/bench"
)

// TestFairDispatchBoundsABurst (issue 29): while a command of its pool waits
// (announced, unclaimed), a running chain gets at most a bounded burst of
// commands in a row by eager dispatch; its next one is deferred instead:
// pending, not announced, behind the waiting one. With nothing waiting,
// eager dispatch is unbounded.
func TestFairDispatchBoundsABurst(t *testing.T) {
	s := newStack(t)
	a, b, body := startTwo(t, s, bench.Chain("tests/fair", 30))
	time.Sleep(controlplane.InTransit) // b's command now waits for a slot
	if n := handedInARow(t, s, body); n != 1 {
		t.Fatalf("with b's first command waiting, a got %d commands in a row, want a burst of 1", n)
	}
	next := s.pending(t, a)
	if len(next) != 1 || s.pending(t, b)[0].Step != "start" {
		t.Fatalf("a's next command %+v: want it pending behind b's", next)
	}
	if n := s.notifications(t); n != 2 {
		t.Fatalf("%d notifications, want 2 (the executions' first commands): a's deferred one is not announced", n)
	}
	// b's is claimed through its notification, and a's here (a command
	// deferred is pending: any claim takes it).
	if _, err := s.svc.Claim(s.ctx, s.pending(t, b)[0].IssuedEventID, "w2", true); err != nil {
		t.Fatal(err)
	}
	body, err := s.svc.Claim(s.ctx, next[0].IssuedEventID, "w1", true)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing waits now: a's chain runs to its end by eager dispatch.
	if n := handedInARow(t, s, body); n != 30-3 {
		t.Fatalf("with nothing waiting, a got %d commands in a row, want the chain's remaining %d", n, 30-3)
	}
}

// handedInARow reports body's completion for w1 with one slot, then that of
// each command an answer hands back, until an answer hands out nothing; it
// says how many were handed out in a row.
func handedInARow(t *testing.T, s *stack, body *controlplane.CommandBody) int {
	t.Helper()
	for n := 0; ; n++ {
		out, err := s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1,
			Events: []controlplane.EventInput{completion(body, "w1", nil)}})
		if err != nil || out.Events[0].Err != nil {
			t.Fatalf("report: %v %+v", err, out)
		}
		if len(out.Commands) == 0 {
			return n
		}
		body = out.Commands[0]
	}
}

// TestFairDispatchServesInTurn: chains sharing one slot are served in turn,
// each its burst at a time, the longest-waiting first. A command not handed
// back is deferred: the answer of the slot's next report that yields hands
// it out, so only the executions' first commands are announced (and
// claimed). Without fair dispatch the first chain would run to its end
// before the others started.
func TestFairDispatchServesInTurn(t *testing.T) {
	s := newStack(t)
	entry := s.register(t, bench.Chain("tests/turn", 6))
	names := map[int64]string{}
	var queue []int64 // executions whose first command waits, in announcement order
	for _, name := range []string{"a", "b", "c"} {
		x, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: entry.Path})
		if err != nil {
			t.Fatal(err)
		}
		names[x.ExecutionID] = name
		queue = append(queue, x.ExecutionID)
	}
	var served []string
	claims, handed := 0, 0
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		body, err := s.svc.Claim(s.ctx, s.pending(t, id)[0].IssuedEventID, "w1", true)
		if err != nil {
			t.Fatal(err)
		}
		claims++
		for body != nil {
			served = append(served, names[body.ExecutionID]+":"+body.Step)
			time.Sleep(controlplane.InTransit) // what was announced waits for the slot
			out, err := s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1,
				Events: []controlplane.EventInput{completion(body, "w1", nil)}})
			if err != nil || out.Events[0].Err != nil {
				t.Fatalf("report: %v %+v", err, out)
			}
			body = nil
			if len(out.Commands) == 1 {
				handed++
				body = out.Commands[0]
			}
		}
	}
	want := []string{"a:start", "a:s2", "b:start", "b:s2", "c:start", "c:s2", "a:s3", "a:s4", "b:s3", "b:s4",
		"c:s3", "c:s4", "a:s5", "a:s6", "b:s5", "b:s6", "c:s5", "c:s6"}
	if !slices.Equal(served, want) {
		t.Fatalf("served in the order\n%v\nwant\n%v", served, want)
	}
	// A claim and a notification per execution; every later step handed out
	// in an answer, its own chain's or a deferred one.
	if claims != 3 || handed != 15 {
		t.Fatalf("%d claims and %d commands handed out, want 3 and 15", claims, handed)
	}
	if n := s.notifications(t); n != 3 {
		t.Fatalf("%d notifications, want 3", n)
	}
	for id, name := range names {
		if st := s.execution(t, id).Status.Status; st != "COMPLETED" {
			t.Fatalf("execution %s is %s", name, st)
		}
	}
}

// TestFairDispatchAnnouncesWhatNoReportTakes: a deferred command that no
// report takes (the chains that reported have ended) is announced within
// about idleFor, so a worker's claim gets it.
func TestFairDispatchAnnouncesWhatNoReportTakes(t *testing.T) {
	s := newStack(t)
	a, _, body := startTwo(t, s, bench.Chain("tests/stranded", 3))
	out, err := s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1,
		Events: []controlplane.EventInput{completion(body, "w1", nil)}})
	if err != nil || len(out.Commands) != 1 {
		t.Fatalf("report: %v %+v", err, out)
	}
	time.Sleep(controlplane.InTransit) // b's first command waits for a slot
	if out, err = s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1,
		Events: []controlplane.EventInput{completion(out.Commands[0], "w1", nil)}}); err != nil || len(out.Commands) != 0 {
		t.Fatalf("report: %v %+v: want a's last step deferred", err, out)
	}
	if n := s.notifications(t); n != 2 {
		t.Fatalf("%d notifications right after a yielded, want 2", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.notifications(t) != 3 {
		if time.Now().After(deadline) {
			t.Fatal("a's deferred command was never announced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := s.svc.Claim(s.ctx, s.pending(t, a)[0].IssuedEventID, "w2", true); err != nil {
		t.Fatal(err)
	}
}

// startTwo starts two executions of a playbook and claims the first one's
// first command for w1.
func startTwo(t *testing.T, s *stack, yaml string) (a, b int64, body *controlplane.CommandBody) {
	t.Helper()
	entry := s.register(t, yaml)
	var ids []int64
	for range 2 {
		x, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: entry.Path})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x.ExecutionID)
	}
	body, err := s.svc.Claim(s.ctx, s.pending(t, ids[0])[0].IssuedEventID, "w1", true)
	if err != nil {
		t.Fatal(err)
	}
	return ids[0], ids[1], body
}

// deferredBehind starts two chains of 8 at path, a and b, and reports a's
// first two steps with one slot: a is handed its second command, then,
// past its burst, yields to b's waiting first command, so a's third is
// deferred. step reports a command's completion, and claims, with one slot
// to take.
func deferredBehind(t *testing.T, s *stack, path string) (a, b int64, step func(*controlplane.CommandBody, ...int64) *controlplane.ReportOutcome) {
	t.Helper()
	a, b, body := startTwo(t, s, bench.Chain(path, 8))
	step = func(body *controlplane.CommandBody, claims ...int64) *controlplane.ReportOutcome {
		t.Helper()
		time.Sleep(controlplane.InTransit) // what waits, waits for a slot
		out, err := s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1, Claims: claims,
			Events: []controlplane.EventInput{completion(body, "w1", nil)}})
		if err != nil || out.Events[0].Err != nil {
			t.Fatalf("report: %v %+v", err, out)
		}
		return out
	}
	out := step(body) // a:start, handed a:s2
	if out = step(out.Commands[0]); len(out.Commands) != 0 {
		t.Fatalf("a past its burst got %+v, want its next command deferred behind b's", out.Commands)
	}
	return a, b, step
}

// TestFairDispatchForgetsWhatEnded: a deferred command that ended before a
// report served it (its execution was cancelled) is dropped and no longer
// counts as waiting, so the chains stop yielding to it.
func TestFairDispatchForgetsWhatEnded(t *testing.T) {
	s := newStack(t)
	a, b, step := deferredBehind(t, s, "tests/forget")
	if err := s.svc.Cancel(s.ctx, a, "test"); err != nil {
		t.Fatal(err)
	}
	body, err := s.svc.Claim(s.ctx, s.pending(t, b)[0].IssuedEventID, "w1", true)
	if err != nil {
		t.Fatal(err)
	}
	out := step(body) // b:start, handed b:s2
	// b past its burst yields to a's deferred command, finds it ended, and
	// defers its own; announced once no report comes.
	if out = step(out.Commands[0]); len(out.Commands) != 0 {
		t.Fatalf("b got %+v, want nothing: a's command ended", out.Commands)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.notifications(t) != 3 {
		if time.Now().After(deadline) {
			t.Fatal("b's deferred command was never announced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if body, err = s.svc.Claim(s.ctx, s.pending(t, b)[0].IssuedEventID, "w1", true); err != nil {
		t.Fatal(err)
	}
	// Nothing waits: b runs on by eager dispatch, two steps in a row.
	for i := range 2 {
		if out = step(body); len(out.Commands) != 1 {
			t.Fatalf("b's step %d: got %+v, want its next command: nothing waits", i, out.Commands)
		}
		body = out.Commands[0]
	}
}

// TestFairDispatchForgetsWhatEndedUnserved: a deferred command that ended
// while no report came (its execution was cancelled) is found gone by the
// process's announcer, not by a report, and counts as waiting no more: the
// other chains do not yield to it.
func TestFairDispatchForgetsWhatEndedUnserved(t *testing.T) {
	s := newStack(t)
	a, b, step := deferredBehind(t, s, "tests/forget-unserved")
	deferred := s.pending(t, a)[0].IssuedEventID
	if err := s.svc.Cancel(s.ctx, a, "test"); err != nil {
		t.Fatal(err)
	}
	// No report comes: the announcer takes a's command and finds it ended.
	deadline := time.Now().Add(10 * time.Second)
	for s.svc.Waits("shared", deferred) {
		if time.Now().After(deadline) {
			t.Fatal("a's ended command still counts as waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
	body, err := s.svc.Claim(s.ctx, s.pending(t, b)[0].IssuedEventID, "w1", true)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing waits: b runs on by eager dispatch.
	for i := range 3 {
		if out := step(body); len(out.Commands) != 1 {
			t.Fatalf("b's step %d: got %+v, want its next command: nothing waits", i, out.Commands)
		} else {
			body = out.Commands[0]
		}
	}
}

// TestFairDispatchHandsOutOnce: a deferred command the worker also claims
// in the same report (its notification came from the drain's announcement
// again) is in the answer once.
func TestFairDispatchHandsOutOnce(t *testing.T) {
	s := newStack(t)
	a, b, step := deferredBehind(t, s, "tests/once")
	deferred := s.pending(t, a)[0]
	body, err := s.svc.Claim(s.ctx, s.pending(t, b)[0].IssuedEventID, "w1", true)
	if err != nil {
		t.Fatal(err)
	}
	out := step(body) // b:start, handed b:s2
	// b past its burst yields, and its slot is served a:s3, which the
	// worker claims in the same report.
	out = step(out.Commands[0], deferred.IssuedEventID)
	n := 0
	for _, c := range out.Commands {
		if c.CommandID == deferred.CommandID {
			n++
		}
	}
	if n != 1 || out.Claims[0].Err != nil {
		t.Fatalf("a:s3 is in the answer %d times (claim: %v), want once", n, out.Claims[0].Err)
	}
}

// downableStack makes a stack whose publisher fails while the returned
// flag is set, as NATS away does.
func downableStack(t *testing.T) (*stack, *atomic.Bool) {
	var down atomic.Bool
	s := newStack(t, func(c *controlplane.Config) {
		pub := c.Publisher
		c.Publisher = controlplane.PublisherFunc(func(ctx context.Context, subject, msgID string, data []byte) error {
			if down.Load() {
				return errors.New("nats: no servers available for connection")
			}
			return pub.Publish(ctx, subject, msgID, data)
		})
	})
	return s, &down
}

// TestFairDispatchServesWhatItCouldNotPublish: a deferred command announced
// while NATS is down (no report took it) reaches no worker until NATS is
// back; it is deferred again, so a report with a slot to spare still hands
// it out and its chain moves on.
func TestFairDispatchServesWhatItCouldNotPublish(t *testing.T) {
	s, down := downableStack(t)
	a, b, _ := deferredBehind(t, s, "tests/unpublished")
	down.Store(true)
	deferred := s.pending(t, a)[0]
	body, err := s.svc.Claim(s.ctx, s.pending(t, b)[0].IssuedEventID, "w1", true) // heard of before NATS went
	if err != nil {
		t.Fatal(err)
	}
	// No report comes: the announcer announces a:s3, into the outage.
	deadline := time.Now().Add(10 * time.Second)
	for s.notifications(t) != 3 || !s.svc.Waits("shared", deferred.IssuedEventID) {
		if time.Now().After(deadline) {
			t.Fatalf("a:s3 (%d notifications) does not wait to be handed out after its announcement failed", s.notifications(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Its announcement stays in the outbox for the drain: it is not
	// announced again from here while it waits.
	time.Sleep(3 * controlplane.IdleFor) // three of the announcer's rounds
	if n := s.notifications(t); n != 3 {
		t.Fatalf("%d notifications, want 3: a:s3 announced once", n)
	}
	out, err := s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 2,
		Events: []controlplane.EventInput{completion(body, "w1", nil)}})
	if err != nil || out.Events[0].Err != nil {
		t.Fatalf("report: %v %+v", err, out)
	}
	var got []string
	for _, c := range out.Commands {
		got = append(got, c.CommandID)
	}
	if len(got) != 2 || !slices.Contains(got, deferred.CommandID) {
		t.Fatalf("b's report with a slot to spare handed out %v, want b:s2 and a:s3 (%s)", got, deferred.CommandID)
	}
}

// TestFairDispatchKeepsChainsMovingWhileNATSIsDown: while NATS is down, a
// running chain keeps moving by eager dispatch (docs/outages.md): a command
// whose notification could not be published reaches no worker until NATS
// is back, so no chain yields to it, and the chain's own next commands are
// handed back in its reports' answers.
func TestFairDispatchKeepsChainsMovingWhileNATSIsDown(t *testing.T) {
	s, down := downableStack(t)
	entry := s.register(t, bench.Chain("tests/nats-down", 10))
	a, body := s.startClaimed(t, entry)
	down.Store(true)
	b, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: entry.Path})
	if err != nil {
		t.Fatal(err)
	}
	if s.svc.Waits("shared", s.pending(t, b.ExecutionID)[0].IssuedEventID) {
		t.Fatal("b's first command, whose notification failed, counts as waiting for a slot")
	}
	time.Sleep(controlplane.InTransit) // b's first command would wait for a slot, were it announced
	ranAll(t, s, a, body)
}

// ranAll reports chain a of 10 steps from body on with one slot, and
// checks every step was handed back and a completed.
func ranAll(t *testing.T, s *stack, a int64, body *controlplane.CommandBody) {
	t.Helper()
	if steps := 1 + handedInARow(t, s, body); steps != 10 {
		t.Fatalf("with NATS down, a ran %d of its 10 steps by its reports' answers, want all", steps)
	}
	if st := s.execution(t, a).Status.Status; st != "COMPLETED" {
		t.Fatalf("a is %s, want COMPLETED", st)
	}
}

// TestFairDispatchDoesNotYieldWhileNATSIsDown: a command announced just
// before NATS went down reaches no worker either; once a publish has
// failed, no chain yields (to it or any) until one succeeds again.
func TestFairDispatchDoesNotYieldWhileNATSIsDown(t *testing.T) {
	s, down := downableStack(t)
	entry := s.register(t, bench.Chain("tests/nats-going", 10))
	a, body := s.startClaimed(t, entry)
	if _, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: entry.Path}); err != nil {
		t.Fatal(err) // b: announced, not yet claimed
	}
	down.Store(true)
	if _, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: entry.Path}); err != nil {
		t.Fatal(err) // c: its publish fails
	}
	time.Sleep(controlplane.InTransit) // b's first command waits for a slot
	ranAll(t, s, a, body)
}
