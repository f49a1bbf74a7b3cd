package engine_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
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
		for seed := range 20 {
			rng := rand.New(rand.NewPCG(uint64(seed), 11))
			s := enginetest.New(pb, 500+int64(seed))
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
	if checked < 1000 {
		t.Fatalf("only %d snapshots checked", checked)
	}
}
