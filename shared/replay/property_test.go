package replay_test

import (
	"math/rand/v2"
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/replay"
)

const propertyPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: p, path: tests/p}
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.n: 0}
    next: {spec: {mode: inclusive}, arcs: [{step: fan}, {step: spin}, {step: maybe, when: "{{ false }}"}]}
  - step: fan
    retry: {max_attempts: 3, delay: 0}
    loop: {in: "{{ 5 }}", iterator: i, spec: {mode: parallel, max_in_flight: 3}}
    tool: {kind: noop, input: {i: "{{ i }}"}}
    next: join
  - step: spin
    retry: {max_attempts: 2, delay: 0}
    tool: {kind: noop}
    set: {ctx.n: "{{ ctx.n + 1 }}"}
    next: [{step: spin, when: "{{ ctx.n < 3 }}"}, {step: join, when: "{{ ctx.n >= 3 }}"}]
  - step: maybe
    tool: {kind: noop}
    next: join
  - step: join
    tool: {kind: noop}
`

func rowsOf(log []engine.Event) []replay.Row {
	rows := make([]replay.Row, len(log))
	for i, e := range log {
		rows[i] = replay.Row{Seq: e.Seq, EventID: e.ID, EventType: e.Type, NodeName: e.Step, NodeType: e.NodeType,
			Status: e.Status, CommandID: e.CommandID, WorkerID: e.WorkerID, Context: e.Context, Meta: e.Meta,
			Result: e.Result, Error: e.Error, CreatedAt: e.Time}
	}
	return rows
}

func fold(t *testing.T, rows []replay.Row, cut replay.Cutoff) *replay.State {
	t.Helper()
	f := replay.NewFolder(replay.Options{Cutoff: cut, Limit: len(rows) + 1, Steps: replay.NewEngineSteps()})
	for _, r := range rows {
		if err := f.Add(r); err != nil {
			if replay.IsStop(err) {
				break
			}
			t.Fatal(err)
		}
	}
	st, err := f.State()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestFoldDeterministicOverSchedules: over randomised simulator schedules (worker
// interleavings, transient failures, lease expiries; seed logged), the same log
// always folds to the same checksum, the fold at cutoff k equals the fold of the
// first k events, and the steps projection equals the live snapshot's.
func TestFoldDeterministicOverSchedules(t *testing.T) {
	pb, ds := parser.Parse([]byte(propertyPlaybook))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	seeds := 60
	if testing.Short() {
		seeds = 15
	}
	checksums := map[string]bool{}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 99))
		s := enginetest.New(pb, 500+int64(seed))
		s.Rand = rng
		s.Default = enginetest.RandomFaults(rng, pb, 5)
		if err := s.Start(nil); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if err := s.RunToEnd(5000); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		rows := rowsOf(s.Log)
		a, b := fold(t, rows, replay.Cutoff{}), fold(t, rows, replay.Cutoff{})
		if a.Checksum != b.Checksum {
			t.Fatalf("seed %d: the same log folded to %s and %s", seed, a.Checksum.Value, b.Checksum.Value)
		}
		checksums[a.Checksum.Value] = true
		for range 5 {
			k := 1 + rng.IntN(len(rows))
			cut := fold(t, rows, replay.Cutoff{Kind: replay.CutoffPosition, Position: int64(k)})
			prefix := fold(t, rows[:k], replay.Cutoff{})
			if cut.Checksum != prefix.Checksum || cut.EventCount != int64(k) {
				t.Fatalf("seed %d: fold at cutoff %d (%s, %d events) differs from the fold of the first %d events (%s)",
					seed, k, cut.Checksum.Value, cut.EventCount, k, prefix.Checksum.Value)
			}
		}
		steps := replay.NewEngineSteps()
		for _, r := range rows {
			_ = steps.Add(r)
		}
		if err := enginetest.SameState(s.Snapshot(), steps.Snapshot()); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if s.Status() != lifecycle.ExecutionCompleted {
			t.Fatalf("seed %d: status %s", seed, s.Status())
		}
	}
	// Different schedules give different logs; one checksum for all would mean
	// the checksum ignores the log.
	if len(checksums) < 2 {
		t.Fatalf("%d seeds produced %d distinct checksums", seeds, len(checksums))
	}
}
