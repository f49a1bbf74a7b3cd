package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/ids"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/schedule"
	"github.com/noetl-go/noetl/shared/store"
)

// This file owns the schedule lifecycle: every transition of a schedule row
// (create, change, pause, resume, delete, fire, trigger, backfill) happens
// here, under the row's lock, and what is due is decided by shared/schedule
// (pure: it takes now). A run starts through Execute with the idempotency
// key of its (schedule_id, scheduled_at), so two firing paths, a retried
// firing, or two servers cannot start one due time twice: a second start
// finds the first execution.

// Defaults and bounds of a schedule's settings.
const (
	DefaultCatchupSeconds = 60
	MaxCatchupSeconds     = 366 * 24 * 3600
	MaxJitterSeconds      = 24 * 3600
	// MaxBackfillRuns bounds the due times one backfill may hold.
	MaxBackfillRuns = 10000
	// maxSchedulesPerFiring bounds the schedules one FireSchedules handles;
	// the rest wait for the next firing (a second later locally).
	maxSchedulesPerFiring = 200
)

// ScheduleSync keeps an outside scheduler in step with the schedules table:
// one entry per schedule that wakes the firing at the schedule's next fire
// time (shared/awssched: EventBridge Scheduler). Put is called after every
// committed change of a schedule, Delete after its deletion. A failed call
// is logged and repaired by the next firing of the schedule, which the
// per-minute sweep runs whatever the entry says.
type ScheduleSync interface {
	Put(ctx context.Context, e ScheduleEntry) error
	Delete(ctx context.Context, scheduleID int64) error
}

// ScheduleEntry is what the outside scheduler holds for one schedule.
type ScheduleEntry struct {
	ScheduleID int64
	// FireAt is when the schedule next has something to do; zero: nothing
	// (a cron with no due time left).
	FireAt  time.Time
	Enabled bool
}

// SchedulePatch creates or changes a schedule; a nil field keeps its value
// (or takes its default on create). Giving Cron clears IntervalSeconds and
// the other way round.
type SchedulePatch struct {
	PlaybookPath    *string
	PlaybookVersion *int // 0: the latest version when each run starts
	Cron            *string
	IntervalSeconds *int64
	Timezone        *string
	Enabled         *bool
	InputPayload    map[string]any // nil: keep
	Overlap         *string
	CatchupSeconds  *int64
	JitterSeconds   *int64
	Meta            map[string]any // nil: keep
}

// ScheduleView is a schedule as the API shows it.
type ScheduleView struct {
	store.Schedule
	// LastStatus is the status of the last run started; "" before the first.
	LastStatus string
}

// ScheduleRunView is one row of a schedule's log with its execution's
// status ("" when it has none).
type ScheduleRunView struct {
	store.ScheduleRun
	Status string
}

// FireReport counts what one firing did.
type FireReport struct {
	Started   int `json:"started"`
	Skipped   int `json:"skipped"`
	Failed    int `json:"failed"`
	Schedules int `json:"schedules"`
	// NextFireAt is the earliest fire time left (zero: none): when the
	// local loop wakes next.
	NextFireAt time.Time `json:"next_fire_at"`
}

// TriggerResult is what a run-now did.
type TriggerResult struct {
	ScheduledAt time.Time
	// Outcome is started, buffered (waits for the running run) or skipped.
	Outcome     string
	ExecutionID int64
	Reason      string
}

// ScheduleKey is the idempotency key of a schedule's run for a due time.
func ScheduleKey(scheduleID int64, at time.Time) string {
	return "schedule:" + strconv.FormatInt(scheduleID, 10) + "@" + at.UTC().Format(time.RFC3339Nano)
}

// ScheduleKeyPrefix starts every key ScheduleKey makes; POST /api/execute
// refuses it, so no request can take a due time's key.
const ScheduleKeyPrefix = "schedule:"

func (s *Service) now() time.Time { return s.cfg.Clock() }

