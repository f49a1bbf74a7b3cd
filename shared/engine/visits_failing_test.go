// Visits and held arcs (R-J7), arc sets reaching the next visit (dsl.md §3),
// and what happens while an execution is FAILING (R-R9, R-R10).

package engine_test

import (
	"reflect"
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// visitsNeverOverlap checks R-J7 on a whole log: between a step's step.enter and
// its step.exit no other step.enter of that step appears.
func visitsNeverOverlap(t *testing.T, s *enginetest.Sim) {
	t.Helper()
	open := map[string]int64{}
	for _, e := range s.Log {
		switch e.Type {
		case eventtype.StepEnter:
			if seq, ok := open[e.Step]; ok {
				t.Fatalf("%s entered at seq %d while its visit entered at seq %d is running", e.Step, e.Seq, seq)
			}
			open[e.Step] = e.Seq
		case eventtype.StepExit, eventtype.StepSkipped:
			delete(open, e.Step)
		}
	}
}

// TestArcsIntoRunningVisitAreHeld: R-J7 — arcs fired into a step whose visit is
// running are held in its ledger (R-J2) and, when that visit ends, start ONE new
// visit: they coalesce, later arc set wins. The visits never overlap.
//
// The engine's own dispatch never fires an arc into a running visit: every step
// that can fire into t is in anc(t) (R-J1), t starts only when none of them is
// active (R-J3), and none can become active while t runs except through t
// itself (TestFedFromDeadlockedCycleRunsAfterIt covers the one way round that,
// the deadlock breaker). So the arcs are delivered as the server-owned step.exit
// events that carry them, posted while t's command is claimed: Handle is a pure
// function of (snapshot, event) and must keep R-J7 for any such log.
func TestArcsIntoRunningVisitAreHeld(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: [f1, f2]
  - step: f1
    tool: {kind: noop}
    next: [{step: t, set: {from: f1, a: 1}}]
  - step: f2
    tool: {kind: noop}
    next: [{step: t, set: {from: f2, b: 2}}]
  - step: t
    tool: {kind: noop, input: {from: "{{ from }}", a: "{{ a }}", b: "{{ b }}"}}
`)
	s.Default = echoArgs
	must(t, s.Start(nil))
	for range 3 { // start, f1, f2: their arcs coalesce into t's first visit
		if more, err := s.Step(); err != nil || !more {
			t.Fatalf("step: %v %v", more, err)
		}
	}
	p := s.Pending()
	if len(p) != 1 || p[0].Step != "t" || s.Count("step.enter", "t") != 1 {
		t.Fatalf("want t's first visit alone pending, got %d pending, t entered %d", len(p), s.Count("step.enter", "t"))
	}
	first := p[0]
	must(t, s.Claim(first, "w"))

	// Two arcs land while visit 1 runs.
	for _, f := range []struct {
		from string
		set  map[string]any
	}{
		{"f1", map[string]any{"from": "f1 again", "a": int64(10)}},
		{"f2", map[string]any{"from": "f2 again", "b": int64(20)}},
	} {
		must(t, s.Post(engine.Event{Type: eventtype.StepExit, Step: f.from, Status: lifecycle.ExecutionCompleted,
			Context: map[string]any{"fired": []any{map[string]any{"step": "t", "set": f.set}}}}))
	}
	snap := s.Snapshot()
	if st := snap.Steps["t"]; st.Visit == nil || st.Visit.N != 1 || len(st.Ledger) != 2 {
		t.Fatalf("t must keep running visit 1 with both arcs held in its ledger, got visit %+v ledger %+v", st.Visit, st.Ledger)
	}
	if s.Count("step.enter", "t") != 1 || len(s.Pending()) != 0 {
		t.Fatalf("an arc into a running visit must not start another: t entered %d, %d pending", s.Count("step.enter", "t"), len(s.Pending()))
	}

	// Visit 1 ends: the held arcs start exactly one new visit, after that exit.
	must(t, s.Finish(first, echoArgs(first)))
	if got := s.Result("t"); !reflect.DeepEqual(got, map[string]any{"from": "f2", "a": int64(1), "b": int64(2)}) {
		t.Fatalf("visit 1 saw %v", got)
	}
	if n := s.Count("step.enter", "t"); n != 2 {
		t.Fatalf("t entered %d times, want 2: the held arcs start one new visit", n)
	}
	if enter2, exit1 := s.Index("step.enter", "t", 1), s.Index("step.exit", "t", 0); enter2 < exit1 {
		t.Fatalf("visit 2 entered at %d before visit 1 exited at %d", enter2, exit1)
	}
	enter2 := s.Log[s.Index("step.enter", "t", 1)]
	wantSet := map[string]any{"from": "f2 again", "a": int64(10), "b": int64(20)}
	if !reflect.DeepEqual(enter2.Context["arc_set"], wantSet) || enter2.Context["visit"] != int64(2) {
		t.Fatalf("visit 2 enter context %v, want visit 2 with arc_set %v (coalesced, later wins, R-J2)", enter2.Context, wantSet)
	}
	must(t, s.RunToEnd(10))
	invariants(t, s)
	visitsNeverOverlap(t, s)
	if s.Status() != lifecycle.ExecutionCompleted || s.Count("step.enter", "t") != 2 || s.Count("command.issued", "t") != 2 {
		t.Fatalf("status %s, t entered %d, issued %d: two held arcs must coalesce into one visit",
			s.Status(), s.Count("step.enter", "t"), s.Count("command.issued", "t"))
	}
	if got := s.Result("t"); !reflect.DeepEqual(got, wantSet) {
		t.Fatalf("visit 2 saw %v, want %v", got, wantSet)
	}
}

// TestFedFromDeadlockedCycleRunsAfterIt: R-J6, R-J3, R-J7 — start fires into t and
// into both steps of the cycle b ↔ c. b and c wait for each other (a deadlock)
// and t waits for them (b and c are in anc(t); t is in neither's anc). The
// breaker must dispatch b, first in preorder of the two that block each other,
// not t, which merely waits on the deadlock: t is fed from inside the cycle and
// runs once, after it ends, seeing the cycle's final ctx. Dispatching t first
// (the first in preorder among all waiting steps) runs it before its active
// ancestors and then again after them.
func TestFedFromDeadlockedCycleRunsAfterIt(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.n: 0}
    next: [t, b, c]
  - step: t
    tool: {kind: noop, input: {n: "{{ ctx.n }}"}}
  - step: b
    tool: {kind: noop}
    set: {ctx.n: "{{ ctx.n + 1 }}"}
    next: [{step: c, when: "{{ ctx.n < 3 }}"}, t]
  - step: c
    tool: {kind: noop}
    next: b
`)
	s.Default = echoArgs
	run(t, s, nil)
	visitsNeverOverlap(t, s)
	if s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("status %s", s.Status())
	}
	if n := s.Count("step.enter", "t"); n != 1 {
		t.Fatalf("t entered %d times, want once, after the cycle (R-J7)", n)
	}
	if got := s.Result("t"); !reflect.DeepEqual(got, map[string]any{"n": int64(3)}) {
		t.Fatalf("t saw %v, want n = 3: it must run after the cycle ends", got)
	}
	if s.Count("step.enter", "b") != 3 || s.Index("step.enter", "t", 0) < s.Index("step.exit", "b", 2) {
		t.Fatalf("b entered %d times; t entered at %d, b's last exit at %d", s.Count("step.enter", "b"),
			s.Index("step.enter", "t", 0), s.Index("step.exit", "b", 2))
	}
	if s.Index("step.enter", "b", 0) > s.Index("step.enter", "c", 0) {
		t.Fatal("b is first in preorder of the deadlocked pair and must be dispatched first (R-J6)")
	}
}

