package controlplane_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

// TestStagedEventsEnterTheLogInOrder (issue 29): NoETL's workers'
// command.started and call.done are stored without the execution's lock
// (staged) and answered at once with the ids they keep; the completion's
// transaction enters them into the log in the order they came, before
// itself, so the step's result is call.done's and a re-posted client id is a
// duplicate whether it was staged or already in the log.
func TestStagedEventsEnterTheLogInOrder(t *testing.T) {
	s := newStack(t)
	st, body := claimedByA(t, s)
	before := s.eventTypes(t, st.ExecutionID)
	meta := map[string]any{"command_id": body.CommandID, "attempt": int64(body.Attempt)}
	ingest := func(typ, client string, payload map[string]any) *controlplane.Ingested {
		t.Helper()
		res, err := s.svc.Ingest(s.ctx, controlplane.EventInput{ExecutionID: st.ExecutionID, Step: body.Step, Type: typ,
			Status: "RUNNING", WorkerID: "A", Meta: meta, Payload: payload, ClientEventID: client})
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		return res
	}
	started := ingest("command.started", "c-started", nil)
	done := ingest("call.done", "c-done", map[string]any{"result": map[string]any{"status": "success", "data": map[string]any{"n": int64(7)}}})
	if got := s.eventTypes(t, st.ExecutionID); !reflect.DeepEqual(got, before) {
		t.Errorf("events before the completion %v, want %v: staged events wait for the next transaction", got, before)
	}
	sh, _ := s.st.ShardFor(st.ExecutionID)
	if row, err := storetest.Command(s.ctx, sh.Pool(), body.CommandID); err != nil || row.Status != store.CommandClaimed {
		t.Errorf("command status %q %v: still CLAIMED until command.started is entered", row.Status, err)
	}
	// A repeat takes the locked path, which enters what is staged first.
	again := ingest("command.started", "c-started", nil)
	if !again.Duplicate || again.EventID != started.EventID {
		t.Errorf("a staged client id posted again: %+v, want a duplicate of %d", again, started.EventID)
	}

	ingest("command.completed", "c-completed", nil)
	evs, err := s.svc.Events(s.ctx, store.EventFilter{ExecutionID: st.ExecutionID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	tail := evs[len(before) : len(before)+3]
	for i, want := range []struct {
		typ string
		id  int64
	}{{"command.started", started.EventID}, {"call.done", done.EventID}, {"command.completed", 0}} {
		e := tail[i]
		if e.EventType != want.typ || (want.id != 0 && e.EventID != want.id) || e.Ignored || e.Seq != evs[len(before)-1].Seq+int64(i)+1 {
			t.Errorf("event %d after the claim: %s id %d seq %d ignored %v, want %s id %d", i, e.EventType, e.EventID, e.Seq, e.Ignored, want.typ, want.id)
		}
		if i > 0 && e.CreatedAt.Before(tail[i-1].CreatedAt) {
			t.Errorf("%s at %v, before %s at %v (R-S4)", e.EventType, e.CreatedAt, tail[i-1].EventType, tail[i-1].CreatedAt)
		}
	}
	if again := ingest("call.done", "c-done", nil); !again.Duplicate || again.EventID != done.EventID {
		t.Errorf("a logged client id posted again: %+v, want a duplicate of %d", again, done.EventID)
	}
	if got := s.execution(t, st.ExecutionID).Steps["start"]; !reflect.DeepEqual(got.Result, map[string]any{"n": int64(7)}) || got.Status != "completed" {
		t.Errorf("start %+v: want call.done's result", got)
	}
	if row, err := storetest.Command(s.ctx, sh.Pool(), body.CommandID); err != nil || row.Status != store.CommandCompleted {
		t.Errorf("command %+v %v, want COMPLETED", row, err)
	}
}

// TestStagedEventsRefusedTakeTheLockedPath (issue 29): an event staging
// would accept without its holder, or for an ended execution, is not staged:
// the locked path answers it as before (fenced, 409) and stores it ignored.
func TestStagedEventsRefusedTakeTheLockedPath(t *testing.T) {
	s := newStack(t)
	st, body := claimedByA(t, s)
	_, err := s.svc.Ingest(s.ctx, controlplane.EventInput{ExecutionID: st.ExecutionID, Step: body.Step, Type: "command.started",
		WorkerID: "B", Meta: map[string]any{"command_id": body.CommandID}})
	var fenced *controlplane.FencedError
	if !errors.As(err, &fenced) {
		t.Fatalf("B's command.started: %v, want fenced", err)
	}
	types := s.eventTypes(t, st.ExecutionID)
	if types[len(types)-1] != "command.started" {
		t.Fatalf("events %v: B's command.started is in the log at once, ignored", types)
	}
}

// TestStagedEventsSettledByTheDrain (issue 29): an event staged as its
// execution ended, which no later transaction enters, is entered by the
// drain once Config.StagedGrace has passed: stored, never lost, and
// ignored (R-R10).
func TestStagedEventsSettledByTheDrain(t *testing.T) {
	s := newStack(t, func(c *controlplane.Config) { c.StagedGrace = 200 * time.Millisecond })
	st, body := claimedByA(t, s)
	// Staged as if the execution's end raced it: the hold was checked, then
	// the execution was cancelled (the cancel entered what was staged
	// before it); this one came after.
	if err := s.svc.Cancel(s.ctx, st.ExecutionID, "test"); err != nil {
		t.Fatal(err)
	}
	sh, _ := s.st.ShardFor(st.ExecutionID)
	ids, err := store.AllocateIDs(s.ctx, sh.Pool(), sh.Index(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Pool().Exec(s.ctx, `INSERT INTO staged_event (execution_id, event_id, event_type, node_name, worker_id, command_id, created_at)
		VALUES ($1, $2, 'call.done', $3, 'A', $4, clock_timestamp())`, st.ExecutionID, ids[0], body.Step, body.CommandID); err != nil {
		t.Fatal(err)
	}
	before := s.eventTypes(t, st.ExecutionID)
	if _, err := s.svc.Drain(s.ctx, 100); err != nil {
		t.Fatal(err)
	}
	if got := s.eventTypes(t, st.ExecutionID); len(got) != len(before) {
		t.Fatalf("events %v: entered before the grace", got)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := s.svc.Drain(s.ctx, 100); err != nil {
		t.Fatal(err)
	}
	evs, err := s.svc.Events(s.ctx, store.EventFilter{ExecutionID: st.ExecutionID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if len(evs) != len(before)+1 || last.EventID != ids[0] || last.EventType != "call.done" || !last.Ignored {
		t.Fatalf("after the grace the log ends with %+v, want the staged call.done %d, ignored", last, ids[0])
	}
	var left int
	if err := sh.Pool().QueryRow(s.ctx, `SELECT count(*) FROM staged_event`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d staged events left (%v)", left, err)
	}
}

// claimedByA starts tests/three and has worker A claim its first command
// (NoETL's claim: not started).
func claimedByA(t *testing.T, s *stack) (*controlplane.Started, *controlplane.CommandBody) {
	t.Helper()
	s.register(t, threeStepsNoDelay)
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := s.svc.Claim(s.ctx, s.pending(t, st.ExecutionID)[0].IssuedEventID, "A", false)
	if err != nil {
		t.Fatal(err)
	}
	return st, body
}