// CreateSchedule validates and stores a new schedule; its first due time is
// the first after now.
func (s *Service) CreateSchedule(ctx context.Context, p SchedulePatch) (*ScheduleView, error) {
	sc := store.Schedule{Timezone: "UTC", Enabled: true, Overlap: schedule.OverlapSkip, CatchupSeconds: DefaultCatchupSeconds}
	if p.PlaybookPath == nil {
		return nil, Errorf(ErrInvalid, "playbook_path: required (a registered playbook's path)")
	}
	spec, err := s.applyPatch(ctx, &sc, p)
	if err != nil {
		return nil, err
	}
	if sc.ScheduleID, err = store.NextScheduleID(ctx, s.st.Cluster()); err != nil {
		return nil, err
	}
	s.arm(&sc, spec, s.now())
	out, err := store.InsertSchedule(ctx, s.st.Cluster(), sc)
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "schedule created", "schedule_id", out.ScheduleID, "path", out.PlaybookPath, "next_run_at", out.NextRunAt)
	s.sync(ctx, out)
	return &ScheduleView{Schedule: out}, nil
}

// UpdateSchedule changes a schedule (PATCH). Resuming (enabled false to
// true) or changing when it is due starts from the first due time after
// now: the due times of a pause are not run afterwards, and a resume brings
// no burst.
func (s *Service) UpdateSchedule(ctx context.Context, id int64, p SchedulePatch) (*ScheduleView, error) {
	var out store.Schedule
	err := s.inSchedule(ctx, id, func(tx pgx.Tx, sc store.Schedule) error {
		before := sc
		spec, err := s.applyPatch(ctx, &sc, p)
		if err != nil {
			return err
		}
		if (sc.Enabled && !before.Enabled) || sc.Cron != before.Cron || sc.IntervalSeconds != before.IntervalSeconds ||
			sc.Timezone != before.Timezone || sc.JitterSeconds != before.JitterSeconds {
			s.arm(&sc, spec, s.now())
		}
		out, err = store.UpdateSchedule(ctx, tx, sc)
		return err
	})
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "schedule changed", "schedule_id", id, "enabled", out.Enabled, "next_run_at", out.NextRunAt)
	s.sync(ctx, out)
	return s.scheduleView(ctx, out)
}

// DeleteSchedule deletes a schedule and its log; runs it started go on.
func (s *Service) DeleteSchedule(ctx context.Context, id int64) error {
	err := store.DeleteSchedule(ctx, s.st.Cluster(), id)
	if errors.Is(err, store.ErrNotFound) {
		return Errorf(ErrNotFound, "schedule %d not found", id)
	}
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "schedule deleted", "schedule_id", id)
	if s.cfg.Schedules != nil {
		if err := s.cfg.Schedules.Delete(ctx, id); err != nil {
			s.log.ErrorContext(ctx, "delete the schedule's scheduler entry", "schedule_id", id, "error", err.Error())
		}
	}
	return nil
}

// Schedule reads one schedule.
func (s *Service) Schedule(ctx context.Context, id int64) (*ScheduleView, error) {
	sc, err := store.GetSchedule(ctx, s.st.Cluster(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(ErrNotFound, "schedule %d not found", id)
	}
	if err != nil {
		return nil, err
	}
	return s.scheduleView(ctx, sc)
}

// ListSchedules returns schedules by id after afterID.
func (s *Service) ListSchedules(ctx context.Context, afterID int64, limit int) ([]ScheduleView, error) {
	rows, err := store.ListSchedules(ctx, s.st.Cluster(), afterID, limit)
	if err != nil {
		return nil, err
	}
	return withStatuses(ctx, s, rows, func(r store.Schedule) int64 { return r.LastExecutionID },
		func(r store.Schedule, status string) ScheduleView {
			return ScheduleView{Schedule: r, LastStatus: status}
		})
}

// ScheduleRuns returns a schedule's log, newest first, before a cursor.
func (s *Service) ScheduleRuns(ctx context.Context, id int64, before time.Time, beforeRun int64, limit int) ([]ScheduleRunView, error) {
	if _, err := s.Schedule(ctx, id); err != nil {
		return nil, err
	}
	rows, err := store.ListRuns(ctx, s.st.Cluster(), id, before, beforeRun, limit)
	if err != nil {
		return nil, err
	}
	return withStatuses(ctx, s, rows, func(r store.ScheduleRun) int64 { return r.ExecutionID },
		func(r store.ScheduleRun, status string) ScheduleRunView {
			return ScheduleRunView{ScheduleRun: r, Status: status}
		})
}

// withStatuses makes a view of each row with the status of the execution id
// names, the statuses read together (a statement per shard).
func withStatuses[R, V any](ctx context.Context, s *Service, rows []R, id func(R) int64, view func(R, string) V) ([]V, error) {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = id(r)
	}
	statuses, err := s.executionStatuses(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]V, len(rows))
	for i, r := range rows {
		out[i] = view(r, statuses[ids[i]])
	}
	return out, nil
}