// TestCancelWhileFailing: R-R10 — the first terminal event wins: a cancel while
// the execution is FAILING ends it CANCELLED; no playbook.failed is ever written,
// not even when the command it was waiting for reports late.
func TestCancelWhileFailing(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: [a, b]
  - step: a
    tool: {kind: noop}
  - step: b
    tool: {kind: noop}
    next: after_b
  - step: after_b
    tool: {kind: noop}
`)
	must(t, s.Start(nil))
	s.Step() // start
	p := s.Pending()
	if len(p) != 2 {
		t.Fatalf("want a and b pending, got %d", len(p))
	}
	a, b := p[0], p[1]
	must(t, s.Claim(b, "w2"))
	must(t, s.Claim(a, "w1"))
	must(t, s.Finish(a, enginetest.Reply{Status: "error", Error: "a broke"}))
	if s.Status() != lifecycle.ExecutionFailing || s.Count("playbook.failed", "") != 0 {
		t.Fatalf("status %s with %d playbook.failed: want FAILING while b runs", s.Status(), s.Count("playbook.failed", ""))
	}

	must(t, s.Post(engine.Event{Type: eventtype.PlaybookCancelled, Status: "CANCELLED", Context: map[string]any{"reason": "user"}}))
	if s.Status() != lifecycle.ExecutionCancelled {
		t.Fatalf("status %s after cancel while failing, want CANCELLED", s.Status())
	}
	if s.Commands[b.ID].Status != "CANCELLED" || s.StepStatus("b") != engine.StepCancelled {
		t.Fatalf("b's command %s, step %s: the running command must be cancelled", s.Commands[b.ID].Status, s.StepStatus("b"))
	}
	must(t, s.Finish(b, enginetest.Reply{Data: "late"}))
	invariants(t, s)
	if s.Status() != lifecycle.ExecutionCancelled || s.Count("playbook.failed", "") != 0 || s.Count("playbook.cancelled", "") != 1 {
		t.Fatalf("status %s, playbook.failed %d, playbook.cancelled %d", s.Status(), s.Count("playbook.failed", ""), s.Count("playbook.cancelled", ""))
	}
	if s.Count("step.enter", "after_b") != 0 {
		t.Fatal("a late result after cancel must route nowhere")
	}
	var terminal []string
	for _, e := range s.Log {
		switch e.Type {
		case eventtype.PlaybookCompleted, eventtype.PlaybookFailed, eventtype.PlaybookCancelled:
			terminal = append(terminal, e.Type)
		}
	}
	if !reflect.DeepEqual(terminal, []string{eventtype.PlaybookCancelled}) {
		t.Fatalf("terminal events %v, want only playbook.cancelled", terminal)
	}
}

// TestLateCompletionWhileFailing: R-R9 — a command that completes after the
// execution started FAILING records its step.exit (with its result), but no set
// is applied (neither the step's set nor _context_updates) and no arc is
// evaluated: the decision examines no arc and emits step.exit then
// playbook.failed, nothing else.
func TestLateCompletionWhileFailing(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.seen: start}
    next: [a, b]
  - step: a
    tool: {kind: noop}
  - step: b
    tool: {kind: noop}
    set: {ctx.b_out: "{{ output.v }}", ctx.seen: b}
    next: [{step: after_b, set: {x: 1}}]
  - step: after_b
    tool: {kind: noop}
`)
	var late *engine.Outcome
	s.Observe = func(trig engine.Event, out *engine.Outcome, _ []byte) {
		if trig.Type == eventtype.CommandCompleted && trig.Step == "b" {
			late = out
		}
	}
	must(t, s.Start(nil))
	s.Step() // start
	p := s.Pending()
	a, b := p[0], p[1]
	must(t, s.Claim(b, "w2"))
	must(t, s.Claim(a, "w1"))
	must(t, s.Finish(a, enginetest.Reply{Status: "error", Error: "a broke"}))
	if s.Status() != lifecycle.ExecutionFailing {
		t.Fatalf("status %s, want FAILING", s.Status())
	}
	ctxBefore := s.Snapshot().Ctx

	must(t, s.Finish(b, enginetest.Reply{Data: map[string]any{"v": int64(7), "_context_updates": map[string]any{"cu": int64(1)}}}))
	invariants(t, s)
	if late == nil {
		t.Fatal("b's completion was not observed")
	}
	var types []string
	for _, e := range late.Events {
		types = append(types, e.Type)
	}
	if !reflect.DeepEqual(types, []string{eventtype.StepExit, eventtype.PlaybookFailed}) {
		t.Fatalf("late completion emitted %v, want [step.exit playbook.failed] (no ctx.updated)", types)
	}
	if late.Work.ArcsExamined != 0 {
		t.Fatalf("late completion examined %d arcs, want none (R-R9)", late.Work.ArcsExamined)
	}
	exit := late.Events[0]
	if exit.Step != "b" || exit.Status != lifecycle.ExecutionCompleted || !reflect.DeepEqual(exit.Context["result"], map[string]any{"v": int64(7)}) {
		t.Fatalf("b's step.exit %s %s %v: the late result must be recorded", exit.Step, exit.Status, exit.Context)
	}
	if _, fired := exit.Context["fired"]; fired {
		t.Fatalf("b's step.exit lists fired arcs %v", exit.Context["fired"])
	}
	if got := s.Snapshot().Ctx; !reflect.DeepEqual(got, ctxBefore) || !reflect.DeepEqual(got, map[string]any{"seen": "start"}) {
		t.Fatalf("ctx %v changed (was %v): no set while failing", got, ctxBefore)
	}
	if s.Count("ctx.updated", "b") != 0 || s.Count("step.enter", "after_b") != 0 || s.Snapshot().Steps["after_b"] != nil {
		t.Fatal("b's set or arcs were applied")
	}
	if s.Status() != lifecycle.ExecutionFailed || s.StepStatus("b") != engine.StepCompleted {
		t.Fatalf("status %s, b %s", s.Status(), s.StepStatus("b"))
	}
}

