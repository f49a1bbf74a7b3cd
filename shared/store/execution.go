package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// Execution is one row of the execution table.
type Execution struct {
	ExecutionID       int64
	CatalogID         int64
	Path              string
	Version           int
	ParentExecutionID int64 // 0: none
	Status            string
	Pool              string
	IdempotencyKey    string // "": none
	Workload          map[string]any
	State             json.RawMessage // the folded snapshot, raw JSON; nil in list results
	LastSeq           int64
	StartedAt         time.Time
	UpdatedAt         time.Time
	CompletedAt       time.Time // zero: not completed
	Error             string
	// ScheduleID and ScheduledAt: the schedule and due time that started
	// the execution (0 and zero: none).
	ScheduleID  int64
	ScheduledAt time.Time
}

// Cursor is the keyset position of e in ListExecutions order.
func (e Execution) Cursor() ExecutionCursor {
	return ExecutionCursor{StartedAt: e.StartedAt, ExecutionID: e.ExecutionID}
}

const executionColumns = `execution_id, catalog_id, path, version, parent_execution_id, status, pool,
	idempotency_key, workload, state, last_seq, started_at, updated_at, completed_at, error,
	schedule_id, scheduled_at`

// executionStateUnlessKnown is executionColumns with the state left out
// (NULL) for the executions of the bigint[] parameter ids at the seqs of
// the parameter seqs, pairwise: states the caller holds already
// (LockSet.KnownStates, GetExecutionUnlessAt).
func executionStateUnlessKnown(ids, seqs string) string {
	return `execution_id, catalog_id, path, version, parent_execution_id, status, pool,
	idempotency_key, workload,
	CASE WHEN EXISTS (SELECT 1 FROM unnest(` + ids + `::bigint[], ` + seqs + `::bigint[]) AS k(id, seq)
		WHERE k.id = execution.execution_id AND k.seq = execution.last_seq) THEN NULL ELSE state END,
	last_seq, started_at, updated_at, completed_at, error, schedule_id, scheduled_at`
}

func scanExecution(row pgx.Row) (Execution, error) {
	var (
		e                     Execution
		parent                *int64
		key, errText          *string
		workload, state       []byte
		completedAt           *time.Time
		startedAt, updatedAtT time.Time
		scheduleID            *int64
		scheduledAt           *time.Time
	)
	err := row.Scan(&e.ExecutionID, &e.CatalogID, &e.Path, &e.Version, &parent, &e.Status, &e.Pool,
		&key, &workload, &state, &e.LastSeq, &startedAt, &updatedAtT, &completedAt, &errText, &scheduleID, &scheduledAt)
	if err != nil {
		return e, err
	}
	e.ParentExecutionID, e.IdempotencyKey, e.Error = derefInt64(parent), derefString(key), derefString(errText)
	e.StartedAt, e.UpdatedAt, e.CompletedAt = startedAt.UTC(), updatedAtT.UTC(), derefTime(completedAt)
	e.ScheduleID, e.ScheduledAt = derefInt64(scheduleID), derefTime(scheduledAt)
	if state != nil {
		e.State = json.RawMessage(state)
	}
	if e.Workload, err = decodeObject(workload, "workload"); err != nil {
		return e, err
	}
	return e, nil
}

// insertExecutionStmt inserts an execution; a taken idempotency key is a
// unique violation (IsIdempotencyConflict) unless the caller adds ON CONFLICT.
func insertExecutionStmt(e Execution) (string, []any, error) {
	if e.ExecutionID <= 0 || e.Path == "" || e.Pool == "" {
		return "", nil, fmt.Errorf("insert execution %d: execution_id, path and pool are required", e.ExecutionID)
	}
	if e.Status == "" {
		e.Status = lifecycle.ExecutionRunning
	}
	workload, err := objectJSON(e.Workload)
	if err != nil {
		return "", nil, fmt.Errorf("insert execution %d: workload: %w", e.ExecutionID, err)
	}
	if workload == nil {
		workload = []byte("{}")
	}
	state := []byte(e.State)
	if state == nil {
		state = []byte("{}")
	}
	return `
		INSERT INTO execution (execution_id, catalog_id, path, version, parent_execution_id, status, pool,
			idempotency_key, workload, state, last_seq, started_at, updated_at, completed_at, error,
			schedule_id, scheduled_at)
		SELECT $1::bigint, $2::bigint, $3::text, $4::int, $5::bigint, $6::text, $7::text, $8::text,
			$9::jsonb, $10::bytea, $11::bigint, t, t, $13::timestamptz, $14::text, $15::bigint, $16::timestamptz
		FROM (SELECT coalesce($12::timestamptz, clock_timestamp()) AS t) clock`,
		[]any{e.ExecutionID, e.CatalogID, e.Path, e.Version, nullInt64(e.ParentExecutionID), e.Status, e.Pool,
			nullString(e.IdempotencyKey), string(workload), state, e.LastSeq, nullTime(e.StartedAt), nullTime(e.CompletedAt),
			nullString(e.Error), nullInt64(e.ScheduleID), nullTime(e.ScheduledAt)}, nil
}

