package engine

import (
	"fmt"
	"maps"
	"reflect"
	"testing"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

// Every test of the package checks that a view brought up to date (the
// entries of the steps that changed, another arc set) is the view built
// afresh.
func init() { CheckViews(true) }

// CheckViews turns that check on or off (off: a test measuring the cost of
// a decision, which the check makes quadratic).
func CheckViews(on bool) {
	checkView = nil
	if on {
		checkView = func(got, want map[string]any) {
			if !reflect.DeepEqual(got, want) {
				panic(fmt.Sprintf("view kept up to date:\n%v\nbuilt afresh:\n%v", got, want))
			}
		}
	}
}

// TestViewsFollowApply holds apply's lists to Apply: a command's bookkeeping
// leaves `steps` and `ctx` as they were and is not counted; a step's enter,
// skip and exit change no entry but that step's; ctx.updated and
// step.rerouted change no entry; a final command.completed, in none of the
// lists, changes an entry; an event that changes ctx is counted as a change
// of the context.
func TestViewsFollowApply(t *testing.T) {
	pb, diags := parser.Parse([]byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t, path: tests/t}
workflow:
  - step: start
    loop: {in: "{{ [1, 2, 3] }}", iterator: i}
    tool: {kind: noop}
    next: b
  - step: b
    tool: {kind: noop}
    next: c
  - step: c
    tool: {kind: noop}
`))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	snap := func() *Snapshot {
		s := NewSnapshot()
		s.Status, s.Seq, s.Running = "RUNNING", 5, 1
		s.Ctx["k"] = "v"
		s.Steps["start"] = &StepState{Status: StepRunning, Visits: 1, Attempts: 1,
			Visit: &Visit{N: 1, ArcSet: map[string]any{"via": "x"}, InFlight: 1, Loop: &LoopState{Total: 3, Iterator: "i", Issued: 1}}}
		s.Steps["c"] = &StepState{Status: StepCompleted, Visits: 1, Attempts: 1, Bound: true, Result: "r"}
		s.Commands["c1"] = &CommandState{Step: "start", Visit: 1, Index: 0, EventID: 3, Status: CmdClaimed, Attempt: 2, MaxAttempts: 3}
		return s
	}
	meta := func(kv ...any) map[string]any {
		m := map[string]any{"command_id": "c1"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	const (
		bookkeeping = iota // nothing changes, not counted
		oneStep            // only ev.Step's entry may change
		noStep             // no entry changes
		someStep           // an entry changes
	)
	for _, c := range []struct {
		kind int
		ev   Event
	}{
		{bookkeeping, Event{Type: eventtype.CommandIssued, Step: "start", CommandID: "c2", Meta: map[string]any{"command_id": "c2", "visit": int64(1), "iteration_index": int64(1), "attempt": int64(1), "max_attempts": int64(3)}}},
		{bookkeeping, Event{Type: eventtype.CommandClaimed, Step: "start", CommandID: "c1", WorkerID: "w", Meta: meta("attempt", int64(2), "started", true)}},
		{bookkeeping, Event{Type: eventtype.CommandStarted, Step: "start", CommandID: "c1", Meta: meta()}},
		{bookkeeping, Event{Type: eventtype.CallDone, Step: "start", CommandID: "c1", Meta: meta(), Result: map[string]any{"status": "success"}}},
		{bookkeeping, Event{Type: eventtype.CallError, Step: "start", CommandID: "c1", Meta: meta(), Result: map[string]any{"status": "error"}}},
		{bookkeeping, Event{Type: eventtype.CommandRetry, Step: "start", CommandID: "c1", Meta: meta("attempt", int64(3))}},
		{bookkeeping, Event{Type: eventtype.CommandCancelled, Step: "start", CommandID: "c1", Meta: meta()}},
		{bookkeeping, Event{Type: eventtype.LoopClaimed, Step: "start", Context: map[string]any{"visit": int64(1), "total": int64(5), "drained": true, "txid": "t"}}},
		{oneStep, Event{Type: eventtype.StepEnter, Step: "b", Context: map[string]any{"visit": int64(1)}}},
		{oneStep, Event{Type: eventtype.StepSkipped, Step: "b"}},
		{oneStep, Event{Type: eventtype.StepExit, Step: "start", Status: "COMPLETED", Context: map[string]any{"visit": int64(1), "result": "x",
			"fired": []any{map[string]any{"step": "c"}}}}},
		{oneStep, Event{Type: eventtype.StepExit, Step: "start", Status: "FAILED", Context: map[string]any{"visit": int64(1), "error": "e"}}},
		{noStep, Event{Type: eventtype.CtxUpdated, Step: "start", Context: map[string]any{"values": map[string]any{"k": "w", "n": int64(1)}}}},
		{noStep, Event{Type: eventtype.StepRerouted, Step: "start", Context: map[string]any{"fired": []any{map[string]any{"step": "b"}}}}},
		{someStep, Event{Type: eventtype.CommandCompleted, Step: "start", CommandID: "c1", Status: "success",
			Meta: meta("attempt", int64(2)), Result: map[string]any{"status": "success", "context": map[string]any{"status": "success"}}}},
	} {
		ev := c.ev
		s := snap()
		d := &decider{pb: pb, s: s, local: map[ResultKey]any{}}
		b := &bindings{arcSet: s.Steps["start"].Visit.ArcSet}
		steps, ctx := d.stepsView(b), d.ctx(b)
		d.steps(b) // kept up to date from here
		gen, ctxGen := d.gen, d.ctxGen
		ev.Seq = s.Seq + 1
		d.apply(ev)
		unchanged := snap()
		unchanged.Seq = ev.Seq
		if reflect.DeepEqual(unchanged, s) {
			t.Fatalf("%s changed nothing: the test's event or snapshot is wrong", ev.Type)
		}
		b = &bindings{arcSet: b.arcSet}
		after := d.stepsView(b)
		if got := d.steps(b); !reflect.DeepEqual(got, after) {
			t.Errorf("%s: steps kept up to date %v, built afresh %v", ev.Type, got, after)
		}
		others, othersAfter := maps.Clone(steps), maps.Clone(after)
		delete(others, ev.Step)
		delete(othersAfter, ev.Step)
		same, sameOthers := reflect.DeepEqual(steps, after), reflect.DeepEqual(others, othersAfter)
		sameCtx, counted := reflect.DeepEqual(ctx, d.ctx(b)), d.gen != gen
		if !sameCtx && d.ctxGen == ctxGen {
			t.Errorf("%s changes ctx, but apply does not count it as a change of the context", ev.Type)
		}
		switch c.kind {
		case bookkeeping:
			if !same || !sameCtx || counted {
				t.Errorf("%s: steps unchanged %v, ctx unchanged %v, counted %v; want unchanged and not counted (apply's first list)", ev.Type, same, sameCtx, counted)
			}
		case oneStep:
			if !sameOthers || !counted {
				t.Errorf("%s: other steps unchanged %v, counted %v; want unchanged and counted (apply's second list)", ev.Type, sameOthers, counted)
			}
		case noStep:
			if !same || !counted {
				t.Errorf("%s: steps unchanged %v, counted %v; want unchanged and counted (apply's third list)", ev.Type, same, counted)
			}
		case someStep:
			if same || !counted {
				t.Errorf("%s: steps unchanged %v, counted %v; want changed and counted", ev.Type, same, counted)
			}
		}
	}
}
