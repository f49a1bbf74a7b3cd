package controlplane_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
)

// completion is our worker's one event per step: command.completed carrying
// the tool's result (R-R3), from the claim's holder.
func completion(b *controlplane.CommandBody, worker string, data any) controlplane.EventInput {
	return controlplane.EventInput{ExecutionID: b.ExecutionID, Step: b.Step, Type: "command.completed", Status: "success",
		WorkerID: worker, ClientEventID: fmt.Sprintf("%s-%d-done", b.CommandID, b.Attempt),
		Meta:    map[string]any{"command_id": b.CommandID, "attempt": int64(b.Attempt)},
		Payload: map[string]any{"command_id": b.CommandID, "result": map[string]any{"status": "success", "data": data}}}
}

const loopYAML = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fan, path: tests/fan}
workflow:
  - step: start
    tool: {kind: noop, result: {n: 1}}
    next: fan
  - step: fan
    loop: {in: "{{ [1, 2, 3] }}", iterator: i, spec: {mode: parallel}}
    tool: {kind: noop, result: {i: "{{ i }}"}}
    next: end
  - step: end
    tool: {kind: noop}
`

// TestReportHandsOutWhatItIssued: a report of a step's end gives the worker
// the commands it issued, claimed and started, within take; the rest wait
// for a claim. Iterations reported together are folded in one transaction,
// the last one reading the others' results written in it.
func TestReportHandsOutWhatItIssued(t *testing.T) {
	s := newStack(t)
	entry := s.register(t, loopYAML)
	started, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: entry.Path})
	if err != nil {
		t.Fatal(err)
	}
	first := s.pending(t, started.ExecutionID)[0]
	body, err := s.svc.Claim(s.ctx, first.IssuedEventID, "w1", true)
	if err != nil || body.Status != store.CommandRunning {
		t.Fatalf("claim with start: %+v %v", body, err)
	}
	out, err := s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 2,
		Events: []controlplane.EventInput{completion(body, "w1", map[string]any{"n": int64(1)})}})
	if err != nil || out.Events[0].Err != nil {
		t.Fatalf("report: %v %+v", err, out)
	}
	if len(out.Commands) != 2 {
		t.Fatalf("handed %d commands, want 2 of the loop's 3", len(out.Commands))
	}
	if p := s.pending(t, started.ExecutionID); len(p) != 1 {
		t.Fatalf("%d pending, want the third iteration", len(p))
	}
	third, err := s.svc.Claim(s.ctx, s.pending(t, started.ExecutionID)[0].IssuedEventID, "w1", true)
	if err != nil {
		t.Fatal(err)
	}
	var evs []controlplane.EventInput
	for _, c := range append(out.Commands, third) {
		if c.Status != store.CommandRunning || c.WorkerID != "w1" {
			t.Fatalf("handed command %+v", c)
		}
		evs = append(evs, completion(c, "w1", c.Context["tool_config"].(map[string]any)["result"]))
	}
	out, err = s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 4, Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range out.Events {
		if e.Err != nil {
			t.Fatalf("event %d: %v", i, e.Err)
		}
	}
	if len(out.Commands) != 1 || out.Commands[0].Step != "end" {
		t.Fatalf("after the loop, handed %+v; want end", out.Commands)
	}
	v := s.execution(t, started.ExecutionID)
	if got := fmt.Sprint(v.Steps["fan"].Result); got != "[map[i:1] map[i:2] map[i:3]]" {
		t.Fatalf("fan's result %s", got)
	}
}

// TestReportPostedAgainHandsOutWhatItsAnswerCarried: a report posted again
// after its answer was lost (the worker re-posts it as is) hands out again
// the commands the lost answer carried: they are held by this worker, which
// never got them. A command it held since before the reported event is
// not in the answer.
func TestReportPostedAgainHandsOutWhatItsAnswerCarried(t *testing.T) {
	s := newStack(t)
	_, body := s.startClaimed(t, s.register(t, loopYAML))
	// post sends r and returns the ids of the commands handed out, sorted.
	var handed []*controlplane.CommandBody
	var dup bool // the report's event was a duplicate
	post := func(r controlplane.Report) (ids []string) {
		t.Helper()
		out, err := s.svc.Report(s.ctx, r)
		if err != nil || out.Events[0].Err != nil {
			t.Fatalf("report: %v %+v", err, out)
		}
		for _, c := range out.Commands {
			if c.Status != store.CommandRunning || c.WorkerID != "w1" || c.Attempt != 1 || c.Context["tool_config"] == nil {
				t.Fatalf("handed command %+v", c)
			}
			ids = append(ids, c.CommandID)
		}
		handed, dup = out.Commands, out.Events[0].Duplicate
		slices.Sort(ids)
		return ids
	}
	r := controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 2, Events: []controlplane.EventInput{completion(body, "w1", map[string]any{"n": int64(1)})}}
	first := post(r)
	iters := handed
	if again := post(r); len(first) != 2 || !dup || !slices.Equal(first, again) {
		t.Fatalf("the report posted again (its event a duplicate: %v) handed out %v, want what its lost answer carried: %v", dup, again, first)
	}
	// An iteration's end issues nothing (one is left); posted again, it
	// hands out nothing either: the other iteration w1 holds was handed out
	// before it.
	r = controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 2, Events: []controlplane.EventInput{completion(iters[0], "w1", nil)}}
	if got := post(r); len(got) != 0 {
		t.Fatalf("an iteration's end handed out %v, want nothing", got)
	}
	if again := post(r); len(again) != 0 {
		t.Fatalf("an iteration's end posted again handed out %v, want nothing: w1 held it before", again)
	}
}

// TestReportRetryGoesThroughClaim: a failure retried at once is announced,
// not handed back with the report (its row was read without the payload),
// and the claim of the retry carries the whole command.
func TestReportRetryGoesThroughClaim(t *testing.T) {
	s := newStack(t)
	entry := s.register(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: retry, path: tests/report-retry}
workflow:
  - step: start
    retry: {max_attempts: 2, delay: 0}
    tool: {kind: noop, result: {ok: true}}
`)
	id, body := s.startClaimed(t, entry)
	failed := controlplane.EventInput{ExecutionID: body.ExecutionID, Step: body.Step, Type: "command.failed", Status: "FAILED",
		WorkerID: "w1", Meta: map[string]any{"command_id": body.CommandID, "attempt": int64(1)},
		Payload: map[string]any{"command_id": body.CommandID, "error": "boom",
			"result": map[string]any{"status": "error", "error": map[string]any{"message": "boom"}}}}
	out, err := s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 4, Events: []controlplane.EventInput{failed}})
	if err != nil || out.Events[0].Err != nil {
		t.Fatalf("report: %v %+v", err, out)
	}
	if len(out.Commands) != 0 {
		t.Fatalf("the retry was handed back: %+v", out.Commands[0])
	}
	p := s.pending(t, id)
	if len(p) != 1 || p[0].Attempt != 2 {
		t.Fatalf("pending %+v, want the retry (attempt 2)", p)
	}
	again, err := s.svc.Claim(s.ctx, p[0].IssuedEventID, "w1", true)
	if err != nil || again.Attempt != 2 || again.Context["tool_config"] == nil {
		t.Fatalf("claim of the retry: %+v %v", again, err)
	}
}

