package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
)

// TestOrphansHonourCascade: the drain's orphan job re-drives the cancel of a
// parent's running children (R-R10) unless the parent's cancel said cascade
// false (NoETL's CLI's default; issue 30), and the liveness check then
// counts no cancel in progress for such a child.
func TestOrphansHonourCascade(t *testing.T) {
	s, _ := newStore(t, 1)
	ctx := testContext(t)
	sh := s.Shard(0)
	cancelled := func(ctxv map[string]any) (parent, child int64) {
		p := newExecution(t, sh, nil)
		c := newExecution(t, sh, func(e *store.Execution) { e.ParentExecutionID = p.ExecutionID })
		ls := &store.LockSet{Executions: []int64{p.ExecutionID}}
		tx := lock(t, sh, ls)
		row := ls.ExecutionRows[p.ExecutionID]
		row.Status, row.LastSeq, row.CompletedAt = lifecycle.ExecutionCancelled, 1, time.Now()
		if err := tx.Write(&store.Changes{
			Events: []store.Event{{ExecutionID: p.ExecutionID, Seq: 1, EventID: allocate(t, sh, 1)[0], EventType: eventtype.PlaybookCancelled,
				Status: lifecycle.ExecutionCancelled, Context: ctxv, CreatedAt: ls.Now}},
			Executions: []store.Execution{row},
		}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return p.ExecutionID, c.ExecutionID
	}
	_, kept := cancelled(map[string]any{"reason": "r", store.CascadeKey: false})
	_, ended := cancelled(map[string]any{"reason": "r"})
	_, endedToo := cancelled(map[string]any{"reason": "r", store.CascadeKey: true})

	orphans, err := store.ListOrphanedChildren(ctx, sh.Pool(), 100)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(orphans)
	if !slices.Equal(orphans, []int64{ended, endedToo}) {
		t.Errorf("orphans %v, want %v (not %d, whose parent's cancel said cascade false)", orphans, []int64{ended, endedToo}, kept)
	}
	stalls, err := store.Stalls(ctx, sh.Pool(), time.Hour, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stalls {
		if st.ExecutionID == kept && st.ParentCancelled || st.ExecutionID != kept {
			t.Errorf("stall %+v: only %d (no command, parent cancelled without cascade) is one", st, kept)
		}
	}
	if len(stalls) != 1 {
		t.Errorf("%d stalls, want 1: %+v", len(stalls), stalls)
	}
}
