package engine_test

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// failWhenStrict is a tool that fails while its input says strict: v1 of the
// playbooks below passes strict, v2 (the fix) does not.
func failWhenStrict(c *enginetest.Cmd) enginetest.Reply {
	if enginetest.Args(c)["strict"] == true {
		return enginetest.Reply{Status: "error", Error: "strict check refused the row"}
	}
	return enginetest.Reply{Data: map[string]any{"checked": true}}
}

// issued counts command.issued per step (iteration index when >= 0).
func issued(s *enginetest.Sim, step string) int { return s.Count(eventtype.CommandIssued, step) }

// redriveTo redrives the ended execution under body and runs it to its end,
// which must be COMPLETED with want commands issued per step in all.
func redriveTo(t *testing.T, s *enginetest.Sim, body string, version int, want map[string]int) {
	t.Helper()
	if err := s.Redrive(parse(t, body), version); err != nil {
		t.Fatal(err)
	}
	if err := s.RunToEnd(100000); err != nil {
		t.Fatal(err)
	}
	invariants(t, s)
	if s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("after redrive: status %s, want COMPLETED", s.Status())
	}
	for step, n := range want {
		if got := issued(s, step); got != n {
			t.Errorf("%s: %d commands issued in all, want %d", step, got, n)
		}
	}
}

const pipelineV1 = `
workflow:
  - step: start
    tool: {kind: noop}
    next: fetch
  - step: fetch
    tool: {kind: python, code: "x", input: {n: 1}}
    set:
      ctx.rows: "{{ output.rows }}"
    next: check
  - step: check
    tool: {kind: python, code: "x", input: {strict: true}}
    next: done
  - step: done
    tool: {kind: noop}
`

// A failed execution redriven under the fixed version completes; the steps
// that completed before ran once in all, the failed step once more, the
// unreached one once (issue 31).
func TestRedriveRunsWhatDidNotComplete(t *testing.T) {
	s := sim(t, pipelineV1)
	s.Tools = map[string]enginetest.Tool{
		"fetch": func(*enginetest.Cmd) enginetest.Reply {
			return enginetest.Reply{Data: map[string]any{"rows": int64(3)}}
		},
		"check": failWhenStrict,
	}
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed {
		t.Fatalf("v1: status %s, want FAILED", s.Status())
	}
	redriveTo(t, s, pipelineV2(pipelineV1), 2, map[string]int{"start": 1, "fetch": 1, "check": 2, "done": 1})
	if got := s.Snapshot().Ctx["rows"]; got != int64(3) {
		t.Errorf("ctx.rows = %v, want the completed fetch's 3 kept", got)
	}
	if n := s.Count(eventtype.PlaybookRedriven, ""); n != 1 {
		t.Errorf("%d playbook.redriven events, want 1", n)
	}
	if st := s.Snapshot().Steps["check"]; st.Visits != 2 || st.Status != engine.StepCompleted {
		t.Errorf("check: %+v, want completed at visit 2", st)
	}
}

func pipelineV2(v1 string) string {
	return replaceOnce(v1, "input: {strict: true}", "input: {strict: false}")
}

func replaceOnce(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic("replaceOnce: " + old + " not found")
	}
	return strings.Replace(s, old, new, 1)
}

// Routing is decided afresh from the completed steps under the new version:
// v1 routed pick to a step that fails; v2 routes the same result elsewhere.
func TestRedriveRoutesAfresh(t *testing.T) {
	v1 := `
workflow:
  - step: start
    tool: {kind: noop}
    next: pick
  - step: pick
    tool: {kind: python, code: "x"}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: legacy
          when: "{{ output.kind == 'new' }}"
        - step: modern
  - step: legacy
    tool: {kind: python, code: "x", input: {strict: true}}
  - step: modern
    tool: {kind: noop}
`
	v2 := replaceOnce(v1, "output.kind == 'new'", "output.kind == 'old'")
	s := sim(t, v1)
	s.Tools = map[string]enginetest.Tool{
		"pick":   func(*enginetest.Cmd) enginetest.Reply { return enginetest.Reply{Data: map[string]any{"kind": "new"}} },
		"legacy": failWhenStrict,
	}
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed {
		t.Fatalf("v1: %s", s.Status())
	}
	redriveTo(t, s, v2, 2, map[string]int{"start": 1, "pick": 1, "legacy": 1, "modern": 1})
	if got := s.StepStatus("legacy"); got != engine.StepSkipped {
		t.Errorf("legacy after redrive: %s, want skipped (no arc reaches it under v2)", got)
	}
	if n := s.Count(eventtype.StepRerouted, "pick"); n != 1 {
		t.Errorf("pick rerouted %d times, want 1", n)
	}
}