// growYAML grows its ctx by 20,000 bytes a step, 50 steps.
const growYAML = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: grow, path: tests/grow}
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.n: 0, ctx.big: ""}
    next: grow
  - step: grow
    tool: {kind: noop}
    set: {ctx.n: "{{ ctx.n + 1 }}", ctx.big: "{{ ctx.big ~ ('x' * 20000) }}"}
    next: [{step: grow, when: "{{ ctx.n < 50 }}"}]
`

// TestStateBound (issue 10): an execution whose state grows past
// MaxStateBytes ends FAILED naming the limit, and what it stored stays
// within the bound plus one step's growth.
func TestStateBound(t *testing.T) {
	const limit = 64 << 10
	s := newStack(t, func(c *controlplane.Config) { c.MaxStateBytes = limit })
	entry := s.register(t, growYAML)
	started, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: entry.Path})
	if err != nil {
		t.Fatal(err)
	}
	s.drive(t, started.ExecutionID, func(store.Command) any { return map[string]any{} })
	v := s.execution(t, started.ExecutionID)
	if v.Row.Status != lifecycle.ExecutionFailed || !strings.Contains(v.Row.Error, "MaxStateBytes") {
		t.Fatalf("status %s, error %q; want FAILED naming MaxStateBytes", v.Row.Status, v.Row.Error)
	}
	if n := len(v.Row.State); n > limit+64<<10 {
		t.Fatalf("stored state %d bytes, over the bound plus one step's growth", n)
	}
	if n := v.Context["n"].(int64); n >= 50 || n < 2 {
		t.Fatalf("the loop ran %d times", n)
	}
}

// TestStateBoundHandsOutNothingItCancelled: the report whose completion takes
// the state past MaxStateBytes fails the execution at commit, which cancels
// the command that completion issued; the answer carried it all the same,
// and the worker ran it until its first heartbeat was refused (the liveness
// review of 2026-11-29, F7). Now what the commit cancelled is not handed
// out.
func TestStateBoundHandsOutNothingItCancelled(t *testing.T) {
	const limit = 64 << 10
	s := newStack(t, func(c *controlplane.Config) { c.MaxStateBytes = limit })
	entry := s.register(t, growYAML)
	id, body := s.startClaimed(t, entry)
	for range 50 {
		out, err := s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1,
			Events: []controlplane.EventInput{completion(body, "w1", map[string]any{})}})
		if err != nil || out.Events[0].Err != nil {
			t.Fatalf("report: %v %+v", err, out)
		}
		if v := s.execution(t, id); v.Row.Status != lifecycle.ExecutionRunning {
			if v.Row.Status != lifecycle.ExecutionFailed || !strings.Contains(v.Row.Error, "MaxStateBytes") {
				t.Fatalf("status %s, error %q; want FAILED naming MaxStateBytes", v.Row.Status, v.Row.Error)
			}
			if len(out.Commands) != 0 {
				t.Fatalf("the answer that failed the execution hands out %s (%s), which its commit cancelled",
					out.Commands[0].Step, out.Commands[0].CommandID)
			}
			return
		}
		if len(out.Commands) != 1 {
			t.Fatalf("the answer hands out %d commands while the execution runs, want its next", len(out.Commands))
		}
		body = out.Commands[0]
	}
	t.Fatal("the state never grew past its bound")
}
