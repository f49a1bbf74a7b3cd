package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/lifecycle"
)

// Command statuses, as the command lifecycle (shared/lifecycle) names them.
const (
	CommandPending   = lifecycle.Pending
	CommandClaimed   = lifecycle.Claimed
	CommandRunning   = lifecycle.Running
	CommandCompleted = lifecycle.Completed
	CommandFailed    = lifecycle.Failed
	CommandCancelled = lifecycle.Cancelled
	CommandExpired   = lifecycle.Expired
)

// DefaultTimeoutSeconds is a command's timeout when the step sets none (R-L2).
const DefaultTimeoutSeconds = 3600

// Command is one row of the command table.
type Command struct {
	CommandID      string
	ExecutionID    int64
	IssuedEventID  int64
	Step           string
	ToolKind       string
	Status         string
	Attempt        int
	MaxAttempts    int
	WorkerID       string    // "": unclaimed
	LeaseExpiresAt time.Time // zero: no lease
	DeadlineAt     time.Time // claimed_at + timeout (R-L2); zero until claimed
	TimeoutSeconds int
	AvailableAt    time.Time // not claimable before (retry backoff, R-L7)
	AnnouncedAt    time.Time // last announced again (lifecycle.ReannounceDue); zero: never
	Context        map[string]any
	Meta           map[string]any
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Lifecycle is what the lifecycle's guards read of the row.
func (c Command) Lifecycle() lifecycle.Row {
	return lifecycle.Row{Status: c.Status, WorkerID: c.WorkerID, Attempt: c.Attempt, LeaseExpiresAt: c.LeaseExpiresAt,
		DeadlineAt: c.DeadlineAt, AvailableAt: c.AvailableAt, AnnouncedAt: c.AnnouncedAt}
}

// commandStateColumns reads a command without its payload (context and
// meta come back nil), for decisions that do not need it.
const commandStateColumns = `command_id, execution_id, issued_event_id, step, tool_kind, status, attempt, max_attempts,
	worker_id, lease_expires_at, deadline_at, timeout_seconds, available_at, announced_at, NULL::jsonb, NULL::jsonb, created_at, updated_at`

const commandColumns = `command_id, execution_id, issued_event_id, step, tool_kind, status, attempt, max_attempts,
	worker_id, lease_expires_at, deadline_at, timeout_seconds, available_at, announced_at, context, meta, created_at, updated_at`

func scanCommand(row pgx.Row) (Command, error) {
	var (
		c                 Command
		workerID          *string
		lease, deadline   *time.Time
		announced         *time.Time
		ctxJSON, metaJSON []byte
	)
	err := row.Scan(&c.CommandID, &c.ExecutionID, &c.IssuedEventID, &c.Step, &c.ToolKind, &c.Status, &c.Attempt,
		&c.MaxAttempts, &workerID, &lease, &deadline, &c.TimeoutSeconds, &c.AvailableAt, &announced, &ctxJSON, &metaJSON,
		&c.CreatedAt, &c.UpdatedAt)
	if err != nil {
		return c, err
	}
	c.WorkerID, c.LeaseExpiresAt, c.DeadlineAt = derefString(workerID), derefTime(lease), derefTime(deadline)
	c.AnnouncedAt = derefTime(announced)
	c.AvailableAt, c.CreatedAt, c.UpdatedAt = c.AvailableAt.UTC(), c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	if c.Context, err = decodeObject(ctxJSON, "context"); err != nil {
		return c, err
	}
	c.Meta, err = decodeObject(metaJSON, "meta")
	return c, err
}

func collectCommands(rows pgx.Rows, err error) ([]Command, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Command, error) { return scanCommand(r) })
}