// TriggerSchedule runs a schedule now, under its overlap policy; paused
// schedules run too (a user asked).
func (s *Service) TriggerSchedule(ctx context.Context, id int64) (*TriggerResult, error) {
	var res TriggerResult
	var out store.Schedule
	err := s.inSchedule(ctx, id, func(tx pgx.Tx, sc store.Schedule) error {
		var err error
		out, err = s.fireLocked(ctx, tx, sc, func(st schedule.State) schedule.Plan {
			p := schedule.Trigger(st, s.now())
			res.ScheduledAt = p.Buffered
			return p
		}, func(a schedule.Action, r store.ScheduleRun) {
			res.ScheduledAt, res.Outcome, res.ExecutionID, res.Reason = a.At, r.Outcome, r.ExecutionID, r.Reason
		}, &FireReport{})
		return err
	})
	if err != nil {
		return nil, err
	}
	if res.Outcome == "" {
		res.Outcome = "buffered"
	}
	s.sync(ctx, out)
	return &res, nil
}

// BackfillSchedule queues every due time of [from, to] (to not in the
// future): the firing starts them in order, each once, under the overlap
// policy (allow: at once; otherwise each after the previous run ended, so a
// backfill never skips). One backfill at a time per schedule.
func (s *Service) BackfillSchedule(ctx context.Context, id int64, from, to time.Time) (int, error) {
	now := s.now()
	switch {
	case !to.After(from) && !to.Equal(from):
		return 0, Errorf(ErrInvalid, "to: %s is before from %s", to.Format(time.RFC3339), from.Format(time.RFC3339))
	case to.After(now):
		return 0, Errorf(ErrInvalid, "to: %s is in the future; a backfill runs past due times (the schedule runs the future ones)", to.Format(time.RFC3339))
	}
	n := 0
	var out store.Schedule
	err := s.inSchedule(ctx, id, func(tx pgx.Tx, sc store.Schedule) error {
		if !sc.BackfillNext.IsZero() {
			return Errorf(ErrConflict, "schedule %d is backfilling already (next due time %s, through %s); wait for it to finish",
				id, sc.BackfillNext.Format(time.RFC3339), sc.BackfillTo.Format(time.RFC3339))
		}
		spec, err := specOf(sc)
		if err != nil {
			return err
		}
		due, more := spec.DueTimes(from, to, MaxBackfillRuns)
		switch {
		case more:
			return Errorf(ErrInvalid, "from: the range holds more than %d due times; backfill it in parts", MaxBackfillRuns)
		case len(due) == 0:
			return Errorf(ErrInvalid, "from: the schedule has no due time between %s and %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
		}
		n = len(due)
		sc.BackfillNext, sc.BackfillTo = due[0], due[len(due)-1]
		out, err = store.UpdateSchedule(ctx, tx, sc)
		return err
	})
	if err != nil {
		return 0, err
	}
	s.log.InfoContext(ctx, "schedule backfill queued", "schedule_id", id, "due_times", n, "from", out.BackfillNext, "to", out.BackfillTo)
	s.sync(ctx, out)
	return n, nil
}

// FireSchedules fires what is due now on every schedule, one schedule per
// transaction, its row locked (SKIP LOCKED: servers firing at once share
// the schedules out). The local loop calls it every second at most, and in
// AWS the scheduler entries and the per-minute sweep do.
func (s *Service) FireSchedules(ctx context.Context) (*FireReport, error) {
	now := s.now()
	r := &FireReport{}
	var done []int64
	var errs []error
	for range maxSchedulesPerFiring {
		var (
			handled int64
			more    bool
			out     store.Schedule
		)
		err := s.clusterTx(ctx, func(tx pgx.Tx) error {
			sc, ok, err := store.LockDueSchedule(ctx, tx, now, done)
			if err != nil || !ok {
				return err
			}
			handled = sc.ScheduleID
			out, err = s.fireLocked(ctx, tx, sc, func(st schedule.State) schedule.Plan {
				p := schedule.Fire(st, now)
				more = p.More
				return p
			}, nil, r)
			return err
		})
		if handled == 0 && err == nil {
			break
		}
		if err != nil {
			if handled == 0 {
				return r, err
			}
			// One broken schedule must not stop the others.
			errs = append(errs, fmt.Errorf("schedule %d: %w", handled, err))
			s.log.ErrorContext(ctx, "fire schedule", "schedule_id", handled, "error", err.Error())
			done = append(done, handled)
			continue
		}
		r.Schedules++
		if !more {
			done = append(done, handled)
		}
		s.sync(ctx, out)
	}
	next, err := store.NextFireAt(ctx, s.st.Cluster())
	if err != nil {
		errs = append(errs, err)
	}
	r.NextFireAt = next
	if r.Started+r.Skipped+r.Failed > 0 {
		s.log.InfoContext(ctx, "schedules fired", "started", r.Started, "skipped", r.Skipped, "failed", r.Failed, "schedules", r.Schedules)
	}
	return r, errors.Join(errs...)
}

// fireLocked carries out a plan for one locked schedule: it starts the runs
// (each its own transaction on its shard, keyed by its due time), records
// every run and skip in the schedule's log, and stores the schedule's new
// state. A start that cannot succeed (the playbook is gone or its workload
// does not render) is recorded as failed; any other error aborts the whole
// firing, which the next firing repeats: the keys make that safe.
func (s *Service) fireLocked(ctx context.Context, tx pgx.Tx, sc store.Schedule, plan func(schedule.State) schedule.Plan,
	each func(schedule.Action, store.ScheduleRun), r *FireReport) (store.Schedule, error) {
	spec, err := specOf(sc)
	if err != nil {
		return sc, err
	}
	st := schedule.State{ID: sc.ScheduleID, Spec: spec, Enabled: sc.Enabled, NextRunAt: sc.NextRunAt, Overlap: sc.Overlap,
		Catchup: time.Duration(sc.CatchupSeconds) * time.Second, Jitter: time.Duration(sc.JitterSeconds) * time.Second,
		Buffered: sc.BufferedAt, BackfillNext: sc.BackfillNext, BackfillTo: sc.BackfillTo}
	if sc.Overlap != schedule.OverlapAllow && sc.LastExecutionID != 0 {
		statuses, err := s.executionStatuses(ctx, []int64{sc.LastExecutionID})
		if err != nil {
			return sc, err
		}
		st.Running = statuses[sc.LastExecutionID] == lifecycle.ExecutionRunning || statuses[sc.LastExecutionID] == lifecycle.ExecutionFailing
	}
	p := plan(st)
	for _, a := range p.Actions {
		run := store.ScheduleRun{ScheduleID: sc.ScheduleID, ScheduledAt: a.At, Origin: a.Origin, Through: a.Through, Count: a.Count, Reason: a.Reason}
		if a.Run {
			run.Through, run.Count = a.At, 1
			started, err := s.Execute(ctx, ExecuteRequest{Path: sc.PlaybookPath, Version: sc.PlaybookVersion, Payload: sc.InputPayload,
				IdempotencyKey: ScheduleKey(sc.ScheduleID, a.At), ScheduleID: sc.ScheduleID, ScheduledAt: a.At})
			switch {
			case errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotFound):
				run.Outcome, run.Reason = store.RunFailed, err.Error()
				r.Failed++
			case err != nil:
				return sc, fmt.Errorf("start the run due %s: %w", a.At.Format(time.RFC3339), err)
			default:
				run.Outcome, run.ExecutionID = store.RunStarted, started.ExecutionID
				sc.LastRunAt, sc.LastScheduledAt, sc.LastExecutionID = s.now().UTC(), a.At, started.ExecutionID
				r.Started++
			}
			err = store.InsertRun(ctx, tx, run)
			if err != nil {
				return sc, err
			}
		} else {
			run.Outcome = store.RunSkipped
			r.Skipped += a.Count
			if err := s.recordSkip(ctx, tx, spec, run); err != nil {
				return sc, err
			}
		}
		if each != nil {
			each(a, run)
		}
	}
	sc.BufferedAt, sc.BackfillNext = p.Buffered, p.BackfillNext
	if sc.BackfillNext.IsZero() {
		sc.BackfillTo = time.Time{}
	}
	if sc.Enabled {
		sc.NextRunAt = p.NextRunAt
		sc.FireAt = fireAt(sc, p.NextRunAt)
	}
	return store.UpdateSchedule(ctx, tx, sc)
}