// loopPlaybook is start, then each: a loop of five at once over items whose
// tool input says strict (v1 of the loop tests).
func loopPlaybook(items string) string {
	return `
workflow:
  - step: start
    tool: {kind: noop}
    next: each
  - step: each
    loop: {in: "{{ ` + items + ` }}", iterator: n, spec: {mode: parallel, max_in_flight: 5}}
    tool: {kind: python, code: "x", input: {n: "{{ n }}", strict: true}}
`
}

// A loop resumes: the iterations that completed keep their results and are
// not issued again; the failed and cancelled ones run; the loop's result is
// every iteration's, in order.
func TestRedriveResumesLoops(t *testing.T) {
	v1 := loopPlaybook("[1, 2, 3, 4, 5]") + `    next: done
  - step: done
    tool: {kind: noop}
`
	s := sim(t, v1)
	s.Tools = map[string]enginetest.Tool{"each": func(c *enginetest.Cmd) enginetest.Reply {
		a := enginetest.Args(c)
		if a["n"] == int64(3) && a["strict"] == true {
			return enginetest.Reply{Status: "error", Error: "three is refused"}
		}
		return enginetest.Reply{Data: map[string]any{"sq": jsonx.Int(a["n"]) * jsonx.Int(a["n"])}}
	}}
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed {
		t.Fatalf("v1: %s", s.Status())
	}
	completed := map[int]bool{}
	for k := range s.Results {
		if k.Kind == engine.KindStepResult && k.Step == "each" && k.Index >= 0 {
			completed[k.Index] = true
		}
	}
	if len(completed) == 0 || len(completed) == 5 {
		t.Fatalf("v1 completed iterations %v: the test needs some, not all", completed)
	}
	before := iterationsIssued(s, "each")
	redriveTo(t, s, replaceOnce(v1, "strict: true", "strict: false"), 2, map[string]int{"start": 1, "done": 1})
	after := iterationsIssued(s, "each")
	for i := 0; i < 5; i++ {
		want := before[i] + 1
		if completed[i] {
			want = 1 // kept: never issued again
		}
		if after[i] != want {
			t.Errorf("iteration %d (completed in v1: %v): issued %d times in all, want %d", i, completed[i], after[i], want)
		}
	}
	var want []any
	for n := int64(1); n <= 5; n++ {
		want = append(want, map[string]any{"sq": n * n})
	}
	if got := s.Result("each"); string(jsonx.MustMarshal(got)) != string(jsonx.MustMarshal(want)) {
		t.Errorf("each result %s, want %s", jsonx.MustMarshal(got), jsonx.MustMarshal(want))
	}
}

// A version without a step that completed cannot continue the path: the
// error names the step.
func TestRedriveRefusesADroppedStep(t *testing.T) {
	s := sim(t, pipelineV1)
	s.Tools = map[string]enginetest.Tool{"check": failWhenStrict}
	run(t, s, nil)
	renamed := replaceOnce(replaceOnce(pipelineV2(pipelineV1), "step: fetch", "step: load"), "next: fetch", "next: load")
	err := s.Redrive(parse(t, renamed), 2)
	var missing *engine.MissingStepError
	if !errors.As(err, &missing) || missing.Step != "fetch" {
		t.Fatalf("redrive under a version without fetch: %v, want a MissingStepError naming fetch", err)
	}
}

