package controlplane_test

import (
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/controlplane"
)

// TestDoctorNamesStalledExecutions: the liveness check names a running
// execution that nothing will move (its command rows ended behind the
// engine's back, as a bug would leave them) and one whose pending command
// waited on the drain far past DoctorOverdue, each with why, and not a
// healthy one.
func TestDoctorNamesStalledExecutions(t *testing.T) {
	s := newStack(t)
	s.register(t, threeStepsNoDelay)
	start := func() int64 {
		st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
		if err != nil {
			t.Fatal(err)
		}
		return st.ExecutionID
	}
	healthy, stuck, waiting := start(), start(), start()
	if found, err := s.svc.Doctor(s.ctx, 100); err != nil || len(found) != 0 {
		t.Fatalf("fresh executions: %+v %v; want none named", found, err)
	}
	exec := func(id int64, sql string) {
		sh, _ := s.st.ShardFor(id)
		if _, err := sh.Pool().Exec(s.ctx, sql, id); err != nil {
			t.Fatal(err)
		}
	}
	exec(stuck, `UPDATE command SET status = 'COMPLETED' WHERE execution_id = $1`)
	exec(waiting, `UPDATE command SET available_at = now() - interval '10 minutes' WHERE execution_id = $1`)
	found, err := s.svc.Doctor(s.ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	why := map[int64]string{}
	for _, f := range found {
		why[f.ExecutionID] = f.Reason
	}
	if len(found) != 2 || !strings.Contains(why[stuck], "nothing will move it") || !strings.Contains(why[waiting], "is the drain running") {
		t.Fatalf("named %+v; want %d (nothing will move it) and %d (waits on the drain), not %d", why, stuck, waiting, healthy)
	}
	if _, err := s.svc.Doctor(s.ctx, 0); !isKind(err, controlplane.ErrInvalid) {
		t.Fatalf("limit 0: %v", err)
	}
	// A drain announces the waiting command again: it is no longer stale.
	if _, err := s.svc.Drain(s.ctx, 100); err != nil {
		t.Fatal(err)
	}
	if found, _ := s.svc.Doctor(s.ctx, 100); len(found) != 1 || found[0].ExecutionID != stuck {
		t.Fatalf("after a drain: %+v; want only %d", found, stuck)
	}
}