// IsIdempotencyConflict reports an insert refused because its idempotency key
// is taken.
func IsIdempotencyConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "execution_idempotency_key"
}

// GetExecution reads an execution without locking it.
func GetExecution(ctx context.Context, q Querier, id int64) (Execution, error) {
	return getExecution(ctx, q, id, "")
}

// GetExecutionUnlessAt is GetExecution with the state left out (nil) when
// the row is at seq: the caller holds the state of that seq already.
func GetExecutionUnlessAt(ctx context.Context, q Querier, id, seq int64) (Execution, error) {
	e, err := scanExecution(q.QueryRow(ctx, `SELECT `+executionStateUnlessKnown("$2", "$3")+` FROM execution WHERE execution_id = $1`,
		id, []int64{id}, []int64{seq}))
	return found(e, err, "execution %d", id)
}

func getExecution(ctx context.Context, q Querier, id int64, lock string) (Execution, error) {
	e, err := scanExecution(q.QueryRow(ctx, `SELECT `+executionColumns+` FROM execution WHERE execution_id = $1`+lock, id))
	return found(e, err, "execution %d", id)
}

// GetExecutionByIdempotencyKey finds the execution an execute request with key created.
func GetExecutionByIdempotencyKey(ctx context.Context, q Querier, key string) (Execution, error) {
	e, err := scanExecution(q.QueryRow(ctx, `SELECT `+executionColumns+` FROM execution WHERE idempotency_key = $1`, key))
	return found(e, err, "execution with idempotency key %q", key)
}

// updateExecutionsStmt writes rows back; the key is matched with = ANY too
// (see updateCommandsStmt).
func updateExecutionsStmt(rows []Execution) (string, []any) {
	n := len(rows)
	ids, seqs := make([]int64, n), make([]int64, n)
	statuses := make([]string, n)
	states, errs := make([][]byte, n), make([]*string, n)
	completed := make([]*time.Time, n)
	catalogs, versions := make([]int64, n), make([]int32, n)
	for i, e := range rows {
		states[i] = e.State // nil keeps the stored state
		ids[i], seqs[i], statuses[i], errs[i], completed[i] = e.ExecutionID, e.LastSeq, e.Status, nullString(e.Error), nullTime(e.CompletedAt)
		// A redrive may move an execution to a newer version of its playbook.
		catalogs[i], versions[i] = e.CatalogID, int32(e.Version)
	}
	return `
		UPDATE execution x
		SET status = u.status, state = coalesce(u.state, x.state), last_seq = u.last_seq,
		    completed_at = u.completed_at, error = u.error, updated_at = clock_timestamp(),
		    catalog_id = u.catalog_id, version = u.version
		FROM unnest($1::bigint[], $2::text[], $3::bytea[], $4::bigint[], $5::timestamptz[], $6::text[], $7::bigint[], $8::int[])
			AS u(execution_id, status, state, last_seq, completed_at, error, catalog_id, version)
		WHERE x.execution_id = u.execution_id AND x.execution_id = ANY($1)
		RETURNING x.execution_id, x.updated_at`, []any{ids, statuses, states, seqs, completed, errs, catalogs, versions}
}

// ExecutionCursor is the keyset position after the last row of a page.
type ExecutionCursor struct {
	StartedAt   time.Time
	ExecutionID int64
}

// ExecutionFilter selects a page of ListExecutions; empty fields do not filter.
type ExecutionFilter struct {
	Status string
	Path   string // exact
	// PathContains matches paths containing it, case-insensitively (NoETL's
	// list filter). Such a filter cannot use an index: the scan walks
	// started_at order and stops after the page, so it costs little while
	// matches are common and more when they are rare.
	PathContains      string
	CatalogID         int64
	ParentExecutionID int64
	// StartedSince and StartedUntil bound started_at: at or after, before
	// (zero: unbounded).
	StartedSince, StartedUntil time.Time
	After                      *ExecutionCursor
	Limit                      int // 1..1000; 0 means 100
	// Offset skips rows of the merged page (NoETL's paging); the store
	// ignores it: the caller asks each shard for Limit+Offset rows.
	Offset int
}