// commandRow runs a statement returning one command row; no row is notFound.
func commandRow(ctx context.Context, q Querier, what string, notFound error, sql string, args ...any) (Command, error) {
	c, err := scanCommand(q.QueryRow(ctx, sql, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("store: %s: %w", what, notFound)
	}
	if err != nil {
		return c, fmt.Errorf("store: %s: %w", what, err)
	}
	return c, nil
}

func insertCommandsStmt(cmds []Command) (string, []any, error) {
	n := len(cmds)
	var (
		idList, steps, kinds, statuses = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		execIDs, issued                = make([]int64, n), make([]int64, n)
		attempts, maxAttempts, timeout = make([]int32, n), make([]int32, n), make([]int32, n)
		available, leases, deadlines   = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		workers                        = make([]*string, n)
		contexts, metas                = make([]*string, n), make([]*string, n)
	)
	for i, c := range cmds {
		if c.CommandID == "" || c.ExecutionID <= 0 || c.IssuedEventID <= 0 || c.Step == "" {
			return "", nil, fmt.Errorf("insert command %q: command_id, execution_id, issued_event_id and step are required", c.CommandID)
		}
		idList[i], execIDs[i], issued[i], steps[i], kinds[i] = c.CommandID, c.ExecutionID, c.IssuedEventID, c.Step, c.ToolKind
		statuses[i] = orDefault(c.Status, CommandPending)
		attempts[i], maxAttempts[i] = int32(max(c.Attempt, 1)), int32(max(c.MaxAttempts, 1))
		timeout[i] = int32(c.TimeoutSeconds)
		if timeout[i] <= 0 {
			timeout[i] = DefaultTimeoutSeconds
		}
		available[i], leases[i], deadlines[i] = nullTime(c.AvailableAt), nullTime(c.LeaseExpiresAt), nullTime(c.DeadlineAt)
		workers[i] = nullString(c.WorkerID)
		var err error
		if contexts[i], err = objectJSONText(c.Context); err == nil {
			metas[i], err = objectJSONText(c.Meta)
		}
		if err != nil {
			return "", nil, fmt.Errorf("insert command %s: %w", c.CommandID, err)
		}
	}
	return `
		INSERT INTO command (command_id, execution_id, issued_event_id, step, tool_kind, status, attempt,
			max_attempts, timeout_seconds, available_at, context, meta, worker_id, lease_expires_at, deadline_at)
		SELECT command_id, execution_id, issued_event_id, step, tool_kind, status, attempt, max_attempts,
			timeout_seconds, coalesce(available_at, now()), coalesce(context::jsonb, '{}'), coalesce(meta::jsonb, '{}'),
			worker_id, lease_expires_at, deadline_at
		FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::int[],
			$8::int[], $9::int[], $10::timestamptz[], $11::text[], $12::text[], $13::text[], $14::timestamptz[],
			$15::timestamptz[])
			AS t(command_id, execution_id, issued_event_id, step, tool_kind, status, attempt, max_attempts,
			timeout_seconds, available_at, context, meta, worker_id, lease_expires_at, deadline_at)`,
		[]any{idList, execIDs, issued, steps, kinds, statuses, attempts, maxAttempts, timeout, available, contexts, metas,
			workers, leases, deadlines}, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// GetCommandByIssuedEvent finds the command a command.issued event created: the
// lookup of GET /api/commands/{event_id} and of claim (which then locks the execution,
// then the command, R-L5).
func GetCommandByIssuedEvent(ctx context.Context, q Querier, eventID int64) (Command, error) {
	return commandRow(ctx, q, fmt.Sprintf("command issued by event %d", eventID), ErrNotFound,
		`SELECT `+commandColumns+` FROM command WHERE issued_event_id = $1`, eventID)
}

// commandStateError tells ErrNotFound from ErrConflict after a guarded UPDATE matched
// no row, naming the current status.
func commandStateError(ctx context.Context, q Querier, what, commandID string) error {
	var status string
	var worker *string
	err := q.QueryRow(ctx, `SELECT status, worker_id FROM command WHERE command_id = $1`, commandID).Scan(&status, &worker)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return fmt.Errorf("store: %s: %w: status %s, worker %q", what, ErrConflict, status, derefString(worker))
}

// ExtendLease is a command heartbeat: the lease of the command held by
// workerID (at attempt, when > 0) is extended (lifecycle.LeaseEnd). It still
// succeeds after the lease time passed if no sweep or reclaim happened (the
// holder is still the holder, R-L8), but not once the command's deadline and
// grace have passed: then it is ErrConflict, as anything else is. Heartbeats
// write no events (R-L1).
func ExtendLease(ctx context.Context, q Querier, commandID, workerID string, attempt int, l lifecycle.Limits) (time.Time, error) {
	var until time.Time
	err := q.QueryRow(ctx, extendLeasesSQL(`command_id = $3 AND `+lifecycle.HeldBySQL("$4", "$5"))+` RETURNING lease_expires_at`,
		l.Lease, l.Grace, commandID, workerID, attempt).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return until, commandStateError(ctx, q, "heartbeat command "+commandID+" by "+workerID, commandID)
	}
	if err != nil {
		return until, fmt.Errorf("store: heartbeat command %s: %w", commandID, err)
	}
	return until.UTC(), nil
}

// ExtendHeldLeases is a pool heartbeat's effect on one shard: the live
// leases of the commands workerID holds and claimed at or after since (the
// worker's current instance registered then) are extended
// (lifecycle.LeaseEnd). A lapsed lease is left to the sweep, and a command
// some transaction is changing right now (a report completing it) is
// skipped rather than waited for: the next beat gets it. It returns how many
// leases it extended.
func ExtendHeldLeases(ctx context.Context, q Querier, workerID string, since time.Time, l lifecycle.Limits) (int64, error) {
	tag, err := q.Exec(ctx, extendLeasesSQL(`command_id = ANY (ARRAY(
			SELECT command_id FROM command
			WHERE `+lifecycle.HeldBySQL("$3", "0")+` AND lease_expires_at > now()
			  AND deadline_at - make_interval(secs => timeout_seconds) >= $4
			ORDER BY command_id FOR UPDATE SKIP LOCKED))`), l.Lease, l.Grace, workerID, since)
	if err != nil {
		return 0, fmt.Errorf("store: extend the leases of worker %s: %w", workerID, err)
	}
	return tag.RowsAffected(), nil
}

// extendLeasesSQL is the one statement that extends leases: the commands
// where selects ($1 the lease, $2 the grace) keep their holder until
// lifecycle.LeaseEnd, while that is still ahead (past its deadline and grace
// a command is the sweep's, not its holder's).
func extendLeasesSQL(where string) string {
	end := lifecycle.LeaseEndSQL("$1", "$2")
	return `UPDATE command SET lease_expires_at = ` + end + `, updated_at = now()
		WHERE ` + where + ` AND ` + end + ` > now()`
}

// LockHeldCommands returns the commands of these executions that workerID
// holds (claimed or running), locked, with their payloads: what a report
// posted again after its answer was lost hands back (the answer carried
// them). Lock the executions first (R-L5).
func LockHeldCommands(ctx context.Context, q Querier, executionIDs []int64, workerID string) ([]Command, error) {
	cmds, err := collectCommands(q.Query(ctx, `
		SELECT `+commandColumns+` FROM command
		WHERE execution_id = ANY($1) AND `+lifecycle.HeldBySQL("$2", "0")+`
		ORDER BY command_id
		FOR UPDATE`, executionIDs, workerID))
	if err != nil {
		return nil, fmt.Errorf("store: lock the commands worker %s holds: %w", workerID, err)
	}
	return cmds, nil
}

// HeldCounts counts the commands each worker holds under a live lease: its
// in-flight commands. names nil counts every worker's.
func HeldCounts(ctx context.Context, q Querier, names []string) (map[string]int, error) {
	return queryMap[string, int](ctx, q, "count held commands", `
		SELECT worker_id, count(*) FROM command
		WHERE `+lifecycle.HeldSQL+` AND lease_expires_at > now()
		  AND ($1::text[] IS NULL OR worker_id = ANY($1))
		GROUP BY worker_id`, names)
}

// CancelActiveCommands marks every PENDING, CLAIMED or RUNNING command of an execution
// CANCELLED and returns them (cancel, finalize, R-R9/R-R10). Lock the execution first.
func CancelActiveCommands(ctx context.Context, q Querier, executionID int64) ([]Command, error) {
	cmds, err := collectCommands(q.Query(ctx, `
		UPDATE command SET status = '`+lifecycle.Cancelled+`', updated_at = now()
		WHERE execution_id = $1 AND `+lifecycle.ActiveSQL+`
		RETURNING `+commandColumns, executionID))
	if err != nil {
		return nil, fmt.Errorf("store: cancel commands of execution %d: %w", executionID, err)
	}
	return cmds, nil
}

// The sweeper's queries (api.md, scheduled invocation). Each runs in the caller's
// transaction and keeps the lock order of R-L5: first it locks the executions that
// have matching commands, skipping executions another transaction holds (FOR UPDATE
// SKIP LOCKED: concurrent sweepers and live ingest never wait for each other), then
// it locks and returns those executions' matching commands. limit bounds the
// candidate commands (1..1000); executions skipped are picked up by the next run.
// skip names executions left out (those the run already failed on): the next
// batch reaches past them.

// LockEndedLeases returns held commands whose lease ended
// (lifecycle.Ended): it ran out, or the deadline and grace passed, once the
// database has been reachable for a lease.
func LockEndedLeases(ctx context.Context, tx Querier, l lifecycle.Limits, skip []int64, limit int) ([]Command, error) {
	return lockForSweep(ctx, tx, "ended leases", skip, limit, lifecycle.EndedSQL("$2", "$3"), "lease_expires_at", l.Lease, l.Grace)
}

// LockReannounceDue returns pending commands of any attempt due to be
// announced again (lifecycle.ReannounceDue).
func LockReannounceDue(ctx context.Context, tx Querier, a lifecycle.Reannounce, skip []int64, limit int) ([]Command, error) {
	return lockForSweep(ctx, tx, "announcements due again", skip, limit, lifecycle.ReannounceDueSQL("$2", "$3"), "available_at", a.First, a.Max)
}

// lockForSweep: cond may use $2.. (extra); $1 is the limit in step one and the
// execution ids in step two; skip follows extra in step one. `= ANY (ARRAY(…))`
// makes step one a handful of primary key lookups rather than a join the
// planner may turn into a long index scan.
func lockForSweep(ctx context.Context, tx Querier, what string, skip []int64, limit int, cond, order string, extra ...any) ([]Command, error) {
	if limit < 1 || limit > 1000 {
		return nil, fmt.Errorf("store: sweep %s: limit %d outside 1..1000", what, limit)
	}
	skipAt := fmt.Sprintf("$%d", len(extra)+2)
	rows, err := tx.Query(ctx, `
		SELECT execution_id FROM execution
		WHERE execution_id = ANY (ARRAY(
			SELECT execution_id FROM command WHERE `+cond+` AND execution_id <> ALL(`+skipAt+`::bigint[])
			ORDER BY `+order+` LIMIT $1))
		ORDER BY execution_id
		FOR UPDATE SKIP LOCKED`, append(append([]any{limit}, extra...), nonNil(skip))...)
	if err != nil {
		return nil, fmt.Errorf("store: sweep %s: lock executions: %w", what, err)
	}
	execIDs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("store: sweep %s: lock executions: %w", what, err)
	}
	if len(execIDs) == 0 {
		return nil, nil
	}
	// No SKIP LOCKED here: every writer of these commands locks their execution
	// first, and we hold those locks now.
	cmds, err := collectCommands(tx.Query(ctx, `
		SELECT `+commandColumns+` FROM command
		WHERE execution_id = ANY($1) AND `+cond+`
		ORDER BY `+order+`, command_id
		FOR UPDATE`, append([]any{execIDs}, extra...)...))
	if err != nil {
		return nil, fmt.Errorf("store: sweep %s: lock commands: %w", what, err)
	}
	return cmds, nil
}

// CountCommandsByStatus counts a shard's command rows per status. It scans the
// table: for the local server's /metrics, not for a hot path.
func CountCommandsByStatus(ctx context.Context, q Querier) (map[string]int64, error) {
	return queryMap[string, int64](ctx, q, "count commands", `SELECT status, count(*) FROM command GROUP BY status`)
}
