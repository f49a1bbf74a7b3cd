package controlplane_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

// brokenPlaybook is threeStepsNoDelay under a path of its own: its catalog
// entry is made unparsable by the tests (as a rule tightened since).
var brokenPlaybook = strings.Replace(threeStepsNoDelay, "{name: three, path: tests/three}", "{name: broken, path: tests/broken}", 1)

// unloadable starts on shard 0 one execution of tests/three and one of
// tests/broken, lets claim (claimed) hand each first command to worker
// "dies", then makes tests/broken's catalog entry unparsable. It returns
// another process's service (nothing cached: it must load the playbooks)
// and the two executions, broken first.
func unloadable(t *testing.T, s *stack, claimed bool) (other *controlplane.Service, broken, healthy int64) {
	t.Helper()
	s.register(t, threeStepsNoDelay)
	bad := s.register(t, brokenPlaybook)
	shard := 0
	start := func(path string) int64 {
		st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: path, Shard: &shard})
		if err != nil {
			t.Fatal(err)
		}
		if claimed {
			if _, err := s.svc.Claim(s.ctx, s.pending(t, st.ExecutionID)[0].IssuedEventID, "dies", false); err != nil {
				t.Fatal(err)
			}
		}
		return st.ExecutionID
	}
	broken, healthy = start("tests/broken"), start("tests/three")
	if _, err := s.st.Cluster().Exec(s.ctx, `UPDATE catalog SET content = 'workflow: [' WHERE catalog_id = $1`, bad.CatalogID); err != nil {
		t.Fatal(err)
	}
	other, err := controlplane.New(s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return other, broken, healthy
}

// exec runs sql on the shard of execution id, with id as $1.
func (s *stack) exec(t *testing.T, id int64, sql string) {
	t.Helper()
	sh, _ := s.st.ShardFor(id)
	if _, err := sh.Pool().Exec(s.ctx, sql, id); err != nil {
		t.Fatal(err)
	}
}

// failedOn checks a drain's error is job's, naming the execution whose
// catalog entry no longer parses.
func failedOn(t *testing.T, err error, job string, id int64) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), job+": ") || !strings.Contains(err.Error(), fmt.Sprintf("execution %d", id)) ||
		!strings.Contains(err.Error(), "no longer parses") {
		t.Fatalf("drain: %v; want the %s job's error, naming execution %d", err, job, id)
	}
}

// TestDrainPassesAnExecutionItCannotLoad (F1): the lease of a command of an
// execution whose catalog entry no longer parses ends on the same shard, in
// the same batch, as a healthy one's. The healthy command is retried; the
// unloadable execution is left as it is, its error returned naming it (a
// server of an older version, or reading a stale catalog, must not fail
// executions the others can run), until an operator ends it. Before, the
// batch rolled back, run after run, and neither moved.
func TestDrainPassesAnExecutionItCannotLoad(t *testing.T) {
	s := newStack(t, func(c *controlplane.Config) { c.Lease = time.Second })
	other, broken, healthy := unloadable(t, s, true)
	time.Sleep(1200 * time.Millisecond) // both leases lapse
	r, err := other.Drain(s.ctx, 100)
	failedOn(t, err, "leases", broken)
	if r.Expired != 1 {
		t.Fatalf("expired: %d; want 1 (the healthy execution's command)", r.Expired)
	}
	p := s.pending(t, healthy)
	if len(p) != 1 || p[0].Attempt != 2 {
		t.Fatalf("the healthy execution's pending commands: %+v; want its first step's attempt 2", p)
	}
	if v := s.execution(t, broken); v.Row.Status != lifecycle.ExecutionRunning {
		t.Fatalf("the unloadable execution: %s %q; want it left RUNNING for an operator", v.Row.Status, v.Row.Error)
	}
	// Ended by an operator, it no longer fails the drain.
	if err := other.Cancel(s.ctx, broken, "test"); err != nil {
		t.Fatalf("cancel the unloadable execution: %v", err)
	}
	sh, _ := s.st.ShardFor(broken)
	if active, err := storetest.ActiveCommands(s.ctx, sh.Pool(), broken); err != nil || len(active) != 0 {
		t.Fatalf("the cancelled execution's active commands: %+v %v; want none", active, err)
	}
	if r, err := other.Drain(s.ctx, 100); err != nil || r.Expired+r.TimedOut != 0 {
		t.Fatalf("the next drain: %+v %v", r, err)
	}
}

