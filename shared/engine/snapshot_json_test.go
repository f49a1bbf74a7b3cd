package engine_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
)

// reflected is what encoding/json writes for a snapshot (Snapshot has no
// MarshalJSON: this is the reference its hand-written Marshal must equal).
func reflected(t *testing.T, s *engine.Snapshot) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// TestSnapshotEncodingMatchesReflection: at every event of random schedules
// of playbooks with joins, loops, retries, ledgers, arc sets and failures,
// Marshal writes exactly what encoding/json writes, so stored snapshots and
// checksums stay the same.
func TestSnapshotEncodingMatchesReflection(t *testing.T) {
	bodies := map[string]string{"arcs with sets": `
workflow:
  - step: start
    tool: {kind: noop, result: {s: "<é \u2028>", n: 1.5, l: [], m: {}}}
    set: {ctx.a: "{{ output.s }}", ctx.b: "{{ [] }}"}
    next: {spec: {mode: inclusive}, arcs: [{step: x, set: {v: "{{ 1 }}"}}, {step: y, args: {w: "q\"t"}}]}
  - step: x
    tool: {kind: noop}
    next: z
  - step: y
    tool: {kind: noop}
    next: z
  - step: z
    tool: {kind: noop}
`}
	for k, v := range scheduleBodies {
		bodies[k] = v
	}
	checked := 0
	for name, body := range bodies {
		pb := parse(t, body)
		for seed := range 40 {
			rng := rand.New(rand.NewPCG(uint64(seed/2), 11))
			s := enginetest.New(pb, 500+int64(seed))
			// Half the runs fold into clones, as the control plane's cache
			// does, so unchanged steps share their values and are copied
			// (the Sim checks each copy against the whole encoding).
			s.Cached = seed%2 == 1
			s.Rand = rng
			s.Default = enginetest.RandomFaults(rng, pb, 6)
			s.Observe = func(_ engine.Event, _ *engine.Outcome, b []byte) {
				snap, err := engine.UnmarshalSnapshot(b)
				if err != nil {
					t.Fatalf("%s seed %d: %v", name, seed, err)
				}
				got, err := snap.Marshal()
				if want := reflected(t, snap); err != nil || !bytes.Equal(got, want) || !bytes.Equal(b, want) {
					t.Fatalf("%s seed %d:\n got %s\nwant %s\nstored %s", name, seed, got, want, b)
				}
				checked++
			}
			if err := s.Start(nil); err != nil {
				t.Fatal(err)
			}
			if err := s.RunToEnd(10000); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Fields the schedules leave empty.
	edge := &engine.Snapshot{Status: "FAILED", Error: "x\x00y", FailedSteps: []string{"a"}, Waiting: []string{"b", "c"},
		Running: 2, Queued: 1, EndedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
		Steps: map[string]*engine.StepState{"a": {Status: "failed", Bound: true, Result: map[string]any{},
			ResultRef: &engine.ResultKey{Kind: engine.KindReference, Step: "a", Index: -1, URI: "s3://b/k"},
			Visit:     &engine.Visit{N: 2, InFlight: 3, ArcSet: map[string]any{"k": nil}, Loop: &engine.LoopState{Total: 5, Iterator: "i", Failed: 1}},
			Ledger:    []engine.FiredArc{{From: "b"}, {From: "c", Set: map[string]any{"x": []any{int64(1)}}}}}},
		Commands: map[string]*engine.CommandState{"c1": {Step: "a", Index: -1, RetryOn: []string{"timeout"}, OnStatus: []int64{429, 503},
			Envelope: map[string]any{"status": "error"}, Worker: "w"}}}
	// Nil entries of the maps are null, as encoding/json writes them.
	nils := &engine.Snapshot{Steps: map[string]*engine.StepState{"a": nil, "b": {Status: "done"}},
		Commands: map[string]*engine.CommandState{"c1": nil}}
	for name, s := range map[string]*engine.Snapshot{"edge cases": edge, "nil entries": nils} {
		if got, err := s.Marshal(); err != nil || !bytes.Equal(got, reflected(t, s)) {
			t.Fatalf("%s:\n got %s %v\nwant %s", name, got, err, reflected(t, s))
		}
	}
	if checked < 2000 {
		t.Fatalf("only %d snapshots checked", checked)
	}
}

// TestEncodeCopiesUnchangedSteps: a snapshot encoded against the last one
// writes only the steps that changed and copies the rest, byte for byte as
// the whole encoding; a step added or removed changes only itself.
func TestEncodeCopiesUnchangedSteps(t *testing.T) {
	var body strings.Builder
	body.WriteString("workflow:\n")
	for i := range 30 {
		fmt.Fprintf(&body, "  - step: s%02d\n    tool: {kind: noop, result: {i: %d}}\n", i, i)
		if i < 29 {
			fmt.Fprintf(&body, "    next: s%02d\n", i+1)
		}
	}
	s := enginetest.New(parse(t, body.String()), 77)
	s.Cached = true
	if err := s.Start(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.RunToEnd(1000); err != nil {
		t.Fatal(err)
	}
	last, err := engine.UnmarshalSnapshot(s.Stored)
	if err != nil || len(last.Steps) != 30 {
		t.Fatalf("%d steps, %v", len(last.Steps), err)
	}
	prev, err := last.Encode(nil)
	if err != nil || prev.Copied() != 0 || !bytes.Equal(prev.Bytes, s.Stored) {
		t.Fatalf("the first encoding copied %d steps (%v) or differs from the stored one", prev.Copied(), err)
	}
	for _, c := range []struct {
		name   string
		change func(*engine.Snapshot)
		copied int
	}{
		{"nothing", func(*engine.Snapshot) {}, 30},
		{"one step's error", func(n *engine.Snapshot) { n.Steps["s07"].Error = "boom" }, 29},
		{"one step's result", func(n *engine.Snapshot) { n.Steps["s07"].Result = map[string]any{"i": int64(7)} }, 29},
		{"a step added", func(n *engine.Snapshot) { n.Steps["s07a"] = &engine.StepState{Status: engine.StepPending} }, 30},
		{"a step removed", func(n *engine.Snapshot) { delete(n.Steps, "s00") }, 29},
		{"ctx only", func(n *engine.Snapshot) { n.Ctx = map[string]any{"k": "v"} }, 30},
	} {
		next := prev.Snapshot().Clone()
		c.change(next)
		enc, err := next.Encode(prev)
		whole, werr := next.Marshal()
		if err != nil || werr != nil || !bytes.Equal(enc.Bytes, whole) {
			t.Fatalf("%s: encoded against the last one, not as the whole encoding (%v, %v)", c.name, err, werr)
		}
		if got := enc.Copied(); got != c.copied {
			t.Errorf("%s: copied %d steps, want %d", c.name, got, c.copied)
		}
	}
	// A step added to an encoded snapshot (which must not change) is not
	// lost: the order is made afresh.
	changed, err := prev.Snapshot().Clone().Encode(nil)
	if err != nil {
		t.Fatal(err)
	}
	changed.Snapshot().Steps["zz"] = &engine.StepState{Status: engine.StepPending}
	next := changed.Snapshot().Clone()
	enc, err := next.Encode(changed)
	if whole, _ := next.Marshal(); err != nil || !bytes.Equal(enc.Bytes, whole) {
		t.Fatalf("a step added to the encoded snapshot: not the whole encoding (%v)", err)
	}
	// Encoding a snapshot against its own encoding copies nothing: it may
	// have changed in place since.
	same := prev.Snapshot()
	if again, err := same.Encode(prev); err != nil || again.Copied() != 0 {
		t.Errorf("encoded against itself: copied %d steps (%v)", again.Copied(), err)
	}
}

// TestCloneIsIndependent: what Handle and Apply change in a clone — a step's
// fields, its visit, loop, result reference, ledger and kept iterations, the
// steps map itself — leaves the snapshot it was cloned from as it was (the control plane's
// cache shares that one between transactions).
func TestCloneIsIndependent(t *testing.T) {
	orig := &engine.Snapshot{Status: "RUNNING", Steps: map[string]*engine.StepState{"gone": nil}, Commands: map[string]*engine.CommandState{}}
	for _, name := range []string{"a", "b", "c"} {
		orig.Steps[name] = &engine.StepState{Status: engine.StepRunning, Visits: 1,
			ResultRef: &engine.ResultKey{Kind: engine.KindStepResult, Step: name, Visit: 1},
			Ledger:    []engine.FiredArc{{From: "x"}},
			Visit:     &engine.Visit{N: 1, InFlight: 2, Loop: &engine.LoopState{Total: 3, Issued: 2, Kept: []int{0}}},
			Kept:      &engine.KeptIterations{Visit: 1, Indexes: []int{0}}}
	}
	orig.Commands["c1"] = &engine.CommandState{Step: "a", Status: "pending"}
	before, err := orig.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c := orig.Clone()
	for name, st := range c.Steps {
		if st == nil {
			continue
		}
		st.Status, st.Visits, st.Error = engine.StepCompleted, 2, "e"+name
		st.ResultRef.Visit = 2
		st.Ledger[0].From = "y"
		st.Visit.InFlight, st.Visit.Loop.Done, st.Visit.Loop.Kept[0] = 0, 3, 1
		st.Kept.Visit, st.Kept.Indexes[0] = 2, 1
	}
	c.Steps["new"] = &engine.StepState{Status: engine.StepPending}
	delete(c.Steps, "gone")
	c.Commands["c1"].Status = "claimed"
	if after, _ := orig.Marshal(); !bytes.Equal(before, after) {
		t.Fatalf("changing the clone changed the original:\n%s\n%s", before, after)
	}
	if st := c.Steps["b"]; st == orig.Steps["b"] || st.Error != "eb" {
		t.Fatal("the clone's steps are the original's")
	}
}