// ListExecutions returns one shard's page ordered by (started_at DESC, execution_id
// DESC), without workload and state. The API merges the shards' pages by the same
// order; the cursor of the merged page's last row is valid on every shard.
func ListExecutions(ctx context.Context, q Querier, f ExecutionFilter) ([]Execution, error) {
	limit, err := pageLimit(f.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: list executions: %w", err)
	}
	// Conditions are spelled out per filter (not `$1 = '' OR status = $1`) so every
	// cached plan can use the matching index.
	var w conds
	if f.Status != "" {
		w.add("status = " + w.arg(f.Status))
	}
	if f.Path != "" {
		w.add("path = " + w.arg(f.Path))
	}
	if f.PathContains != "" {
		w.add("strpos(lower(path), lower(" + w.arg(f.PathContains) + ")) > 0")
	}
	if f.CatalogID != 0 {
		w.add("catalog_id = " + w.arg(f.CatalogID))
	}
	if f.ParentExecutionID != 0 {
		w.add("parent_execution_id = " + w.arg(f.ParentExecutionID))
	}
	if !f.StartedSince.IsZero() {
		w.add("started_at >= " + w.arg(f.StartedSince))
	}
	if !f.StartedUntil.IsZero() {
		w.add("started_at < " + w.arg(f.StartedUntil))
	}
	if f.After != nil {
		w.add(fmt.Sprintf("(started_at, execution_id) < (%s, %s)", w.arg(f.After.StartedAt), w.arg(f.After.ExecutionID)))
	}
	sql := `
		SELECT execution_id, catalog_id, path, version, parent_execution_id, status, pool,
			idempotency_key, NULL::jsonb, NULL::bytea, last_seq, started_at, updated_at, completed_at, error,
			schedule_id, scheduled_at
		FROM execution` + w.sql() + `
		ORDER BY started_at DESC, execution_id DESC
		LIMIT ` + w.arg(limit)
	return queryRows(ctx, q, "list executions", scanExecution, sql, w.args...)
}

// CascadeKey is the key of a cancel event's context that says whether the
// cancel reaches the execution's children: false when the request said
// cascade false (NoETL's CLI sends it); absent or true, it does (R-R10).
const CascadeKey = "cascade"

// cancelCascadedSQL is true when execution p was cancelled with its children:
// CANCELLED, and its cancel event did not say cascade false. The event is
// found by the log's primary key (execution_id, seq).
const cancelCascadedSQL = `(p.status = '` + lifecycle.ExecutionCancelled + `' AND NOT EXISTS (
	SELECT 1 FROM event ce WHERE ce.execution_id = p.execution_id
	AND ce.event_type = '` + eventtype.PlaybookCancelled + `' AND ce.context @> '{"` + CascadeKey + `": false}'))`

// ListOrphanedChildren returns running children whose parent already ended as
// CANCELLED with its children, up to limit: the cancel cascade (R-R10)
// re-driven by the drain. Children live on their parent's shard (R-I3), so
// one shard answers.
func ListOrphanedChildren(ctx context.Context, q Querier, limit int) ([]int64, error) {
	return queryRows(ctx, q, "list orphaned children", scanID, `
		SELECT c.execution_id FROM execution c
		JOIN execution p ON p.execution_id = c.parent_execution_id
		WHERE c.status IN ('`+lifecycle.ExecutionRunning+`', '`+lifecycle.ExecutionFailing+`') AND `+cancelCascadedSQL+`
		LIMIT $1`, limit)
}

// ListIdle returns, in id order and up to limit, the running executions
// nothing has moved since before: no event since (the row's updated_at), no
// command held by a worker under a live lease (one that heartbeats), no
// running child that moved since. What POST /api/executions/cleanup cancels:
// a step a worker is running, or a parent waiting on a child that
// progresses, is not idle; a command nobody claims is, however often it is
// announced again.
func ListIdle(ctx context.Context, q Querier, before time.Time, limit int) ([]int64, error) {
	return queryRows(ctx, q, "list idle executions", scanID, `
		SELECT e.execution_id FROM execution e
		WHERE e.status IN ('`+lifecycle.ExecutionRunning+`', '`+lifecycle.ExecutionFailing+`') AND e.updated_at < $1
		  AND NOT EXISTS (SELECT 1 FROM command c WHERE c.execution_id = e.execution_id AND `+lifecycle.ActiveSQL+` AND `+lifecycle.LiveSQL+`)
		  AND NOT EXISTS (SELECT 1 FROM execution k WHERE k.parent_execution_id = e.execution_id
			AND k.status IN ('`+lifecycle.ExecutionRunning+`', '`+lifecycle.ExecutionFailing+`') AND k.updated_at >= $1)
		ORDER BY e.execution_id
		LIMIT $2`, before, limit)
}

// scanID reads a row of one id.
func scanID(r pgx.Row) (int64, error) {
	var id int64
	err := r.Scan(&id)
	return id, err
}