// TestDrainJobsRunPastAFailure (F1): an execution the announce-again job
// cannot load (its catalog entry no longer parses) fails that job on its
// shard; the healthy command beside it is still announced again (its batch
// run again one execution per transaction), the jobs after it still run (an
// old published outbox row is cleaned up), the error names the execution,
// and Doctor says the drain runs and fails rather than asking whether it
// runs. Before, the first failure ended the shard's run, every run.
func TestDrainJobsRunPastAFailure(t *testing.T) {
	s := newStack(t)
	other, broken, healthy := unloadable(t, s, false)
	for _, id := range []int64{broken, healthy} {
		s.exec(t, id, `UPDATE command SET available_at = now() - interval '10 minutes' WHERE execution_id = $1`)
	}
	s.exec(t, healthy, `UPDATE outbox SET status = 'PUBLISHED', published_at = now() - interval '400 days' WHERE execution_id = $1`)
	r, err := other.Drain(s.ctx, 100)
	failedOn(t, err, "announce again", broken)
	if r.Reannounced != 1 {
		t.Fatalf("announced again: %d; want 1 (the healthy execution's command)", r.Reannounced)
	}
	if r.OutboxDeleted == 0 {
		t.Fatal("no old outbox row deleted: the cleanup job did not run after the failing one")
	}
	found, err := other.Doctor(s.ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].ExecutionID != broken || !strings.Contains(found[0].Reason, "runs but failed on shard 0") ||
		!strings.Contains(found[0].Reason, "announce again") || strings.Contains(found[0].Reason, "is the drain running") {
		t.Fatalf("doctor: %+v; want only %d, naming the drain's failure", found, broken)
	}
	// Ended by an operator, it no longer fails the drain.
	if err := other.Cancel(s.ctx, broken, "test"); err != nil {
		t.Fatalf("cancel the unloadable execution: %v", err)
	}
	if _, err := other.Drain(s.ctx, 100); err != nil {
		t.Fatalf("drain after the cancel: %v", err)
	}
}

