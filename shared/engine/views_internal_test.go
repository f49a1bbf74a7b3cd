package engine

import (
	"reflect"
	"testing"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

// TestViewsIgnoreCommandBookkeeping: the events apply does not count as a
// change of the views (a command's own bookkeeping) leave `steps` and `ctx`
// as they were; a final command.completed, which it counts, does not.
func TestViewsIgnoreCommandBookkeeping(t *testing.T) {
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
		s.Commands["c1"] = &CommandState{Step: "start", Visit: 1, Index: 0, EventID: 3, Status: CmdClaimed, Attempt: 1, MaxAttempts: 3}
		return s
	}
	meta := func(kv ...any) map[string]any {
		m := map[string]any{"command_id": "c1"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	bookkeeping := []Event{
		{Type: eventtype.CommandIssued, Step: "start", CommandID: "c2", Meta: map[string]any{"command_id": "c2", "visit": int64(1), "iteration_index": int64(1), "attempt": int64(1), "max_attempts": int64(3)}},
		{Type: eventtype.CommandClaimed, Step: "start", CommandID: "c1", WorkerID: "w", Meta: meta("attempt", int64(2), "started", true)},
		{Type: eventtype.CommandStarted, Step: "start", CommandID: "c1", Meta: meta()},
		{Type: eventtype.CallDone, Step: "start", CommandID: "c1", Meta: meta(), Result: map[string]any{"status": "success"}},
		{Type: eventtype.CallError, Step: "start", CommandID: "c1", Meta: meta(), Result: map[string]any{"status": "error"}},
		{Type: eventtype.CommandRetry, Step: "start", CommandID: "c1", Meta: meta("attempt", int64(2))},
		{Type: eventtype.CommandCancelled, Step: "start", CommandID: "c1", Meta: meta()},
		{Type: eventtype.LoopClaimed, Step: "start", Context: map[string]any{"visit": int64(1), "total": int64(5), "drained": true, "txid": "t"}},
	}
	completed := Event{Type: eventtype.CommandCompleted, Step: "start", CommandID: "c1", Status: "success",
		Meta: meta("attempt", int64(2)), Result: map[string]any{"status": "success", "context": map[string]any{"status": "success"}}}
	for _, ev := range append(bookkeeping, completed) {
		s := snap()
		s.Commands["c1"].Attempt = 2
		d := &decider{pb: pb, s: s, local: map[ResultKey]any{}}
		b := &bindings{arcSet: s.Steps["start"].Visit.ArcSet}
		steps, ctx := d.stepsView(b), d.ctx(b)
		gen := d.gen
		ev.Seq = s.Seq + 1
		d.apply(ev)
		unchanged := snap()
		unchanged.Commands["c1"].Attempt, unchanged.Seq = 2, ev.Seq
		if reflect.DeepEqual(unchanged, s) {
			t.Fatalf("%s changed nothing: the test's event or snapshot is wrong", ev.Type)
		}
		b = &bindings{arcSet: b.arcSet}
		same := reflect.DeepEqual(steps, d.stepsView(b)) && reflect.DeepEqual(ctx, d.ctx(b))
		counted := d.gen != gen
		if ev.Type == eventtype.CommandCompleted {
			if same || !counted {
				t.Errorf("a final command.completed: views unchanged %v, counted %v; want changed and counted", same, counted)
			}
		} else if !same || counted {
			t.Errorf("%s: views unchanged %v, counted %v; want unchanged and not counted (apply's list)", ev.Type, same, counted)
		}
	}
}
