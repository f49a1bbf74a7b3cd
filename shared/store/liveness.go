package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/lifecycle"
)

// Stall is an execution that is not terminal and either has nothing that
// will move it, or whose movers wait on a drain that is not running
// (controlplane.Doctor says which, and why).
type Stall struct {
	ExecutionID int64
	Path        string
	Status      string
	UpdatedAt   time.Time
	// Active counts its commands in flight (lifecycle.Active); Stale those
	// of them lifecycle.Stale names.
	Active, Stale int
	// RunningChildren counts its children not terminal.
	RunningChildren int
	// ParentCancelled: its parent was cancelled with its children, so the
	// drain's orphan job cancels it (R-R10).
	ParentCancelled bool
}

// Stalls checks the liveness invariant on one shard: every RUNNING or
// FAILING execution has a command in flight (a pending one is announced,
// and announced again until claimed; a held one's lease ends), a running
// child, or a cancel in progress (a cancelled parent). It returns, in id
// order, up to limit executions that break it, or whose commands have been
// stale (lifecycle.Stale) for overdue. It reads every running execution's
// commands by the active-commands index: a diagnostic, not a hot path.
func Stalls(ctx context.Context, q Querier, overdue time.Duration, limit int) ([]Stall, error) {
	rows, err := q.Query(ctx, `
		SELECT e.execution_id, e.path, e.status, e.updated_at, a.active, a.stale, k.running,
			coalesce(`+cancelCascadedSQL+`, false)
		FROM execution e
		CROSS JOIN LATERAL (
			SELECT count(*) AS active, count(*) FILTER (WHERE `+lifecycle.StaleSQL("$1")+`) AS stale
			FROM command WHERE command.execution_id = e.execution_id AND `+lifecycle.ActiveSQL+`) a
		CROSS JOIN LATERAL (
			SELECT count(*) AS running FROM execution c
			WHERE c.parent_execution_id = e.execution_id AND c.status IN ('`+lifecycle.ExecutionRunning+`', '`+lifecycle.ExecutionFailing+`')) k
		LEFT JOIN execution p ON p.execution_id = e.parent_execution_id
		WHERE e.status IN ('`+lifecycle.ExecutionRunning+`', '`+lifecycle.ExecutionFailing+`')
		  AND ((a.active = 0 AND k.running = 0 AND NOT coalesce(`+cancelCascadedSQL+`, false)) OR a.stale > 0)
		ORDER BY e.execution_id
		LIMIT $2`, overdue, limit)
	if err != nil {
		return nil, fmt.Errorf("store: check liveness: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Stall, error) {
		var s Stall
		err := r.Scan(&s.ExecutionID, &s.Path, &s.Status, &s.UpdatedAt, &s.Active, &s.Stale, &s.RunningChildren, &s.ParentCancelled)
		s.UpdatedAt = s.UpdatedAt.UTC()
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: check liveness: %w", err)
	}
	return out, nil
}