// TestOperatorEndsAnUnloadableExecution (F1): an execution whose catalog
// entry no longer parses, or whose snapshot does not decode, can still be
// cancelled and finalized: the ending event is written without the engine,
// its active commands cancelled, and what was staged for it kept in the log,
// ignored. Before, the lock failed loading it, so nothing could end it.
func TestOperatorEndsAnUnloadableExecution(t *testing.T) {
	s := newStack(t)
	other, broken, healthy := unloadable(t, s, true)
	undecodable := healthy
	s.exec(t, undecodable, `UPDATE execution SET state = '"not a snapshot"' WHERE execution_id = $1`)
	sh, _ := s.st.ShardFor(broken)
	ids, err := store.AllocateIDs(s.ctx, sh.Pool(), sh.Index(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Pool().Exec(s.ctx, `INSERT INTO staged_event (execution_id, event_id, event_type, node_name, worker_id, created_at)
		VALUES ($1, $2, 'call.done', 'start', 'dies', clock_timestamp())`, broken, ids[0]); err != nil {
		t.Fatal(err)
	}

	if err := other.Cancel(s.ctx, broken, "test"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := other.Finalize(s.ctx, undecodable, lifecycle.ExecutionFailed, "given up"); err != nil {
		t.Fatalf("finalize: %v", err)
	}
	for id, want := range map[int64]struct{ status, event, err string }{
		broken:      {lifecycle.ExecutionCancelled, "playbook.cancelled", ""},
		undecodable: {lifecycle.ExecutionFailed, "playbook.failed", "given up"},
	} {
		// The row: the execution's view reads the snapshot, which does not decode.
		row, err := store.GetExecution(s.ctx, sh.Pool(), id)
		if err != nil || row.Status != want.status || row.Error != want.err {
			t.Errorf("execution %d: %s %q (%v); want %s %q", id, row.Status, row.Error, err, want.status, want.err)
		}
		if active, err := storetest.ActiveCommands(s.ctx, sh.Pool(), id); err != nil || len(active) != 0 {
			t.Errorf("execution %d's active commands: %+v %v; want none", id, active, err)
		}
		if types := s.eventTypes(t, id); types[len(types)-1] != want.event {
			t.Errorf("execution %d's log ends %v; want %s", id, types, want.event)
		}
	}
	evs, err := other.Events(s.ctx, store.EventFilter{ExecutionID: broken, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if staged := evs[len(evs)-2]; staged.EventID != ids[0] || !staged.Ignored {
		t.Errorf("before the cancel the log has %+v; want the staged call.done %d, ignored", staged, ids[0])
	}
	// Repeated, each is what it was for any ended execution.
	if err := other.Cancel(s.ctx, broken, "again"); err != nil {
		t.Errorf("cancel again: %v", err)
	}
	if err := other.Finalize(s.ctx, undecodable, lifecycle.ExecutionFailed, ""); !isKind(err, controlplane.ErrConflict) {
		t.Errorf("finalize again: %v; want a conflict", err)
	}
}

// refuseEvents makes the shard of execution id refuse every event of it, as
// a failure nothing in the server can get past.
func (s *stack) refuseEvents(t *testing.T, id int64) {
	t.Helper()
	sh, _ := s.st.ShardFor(id)
	if _, err := sh.Pool().Exec(s.ctx, fmt.Sprintf(`
		CREATE FUNCTION refuse_events() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.execution_id = %d THEN RAISE EXCEPTION 'the test refuses events of execution %%', NEW.execution_id; END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER refuse_events BEFORE INSERT ON event FOR EACH ROW EXECUTE FUNCTION refuse_events()`, id)); err != nil {
		t.Fatal(err)
	}
}

// TestOneExecutionDoesNotStopTheOthers (F1): the drain's staged-events and
// orphan jobs and the idle cleanup each go on past an execution that fails,
// and return its error. Before, each stopped at it, and the ones after it
// never moved.
func TestOneExecutionDoesNotStopTheOthers(t *testing.T) {
	t.Run("staged events", func(t *testing.T) {
		s := newStack(t)
		other, broken, healthy := unloadable(t, s, false)
		sh, _ := s.st.ShardFor(broken)
		for _, id := range []int64{broken, healthy} {
			ids, err := store.AllocateIDs(s.ctx, sh.Pool(), sh.Index(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sh.Pool().Exec(s.ctx, `INSERT INTO staged_event (execution_id, event_id, event_type, node_name, worker_id, created_at)
				VALUES ($1, $2, 'call.done', 'start', 'w', clock_timestamp() - interval '1 hour')`, id, ids[0]); err != nil {
				t.Fatal(err)
			}
		}
		_, err := other.Drain(s.ctx, 100)
		if err == nil || !strings.Contains(err.Error(), "staged events") || !strings.Contains(err.Error(), fmt.Sprintf("execution %d", broken)) {
			t.Fatalf("drain: %v; want the staged-events job's error, naming execution %d", err, broken)
		}
		var left int
		if err := sh.Pool().QueryRow(s.ctx, `SELECT count(*) FROM staged_event WHERE execution_id = $1`, healthy).Scan(&left); err != nil || left != 0 {
			t.Fatalf("%d staged events of the healthy execution left (%v)", left, err)
		}
	})
	t.Run("orphans", func(t *testing.T) {
		s := newStack(t)
		s.register(t, threeStepsNoDelay)
		start := func(parent int64) int64 {
			st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three", ParentExecutionID: parent})
			if err != nil {
				t.Fatal(err)
			}
			return st.ExecutionID
		}
		parent := start(0)
		// The failing child between two healthy ones: one comes after it
		// whichever way the job lists them.
		first, failing, last := start(parent), start(parent), start(parent)
		s.refuseEvents(t, failing)
		s.exec(t, parent, `UPDATE execution SET status = 'CANCELLED' WHERE execution_id = $1`)
		r, err := s.svc.Drain(s.ctx, 100)
		if err == nil || !strings.Contains(err.Error(), "orphans") || !strings.Contains(err.Error(), fmt.Sprintf("execution %d", failing)) {
			t.Fatalf("drain: %v; want the orphan job's error, naming execution %d", err, failing)
		}
		for _, id := range []int64{first, last} {
			if v := s.execution(t, id); v.Row.Status != lifecycle.ExecutionCancelled {
				t.Fatalf("healthy child %d: %s (%d cancelled); want it CANCELLED", id, v.Row.Status, r.ChildrenCancelled)
			}
		}
	})
	t.Run("idle cleanup", func(t *testing.T) {
		s := newStack(t)
		s.register(t, threeStepsNoDelay)
		shard := 0
		var ids []int64
		for range 2 {
			st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three", Shard: &shard})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, st.ExecutionID)
		}
		failing, healthy := ids[0], ids[1]
		s.refuseEvents(t, failing)
		ended, err := s.svc.CancelIdle(s.ctx, 0, false)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("execution %d", failing)) {
			t.Fatalf("cleanup: %v; want an error naming execution %d", err, failing)
		}
		if len(ended) != 1 || ended[0] != healthy {
			t.Fatalf("cleanup ended %v; want [%d]", ended, healthy)
		}
	})
}
