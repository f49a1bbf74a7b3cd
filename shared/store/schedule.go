package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Schedule is one row of the schedule table (cluster database).
type Schedule struct {
	ScheduleID      int64
	PlaybookPath    string
	PlaybookVersion int // 0: the latest version when each run starts
	Cron            string
	IntervalSeconds int64
	Timezone        string
	Enabled         bool
	InputPayload    map[string]any
	Overlap         string
	CatchupSeconds  int64
	JitterSeconds   int64
	Meta            map[string]any
	// NextRunAt is the first due time not handled yet, FireAt when it fires.
	NextRunAt, FireAt time.Time
	// BufferedAt: the due time waiting for the running run (buffer_one).
	BufferedAt time.Time
	// BackfillNext..BackfillTo: what is left of a backfill.
	BackfillNext, BackfillTo time.Time
	// The last run started.
	LastRunAt, LastScheduledAt time.Time
	LastExecutionID            int64
	CreatedAt, UpdatedAt       time.Time
}

const scheduleColumns = `schedule_id, playbook_path, playbook_version, cron, interval_seconds, timezone, enabled,
	input_payload, overlap, catchup_seconds, jitter_seconds, meta, next_run_at, fire_at, buffered_at,
	backfill_next, backfill_to, last_run_at, last_scheduled_at, last_execution_id, created_at, updated_at`

func scanSchedule(row pgx.Row) (Schedule, error) {
	var (
		s                                            Schedule
		version                                      *int32
		cron                                         *string
		interval, lastExec                           *int64
		payload, meta                                []byte
		next, fire, buffered, bfNext, bfTo, last, ls *time.Time
	)
	err := row.Scan(&s.ScheduleID, &s.PlaybookPath, &version, &cron, &interval, &s.Timezone, &s.Enabled,
		&payload, &s.Overlap, &s.CatchupSeconds, &s.JitterSeconds, &meta, &next, &fire, &buffered,
		&bfNext, &bfTo, &last, &ls, &lastExec, &s.CreatedAt, &s.UpdatedAt)
	if err != nil {
		return s, err
	}
	if version != nil {
		s.PlaybookVersion = int(*version)
	}
	s.Cron, s.IntervalSeconds, s.LastExecutionID = derefString(cron), derefInt64(interval), derefInt64(lastExec)
	s.NextRunAt, s.FireAt, s.BufferedAt = derefTime(next), derefTime(fire), derefTime(buffered)
	s.BackfillNext, s.BackfillTo, s.LastRunAt, s.LastScheduledAt = derefTime(bfNext), derefTime(bfTo), derefTime(last), derefTime(ls)
	s.CreatedAt, s.UpdatedAt = s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	if s.InputPayload, err = decodeObject(payload, "input_payload"); err != nil {
		return s, err
	}
	if s.Meta, err = decodeObject(meta, "meta"); err != nil {
		return s, err
	}
	return s, nil
}

func scheduleArgs(s Schedule) ([]any, error) {
	payload, err := objectJSON(s.InputPayload)
	if err != nil {
		return nil, fmt.Errorf("input_payload: %w", err)
	}
	meta, err := objectJSON(s.Meta)
	if err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	if payload == nil {
		payload = []byte("{}")
	}
	if meta == nil {
		meta = []byte("{}")
	}
	var version *int32
	if s.PlaybookVersion > 0 {
		v := int32(s.PlaybookVersion)
		version = &v
	}
	return []any{s.PlaybookPath, version, nullString(s.Cron), nullInt64(s.IntervalSeconds), s.Timezone, s.Enabled,
		string(payload), s.Overlap, s.CatchupSeconds, s.JitterSeconds, string(meta), nullTime(s.NextRunAt), nullTime(s.FireAt),
		nullTime(s.BufferedAt), nullTime(s.BackfillNext), nullTime(s.BackfillTo), nullTime(s.LastRunAt),
		nullTime(s.LastScheduledAt), nullInt64(s.LastExecutionID)}, nil
}

// NextScheduleID takes a new schedule id (what its jitter is derived from,
// before the row is written).
func NextScheduleID(ctx context.Context, q Querier) (int64, error) {
	var id int64
	if err := q.QueryRow(ctx, `SELECT nextval('schedule_id_seq')`).Scan(&id); err != nil {
		return 0, fmt.Errorf("store: new schedule id: %w", err)
	}
	return id, nil
}