// recordSkip logs skipped due times, widening the log's newest row when it
// skipped the due times just before for the same reason: a run that
// overlaps an hour of one-second due times is one row, not 3,600.
func (s *Service) recordSkip(ctx context.Context, tx pgx.Tx, spec *schedule.Spec, run store.ScheduleRun) error {
	last, ok, err := store.LastRun(ctx, tx, run.ScheduleID)
	if err != nil {
		return err
	}
	if ok && last.Outcome == store.RunSkipped && last.Reason == run.Reason && last.Origin == run.Origin &&
		spec.Next(last.Through).Equal(run.ScheduledAt) {
		return store.ExtendSkip(ctx, tx, last.RunID, run.Through, run.Count)
	}
	return store.InsertRun(ctx, tx, run)
}

// patch sets *dst to *v when the patch gives v.
func patch[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// applyPatch sets the patch's fields on sc and validates the result; the
// messages name the request's fields.
func (s *Service) applyPatch(ctx context.Context, sc *store.Schedule, p SchedulePatch) (*schedule.Spec, error) {
	patch(&sc.PlaybookPath, p.PlaybookPath)
	patch(&sc.PlaybookVersion, p.PlaybookVersion)
	if p.Cron != nil && p.IntervalSeconds != nil && *p.Cron != "" && *p.IntervalSeconds != 0 {
		return nil, Errorf(ErrInvalid, "cron: give exactly one of cron and interval_seconds, not both")
	}
	if p.Cron != nil {
		sc.Cron, sc.IntervalSeconds = *p.Cron, 0
	}
	if p.IntervalSeconds != nil {
		sc.IntervalSeconds, sc.Cron = *p.IntervalSeconds, ""
	}
	patch(&sc.Timezone, p.Timezone)
	patch(&sc.Enabled, p.Enabled)
	if p.InputPayload != nil {
		sc.InputPayload = p.InputPayload
	}
	patch(&sc.Overlap, p.Overlap)
	patch(&sc.CatchupSeconds, p.CatchupSeconds)
	patch(&sc.JitterSeconds, p.JitterSeconds)
	if p.Meta != nil {
		sc.Meta = p.Meta
	}
	switch {
	case sc.PlaybookPath == "":
		return nil, Errorf(ErrInvalid, "playbook_path: must not be empty")
	case sc.PlaybookVersion < 0:
		return nil, Errorf(ErrInvalid, "playbook_version: %d is below 1", sc.PlaybookVersion)
	case !validOverlap(sc.Overlap):
		return nil, Errorf(ErrInvalid, "overlap: expected one of skip, buffer_one, allow, got %q", sc.Overlap)
	case sc.CatchupSeconds < 1 || sc.CatchupSeconds > MaxCatchupSeconds:
		return nil, Errorf(ErrInvalid, "catchup_seconds: %d is outside 1..%d (how late a due time may still run after an outage)", sc.CatchupSeconds, MaxCatchupSeconds)
	case sc.JitterSeconds < 0 || sc.JitterSeconds > MaxJitterSeconds:
		return nil, Errorf(ErrInvalid, "jitter_seconds: %d is outside 0..%d", sc.JitterSeconds, MaxJitterSeconds)
	}
	spec, err := specOf(*sc)
	if err != nil {
		return nil, err
	}
	if p.PlaybookPath != nil || p.PlaybookVersion != nil {
		// The playbook must exist now; a run of one deleted later is
		// recorded as failed.
		if _, err := s.CatalogByPath(ctx, sc.PlaybookPath, sc.PlaybookVersion); errors.Is(err, ErrNotFound) {
			return nil, Errorf(ErrInvalid, "playbook_path: %v; register it first", err)
		} else if err != nil {
			return nil, err
		}
	}
	return spec, nil
}

func validOverlap(o string) bool {
	for _, v := range schedule.Overlaps() {
		if o == v {
			return true
		}
	}
	return false
}

func specOf(sc store.Schedule) (*schedule.Spec, error) {
	spec, err := schedule.Parse(sc.Cron, sc.IntervalSeconds, sc.Timezone)
	var fe *schedule.FieldError
	if errors.As(err, &fe) {
		return nil, Errorf(ErrInvalid, "%s", fe.Error())
	}
	return spec, err
}

// arm sets the first due time after now.
func (s *Service) arm(sc *store.Schedule, spec *schedule.Spec, now time.Time) {
	sc.NextRunAt = spec.Next(now)
	sc.FireAt = fireAt(*sc, sc.NextRunAt)
}

func fireAt(sc store.Schedule, due time.Time) time.Time {
	if due.IsZero() {
		return time.Time{}
	}
	return schedule.FireAt(sc.ScheduleID, due, time.Duration(sc.JitterSeconds)*time.Second)
}

// sync tells the outside scheduler, if any, when the schedule fires next.
func (s *Service) sync(ctx context.Context, sc store.Schedule) {
	if s.cfg.Schedules == nil {
		return
	}
	e := ScheduleEntry{ScheduleID: sc.ScheduleID, FireAt: sc.FireAt, Enabled: sc.Enabled}
	// A buffered run or a backfill waits on its own: wake the firing soon.
	if !sc.BufferedAt.IsZero() || !sc.BackfillNext.IsZero() {
		soon := s.now().Add(time.Minute).UTC()
		if e.FireAt.IsZero() || !e.Enabled || soon.Before(e.FireAt) {
			e.FireAt, e.Enabled = soon, true
		}
	}
	if err := s.cfg.Schedules.Put(ctx, e); err != nil {
		s.log.ErrorContext(ctx, "put the schedule's scheduler entry; the per-minute sweep fires it meanwhile",
			"schedule_id", sc.ScheduleID, "error", err.Error())
	}
}

// inSchedule runs fn with the schedule locked in a cluster transaction.
func (s *Service) inSchedule(ctx context.Context, id int64, fn func(pgx.Tx, store.Schedule) error) error {
	return s.clusterTx(ctx, func(tx pgx.Tx) error {
		sc, err := store.LockSchedule(ctx, tx, id)
		if errors.Is(err, store.ErrNotFound) {
			return Errorf(ErrNotFound, "schedule %d not found", id)
		}
		if err != nil {
			return err
		}
		return fn(tx, sc)
	})
}

// clusterTx runs fn in a transaction on the cluster database.
func (s *Service) clusterTx(ctx context.Context, fn func(pgx.Tx) error) error {
	tx, err := s.st.Cluster().Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin on the cluster database: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// scheduleView adds the last run's status.
func (s *Service) scheduleView(ctx context.Context, sc store.Schedule) (*ScheduleView, error) {
	statuses, err := s.executionStatuses(ctx, []int64{sc.LastExecutionID})
	if err != nil {
		return nil, err
	}
	return &ScheduleView{Schedule: sc, LastStatus: statuses[sc.LastExecutionID]}, nil
}

// executionStatuses reads executions' statuses, one query per shard they
// are on; ids of 0 are ignored.
func (s *Service) executionStatuses(ctx context.Context, execIDs []int64) (map[int64]string, error) {
	byShard := map[int][]int64{}
	for _, id := range execIDs {
		if id != 0 {
			byShard[ids.ShardOf(id)] = append(byShard[ids.ShardOf(id)], id)
		}
	}
	out := map[int64]string{}
	for i, list := range byShard {
		if i >= s.st.NumShards() {
			continue
		}
		m, err := store.ExecutionStatuses(ctx, s.st.Shard(i).Pool(), list)
		if err != nil {
			return nil, err
		}
		for id, st := range m {
			out[id] = st
		}
	}
	return out, nil
}