// TestArcSetInStepEnter: dsl.md §3, R-T9 — an arc's set is rendered when the arc
// fires (output is the source's result), kept in the source's step.exit and in
// the target's step.enter context as arc_set (prefixes dropped, dotted keys
// nested), and bound for the target's visit at top level and under ctx., over
// durable ctx, for its when and its input alike. It never becomes durable.
func TestArcSetInStepEnter(t *testing.T) {
	s := sim(t, `
workload: {x: from_workload}
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.x: durable}
    next:
      - step: target
        set: {x: "{{ output.n + 1 }}", ctx.go: "{{ output.n > 0 }}", ctx.cfg.depth: 2}
  - step: target
    when: "{{ go }}"
    tool: {kind: noop, input: {x: "{{ x }}", ctx_x: "{{ ctx.x }}", depth: "{{ cfg.depth }}", ctx_depth: "{{ ctx.cfg.depth }}"}}
    next: after
  - step: after
    tool: {kind: noop, input: {x: "{{ x }}", go: "{{ go | default('unset') }}"}}
`)
	s.Default = echoArgs
	s.Tools = map[string]enginetest.Tool{"start": ok(map[string]any{"n": int64(41)})}
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("status %s", s.Status())
	}
	exit := s.Log[s.Index("step.exit", "start", 0)]
	wantFired := []any{map[string]any{"step": "target", "set": map[string]any{"x": int64(42), "go": true, "cfg.depth": int64(2)}}}
	if !reflect.DeepEqual(exit.Context["fired"], wantFired) {
		t.Fatalf("start's step.exit fired %v, want %v", exit.Context["fired"], wantFired)
	}
	if i := s.Index("step.enter", "target", 0); i < 0 {
		t.Fatalf("target never entered (skipped %d): its when must see the arc set", s.Count("step.skipped", "target"))
	}
	enter := s.Log[s.Index("step.enter", "target", 0)]
	wantArcSet := map[string]any{"x": int64(42), "go": true, "cfg": map[string]any{"depth": int64(2)}}
	if !reflect.DeepEqual(enter.Context["arc_set"], wantArcSet) {
		t.Fatalf("target's step.enter arc_set %v, want %v", enter.Context["arc_set"], wantArcSet)
	}
	if got := s.Result("target"); !reflect.DeepEqual(got, map[string]any{"x": int64(42), "ctx_x": int64(42), "depth": int64(2), "ctx_depth": int64(2)}) {
		t.Fatalf("target saw %v: the arc set must win over ctx and workload, at top level and under ctx", got)
	}
	if got := s.Result("after"); !reflect.DeepEqual(got, map[string]any{"x": "durable", "go": "unset"}) {
		t.Fatalf("after saw %v: the arc set is for the target's visit only", got)
	}
	if got := s.Snapshot().Ctx; !reflect.DeepEqual(got, map[string]any{"x": "durable"}) {
		t.Fatalf("ctx %v: arc set values must not become durable", got)
	}
	if n := s.Count("step.enter", "after"); n != 1 || s.Log[s.Index("step.enter", "after", 0)].Context["arc_set"] != nil {
		t.Fatal("after's step.enter must carry no arc_set")
	}
}