// InsertSchedule writes a new schedule with the id NextScheduleID gave.
func InsertSchedule(ctx context.Context, q Querier, s Schedule) (Schedule, error) {
	args, err := scheduleArgs(s)
	if err != nil {
		return s, fmt.Errorf("store: insert schedule: %w", err)
	}
	out, err := scanSchedule(q.QueryRow(ctx, `
		INSERT INTO schedule (playbook_path, playbook_version, cron, interval_seconds, timezone, enabled,
			input_payload, overlap, catchup_seconds, jitter_seconds, meta, next_run_at, fire_at, buffered_at,
			backfill_next, backfill_to, last_run_at, last_scheduled_at, last_execution_id, schedule_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11::jsonb, $12, $13, $14, $15, $16, $17, $18, $19, $20)
		RETURNING `+scheduleColumns, append(args, s.ScheduleID)...))
	if err != nil {
		return out, fmt.Errorf("store: insert schedule: %w", err)
	}
	return out, nil
}

// UpdateSchedule writes every column of a schedule back.
func UpdateSchedule(ctx context.Context, q Querier, s Schedule) (Schedule, error) {
	args, err := scheduleArgs(s)
	if err != nil {
		return s, fmt.Errorf("store: update schedule %d: %w", s.ScheduleID, err)
	}
	out, err := scanSchedule(q.QueryRow(ctx, `
		UPDATE schedule SET playbook_path = $1, playbook_version = $2, cron = $3, interval_seconds = $4,
			timezone = $5, enabled = $6, input_payload = $7::jsonb, overlap = $8, catchup_seconds = $9,
			jitter_seconds = $10, meta = $11::jsonb, next_run_at = $12, fire_at = $13, buffered_at = $14,
			backfill_next = $15, backfill_to = $16, last_run_at = $17, last_scheduled_at = $18,
			last_execution_id = $19, updated_at = clock_timestamp()
		WHERE schedule_id = $20
		RETURNING `+scheduleColumns, append(args, s.ScheduleID)...))
	if errors.Is(err, pgx.ErrNoRows) {
		return out, fmt.Errorf("store: schedule %d: %w", s.ScheduleID, ErrNotFound)
	}
	if err != nil {
		return out, fmt.Errorf("store: update schedule %d: %w", s.ScheduleID, err)
	}
	return out, nil
}

// GetSchedule reads a schedule; LockSchedule also locks it (in a
// transaction) until commit.
func GetSchedule(ctx context.Context, q Querier, id int64) (Schedule, error) {
	return getSchedule(ctx, q, id, "")
}

// LockSchedule reads a schedule FOR UPDATE.
func LockSchedule(ctx context.Context, q Querier, id int64) (Schedule, error) {
	return getSchedule(ctx, q, id, " FOR UPDATE")
}

func getSchedule(ctx context.Context, q Querier, id int64, lock string) (Schedule, error) {
	s, err := scanSchedule(q.QueryRow(ctx, `SELECT `+scheduleColumns+` FROM schedule WHERE schedule_id = $1`+lock, id))
	return found(s, err, "schedule %d", id)
}

// LockDueSchedule locks one schedule with something to do at now: enabled
// and fired, or with a buffered run or a backfill waiting; skip lists the
// ones this firing has handled already. Rows another transaction holds are
// skipped (SKIP LOCKED), so concurrent firings never handle one schedule at
// once. ok is false when none is left.
func LockDueSchedule(ctx context.Context, q Querier, now time.Time, skip []int64) (s Schedule, ok bool, err error) {
	if skip == nil {
		skip = []int64{}
	}
	s, err = scanSchedule(q.QueryRow(ctx, `
		SELECT `+scheduleColumns+` FROM schedule
		WHERE ((enabled AND fire_at <= $1) OR buffered_at IS NOT NULL OR backfill_next IS NOT NULL)
			AND schedule_id <> ALL($2)
		ORDER BY fire_at NULLS LAST
		LIMIT 1 FOR UPDATE SKIP LOCKED`, now, skip))
	if errors.Is(err, pgx.ErrNoRows) {
		return s, false, nil
	}
	if err != nil {
		return s, false, fmt.Errorf("store: lock a due schedule: %w", err)
	}
	return s, true, nil
}

// NextFireAt is the earliest fire time of the enabled schedules; zero: none.
func NextFireAt(ctx context.Context, q Querier) (time.Time, error) {
	var t *time.Time
	if err := q.QueryRow(ctx, `SELECT min(fire_at) FROM schedule WHERE enabled`).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("store: next schedule fire time: %w", err)
	}
	return derefTime(t), nil
}

// DeleteSchedule deletes a schedule and its runs' log.
func DeleteSchedule(ctx context.Context, q Querier, id int64) error {
	return deleteOne(ctx, q, "schedule", id, `DELETE FROM schedule WHERE schedule_id = $1`)
}

