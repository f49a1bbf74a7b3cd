package replay

import (
	"fmt"
	"testing"

	"github.com/noetl-go/noetl/shared/lifecycle"
)

// noetlLog is an execution's log as NoETL's own server (4.26, with its Python
// worker) writes it: its lifecycle rows (playbook.initialized,
// workflow.initialized, workflow.* and playbook.* at the end, loop.done after
// a loop, batch.* around each POST /api/events/batch, one batch.completed
// after the end) around the command rows. Types, nodes and statuses as NoETL
// stores them (docs/noetl-compat.md, "NoETL's lifecycle events").
func noetlLog(t *testing.T, end string) []Row {
	t.Helper()
	type ev struct{ typ, node, status string }
	evs := []ev{
		{"playbook.initialized", "tests/loop", "initialized"}, {"workflow.initialized", "workflow", "initialized"},
		{"command.issued", "start", "PENDING"}, {"command.claimed", "start", "RUNNING"},
		{"batch.accepted", "events.batch", "PENDING"}, {"command.started", "start", "RUNNING"},
		{"step.enter", "start", "RUNNING"}, {"batch.processing", "events.batch", "RUNNING"},
		{"batch.completed", "events.batch", "COMPLETED"}, {"call.done", "start", "COMPLETED"},
		{"step.exit", "start", "COMPLETED"}, {"command.completed", "start", "COMPLETED"},
		{"loop.done", "loop_test", "completed"},
		{"workflow." + end, "workflow", end}, {"playbook." + end, "tests/loop", end},
		{"batch.completed", "events.batch", "COMPLETED"},
	}
	rows := make([]Row, len(evs))
	for i, e := range evs {
		r, err := RowFromObject(map[string]any{"event_id": int64(100 + i), "event_type": e.typ, "node_name": e.node,
			"status": e.status}, int64(i+1))
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = r
	}
	return rows
}

// TestNoETLLifecycleRowsRead (issue 30): a log of NoETL's own server folds to
// the status its lifecycle rows say — workflow.completed / playbook.completed
// end it COMPLETED, *.failed FAILED — and the rows it writes after the end
// (batch.completed) or as bookkeeping (playbook.initialized,
// workflow.initialized, batch.*, loop.done) change nothing else: we read
// NoETL's names where they arrive and write none of them ourselves.
func TestNoETLLifecycleRowsRead(t *testing.T) {
	for end, want := range map[string]string{"completed": lifecycle.ExecutionCompleted, "failed": lifecycle.ExecutionFailed} {
		t.Run(end, func(t *testing.T) {
			rows := noetlLog(t, end)
			st := fold(t, Options{ExecutionID: "7"}, rows)
			exec, _ := st.Projections["execution"].(map[string]any)
			if got := fmt.Sprint(exec["status"]); got != want {
				t.Fatalf("status %s after NoETL's %s log, want %s: %v", got, end, want, exec)
			}
			if st.EventCount != int64(len(rows)) || st.LastEventType != "batch.completed" {
				t.Errorf("event_count %d, last %q: every row is counted as stored", st.EventCount, st.LastEventType)
			}
			// Without the lifecycle rows the fold ends in the same place: they
			// carry nothing the command rows do not.
			var bare []Row
			for _, r := range rows {
				switch r.EventType {
				case "playbook.initialized", "workflow.initialized", "batch.accepted", "batch.processing", "batch.completed",
					"loop.done", "workflow." + end:
					continue
				}
				bare = append(bare, r)
			}
			b := fold(t, Options{ExecutionID: "7"}, bare)
			bareExec, _ := b.Projections["execution"].(map[string]any)
			if fmt.Sprint(bareExec["status"]) != want || fmt.Sprint(bareExec["last_node_name"]) != fmt.Sprint(exec["last_node_name"]) {
				t.Errorf("without NoETL's lifecycle rows: %v; with them: %v", bareExec, exec)
			}
		})
	}
}

// TestLegacySpellingsAsIngestReadsThem: replay reads NoETL's older names by the
// same vocabulary as ingest (eventtype.Canonical): execution_completed ends an
// execution as playbook.completed does, execution_failed as playbook.failed.
func TestLegacySpellingsAsIngestReadsThem(t *testing.T) {
	for typ, want := range map[string]string{"execution_completed": lifecycle.ExecutionCompleted, "execution_failed": lifecycle.ExecutionFailed,
		"execution_cancelled": lifecycle.ExecutionCancelled, "playbook_completed": lifecycle.ExecutionCompleted} {
		var rows []Row
		for i, e := range []string{"execution_started", "step_started", "step_completed", typ} {
			r, err := RowFromObject(map[string]any{"event_id": int64(200 + i), "event_type": e, "node_name": "start"}, int64(i+1))
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, r)
		}
		exec, _ := fold(t, Options{ExecutionID: "8"}, rows).Projections["execution"].(map[string]any)
		if got := fmt.Sprint(exec["status"]); got != want {
			t.Errorf("%s: status %s, want %s", typ, got, want)
		}
	}
}