// A cancelled execution continues too; one still running is not reopened by
// the event (the control plane refuses it first).
func TestRedriveCancelledAndRunning(t *testing.T) {
	s := sim(t, pipelineV2(pipelineV1))
	if err := s.Start(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Step(); err != nil { // start completes; fetch is pending
		t.Fatal(err)
	}
	before := s.Snapshot()
	if err := s.Post(engine.Redrive{Version: 1}.Event()); err != nil {
		t.Fatal(err)
	}
	if err := enginetest.SameState(before, withSeq(s.Snapshot(), before.Seq)); err != nil {
		t.Fatalf("a redrive of a running execution changed it: %v", err)
	}
	if err := s.Post(engine.Event{Type: eventtype.PlaybookCancelled, Status: "CANCELLED", Context: map[string]any{"reason": "test"}}); err != nil {
		t.Fatal(err)
	}
	if s.Status() != lifecycle.ExecutionCancelled {
		t.Fatalf("status %s", s.Status())
	}
	redriveTo(t, s, pipelineV2(pipelineV1), 1, map[string]int{"start": 1, "fetch": 2, "check": 1, "done": 1})
}

// A failed start step starts again.
func TestRedriveFailedStart(t *testing.T) {
	v1 := `
workflow:
  - step: start
    tool: {kind: python, code: "x", input: {strict: true}}
    next: done
  - step: done
    tool: {kind: noop}
`
	s := sim(t, v1)
	s.Tools = map[string]enginetest.Tool{"start": failWhenStrict}
	run(t, s, nil)
	redriveTo(t, s, replaceOnce(v1, "strict: true", "strict: false"), 2, map[string]int{"start": 2, "done": 1})
}

func iterationsIssued(s *enginetest.Sim, step string) map[int]int {
	n := map[int]int{}
	for _, e := range s.Log {
		if e.Type == eventtype.CommandIssued && e.Step == step {
			n[jsonx.Int(e.Meta["iteration_index"])]++
		}
	}
	return n
}

func withSeq(s *engine.Snapshot, seq int64) *engine.Snapshot { s.Seq = seq; return s }

// Kept iterations that are not contiguous stay skipped across events (the
// stored snapshot keeps them): v1 ran five iterations at once and two
// failed; v2, sequential, runs those two, one after the other, and nothing
// else.
func TestRedriveResumesAroundKeptIterations(t *testing.T) {
	v1 := loopPlaybook("[0, 1, 2, 3, 4]")
	s := sim(t, v1)
	if err := s.Start(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Step(); err != nil { // start
		t.Fatal(err)
	}
	cmds := s.Pending()
	if len(cmds) != 5 {
		t.Fatalf("%d iterations pending, want 5", len(cmds))
	}
	for _, c := range cmds {
		if err := s.Claim(c, "w"); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{0, 2, 4, 1, 3} {
		r := enginetest.Reply{Data: map[string]any{"n": int64(i)}}
		if i%2 == 1 {
			r = enginetest.Reply{Status: "error", Error: "odd"}
		}
		if err := s.Finish(cmds[i], r); err != nil {
			t.Fatal(err)
		}
	}
	if s.Status() != lifecycle.ExecutionFailed {
		t.Fatalf("v1: %s", s.Status())
	}
	v2 := replaceOnce(replaceOnce(v1, "strict: true", "strict: false"), "mode: parallel, max_in_flight: 5", "mode: sequential")
	s.Tools = map[string]enginetest.Tool{"each": func(c *enginetest.Cmd) enginetest.Reply {
		return enginetest.Reply{Data: map[string]any{"n": enginetest.Args(c)["n"]}}
	}}
	redriveTo(t, s, v2, 2, map[string]int{"start": 1})
	n := iterationsIssued(s, "each")
	if n[0] != 1 || n[1] != 2 || n[2] != 1 || n[3] != 2 || n[4] != 1 {
		t.Fatalf("iterations issued %v, want 0, 2 and 4 once (kept), 1 and 3 twice", n)
	}
	want := `[{"n":0},{"n":1},{"n":2},{"n":3},{"n":4}]`
	if got := string(jsonx.MustMarshal(s.Result("each"))); got != want {
		t.Errorf("each: %s, want %s", got, want)
	}
}

// The hand-written snapshot encoder writes what a redrive keeps exactly as
// encoding/json does.
func TestRedriveSnapshotEncoding(t *testing.T) {
	s := engine.NewSnapshot()
	s.Steps["each"] = &engine.StepState{Status: engine.StepPending, Visits: 1, Kept: &engine.KeptIterations{Visit: 1, Indexes: []int{0, 2}}}
	s.Steps["other"] = &engine.StepState{Status: engine.StepRunning, Visits: 2,
		Visit: &engine.Visit{N: 2, Loop: &engine.LoopState{Total: 4, Done: 2, Kept: []int{1, 3}}}}
	got, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if want := reflected(t, s); string(got) != string(want) {
		t.Fatalf("Marshal:\n%s\nencoding/json:\n%s", got, want)
	}
	back, err := engine.UnmarshalSnapshot(got)
	if err != nil || back.Steps["each"].Kept.Indexes[1] != 2 || back.Steps["other"].Visit.Loop.Kept[1] != 3 {
		t.Fatalf("decoded: %+v %v", back.Steps, err)
	}
}

// A completed step's arcs are evaluated again with its last visit's arc set
// bound (here the mode its entering arc set), as when the visit ended.
func TestRedriveRoutesWithTheVisitsArcSet(t *testing.T) {
	v1 := `
workflow:
  - step: start
    tool: {kind: noop}
    next: [{step: pick, set: {mode: fast}}]
  - step: pick
    tool: {kind: noop}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: quick
          when: "{{ mode == 'fast' }}"
        - step: slow
  - step: quick
    tool: {kind: python, code: "x", input: {strict: true}}
  - step: slow
    tool: {kind: noop}
`
	s := sim(t, v1)
	s.Tools = map[string]enginetest.Tool{"quick": failWhenStrict}
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed {
		t.Fatalf("v1: %s", s.Status())
	}
	redriveTo(t, s, replaceOnce(v1, "strict: true", "strict: false"), 2, map[string]int{"start": 1, "pick": 1, "quick": 2, "slow": 0})
}

// A step that failed inside a cycle (a paging step that routes back to
// itself) resumes at the visit that failed, with the arc that started it:
// the pages fetched before are not fetched again.
func TestRedriveResumesACycle(t *testing.T) {
	v1 := `
workflow:
  - step: start
    tool: {kind: noop}
    next: [{step: fetch, set: {page: 1}}]
  - step: fetch
    tool: {kind: python, code: "x", input: {page: "{{ page }}", strict: true}}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: fetch
          when: "{{ output.more }}"
          set: {page: "{{ page + 1 }}"}
        - step: done
  - step: done
    tool: {kind: noop}
`
	s := sim(t, v1)
	s.Tools = map[string]enginetest.Tool{"fetch": func(c *enginetest.Cmd) enginetest.Reply {
		a := enginetest.Args(c)
		if a["page"] == int64(4) && a["strict"] == true {
			return enginetest.Reply{Status: "error", Error: "page 4 is malformed"}
		}
		return enginetest.Reply{Data: map[string]any{"more": jsonx.Int(a["page"]) < 5}}
	}}
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed {
		t.Fatalf("v1: %s", s.Status())
	}
	redriveTo(t, s, replaceOnce(v1, "strict: true", "strict: false"), 2, map[string]int{"start": 1, "fetch": 6, "done": 1})
	pages := map[int]int{}
	for _, e := range s.Log {
		if e.Type == eventtype.CommandIssued && e.Step == "fetch" {
			pages[jsonx.Int(e.Context["args"].(map[string]any)["page"])]++
		}
	}
	if pages[1] != 1 || pages[2] != 1 || pages[3] != 1 || pages[4] != 2 || pages[5] != 1 {
		t.Errorf("pages fetched %v, want 1 to 3 and 5 once, the failed 4 twice", pages)
	}
}

// An execution redriven, failing again, and redriven once more: each redrive
// runs only what did not complete, loops keeping what the redrive before
// completed.
func TestRedriveTwice(t *testing.T) {
	v1 := loopPlaybook("[1, 2, 3]") + `    next: check
  - step: check
    tool: {kind: python, code: "x", input: {strict: true}}
`
	s := sim(t, v1)
	s.Tools = map[string]enginetest.Tool{"check": failWhenStrict, "each": func(c *enginetest.Cmd) enginetest.Reply {
		if a := enginetest.Args(c); a["n"] == int64(2) && a["strict"] == true {
			return enginetest.Reply{Status: "error", Error: "two is refused"}
		}
		return enginetest.Reply{Data: map[string]any{"ok": true}}
	}}
	run(t, s, nil)
	// v2 fixes the loop but not check: the redrive fails again, at check.
	v2 := replaceOnce(v1, "input: {n: \"{{ n }}\", strict: true}", "input: {n: \"{{ n }}\", strict: false}")
	if err := s.Redrive(parse(t, v2), 2); err != nil {
		t.Fatal(err)
	}
	if err := s.RunToEnd(1000); err != nil {
		t.Fatal(err)
	}
	invariants(t, s)
	if s.Status() != lifecycle.ExecutionFailed || s.StepStatus("each") != engine.StepCompleted || s.StepStatus("check") != engine.StepFailed {
		t.Fatalf("after the first redrive: %s, each %s, check %s", s.Status(), s.StepStatus("each"), s.StepStatus("check"))
	}
	before := iterationsIssued(s, "each")
	if before[0] != 1 || before[1] != 2 {
		t.Errorf("iterations issued by the first redrive %v: want the completed 0 once, the failed 1 twice", before)
	}
	redriveTo(t, s, replaceOnce(v2, "input: {strict: true}", "input: {strict: false}"), 3, map[string]int{"start": 1, "check": 2})
	if after := iterationsIssued(s, "each"); !maps.Equal(before, after) {
		t.Errorf("the second redrive issued iterations of the completed loop: %v, then %v", before, after)
	}
}