// ListSchedules returns schedules by id, after afterID, at most limit.
func ListSchedules(ctx context.Context, q Querier, afterID int64, limit int) ([]Schedule, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, fmt.Errorf("store: list schedules: %w", err)
	}
	return queryRows(ctx, q, "list schedules", scanSchedule,
		`SELECT `+scheduleColumns+` FROM schedule WHERE schedule_id > $1 ORDER BY schedule_id LIMIT $2`, afterID, limit)
}

// Outcomes of a schedule run row.
const (
	RunStarted = "started"
	RunSkipped = "skipped"
	RunFailed  = "failed"
)

// ScheduleRun is one row of a schedule's log: a run started (or that could
// not start), or a range of due times skipped for one reason.
type ScheduleRun struct {
	RunID       int64
	ScheduleID  int64
	ScheduledAt time.Time
	Origin      string
	Outcome     string
	ExecutionID int64
	Through     time.Time
	Count       int
	Reason      string
	RecordedAt  time.Time
}

const runColumns = `run_id, schedule_id, scheduled_at, origin, outcome, execution_id, through, count, reason, recorded_at`

func scanRun(row pgx.Row) (ScheduleRun, error) {
	var (
		r      ScheduleRun
		exec   *int64
		reason *string
	)
	err := row.Scan(&r.RunID, &r.ScheduleID, &r.ScheduledAt, &r.Origin, &r.Outcome, &exec, &r.Through, &r.Count, &reason, &r.RecordedAt)
	r.ExecutionID, r.Reason = derefInt64(exec), derefString(reason)
	r.ScheduledAt, r.Through, r.RecordedAt = r.ScheduledAt.UTC(), r.Through.UTC(), r.RecordedAt.UTC()
	return r, err
}

// LastRun is the newest row of a schedule's log; ok false: none.
func LastRun(ctx context.Context, q Querier, scheduleID int64) (r ScheduleRun, ok bool, err error) {
	r, err = scanRun(q.QueryRow(ctx, `SELECT `+runColumns+` FROM schedule_run WHERE schedule_id = $1
		ORDER BY scheduled_at DESC, run_id DESC LIMIT 1`, scheduleID))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("store: last run of schedule %d: %w", scheduleID, err)
	}
	return r, true, nil
}

// InsertRun appends a row to a schedule's log. A second started row for one
// due time is ignored (the first one stands).
func InsertRun(ctx context.Context, q Querier, r ScheduleRun) error {
	_, err := q.Exec(ctx, `
		INSERT INTO schedule_run (schedule_id, scheduled_at, origin, outcome, execution_id, through, count, reason)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (schedule_id, scheduled_at) WHERE outcome = 'started' DO NOTHING`,
		r.ScheduleID, r.ScheduledAt, r.Origin, r.Outcome, nullInt64(r.ExecutionID), r.Through, r.Count, nullString(r.Reason))
	if err != nil {
		return fmt.Errorf("store: record a run of schedule %d: %w", r.ScheduleID, err)
	}
	return nil
}

// ExtendSkip widens a skipped range of a schedule's log to through, n more
// due times.
func ExtendSkip(ctx context.Context, q Querier, runID int64, through time.Time, n int) error {
	if _, err := q.Exec(ctx, `UPDATE schedule_run SET through = $2, count = count + $3 WHERE run_id = $1`, runID, through, n); err != nil {
		return fmt.Errorf("store: extend skipped run %d: %w", runID, err)
	}
	return nil
}

// ListRuns returns a schedule's log, newest due time first, before the
// cursor (the last row's scheduled_at and run_id; zero: the start).
func ListRuns(ctx context.Context, q Querier, scheduleID int64, before time.Time, beforeRun int64, limit int) ([]ScheduleRun, error) {
	limit, err := pageLimit(limit)
	if err != nil {
		return nil, fmt.Errorf("store: list runs: %w", err)
	}
	what := fmt.Sprintf("list runs of schedule %d", scheduleID)
	if before.IsZero() {
		return queryRows(ctx, q, what, scanRun, `SELECT `+runColumns+` FROM schedule_run WHERE schedule_id = $1
			ORDER BY scheduled_at DESC, run_id DESC LIMIT $2`, scheduleID, limit)
	}
	return queryRows(ctx, q, what, scanRun, `SELECT `+runColumns+` FROM schedule_run WHERE schedule_id = $1
		AND (scheduled_at, run_id) < ($2, $3) ORDER BY scheduled_at DESC, run_id DESC LIMIT $4`, scheduleID, before, beforeRun, limit)
}

// ExecutionStatuses reads the status of executions on one shard by id.
func ExecutionStatuses(ctx context.Context, q Querier, ids []int64) (map[int64]string, error) {
	return queryMap[int64, string](ctx, q, "execution statuses", `SELECT execution_id, status FROM execution WHERE execution_id = ANY($1)`, ids)
}
