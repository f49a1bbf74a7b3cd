package api

import (
	"cmp"
	"context"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/wire"
)

// The schedule routes (the lifecycle is controlplane/schedule.go's). Bodies
// name every field they may hold: a misspelt field is a 422 naming it, not a
// setting silently left at its default.

// schedulePatch is a create or PATCH body as the lifecycle takes it.
func schedulePatch(r wire.ScheduleRequest) controlplane.SchedulePatch {
	return controlplane.SchedulePatch{PlaybookPath: r.PlaybookPath, PlaybookVersion: r.PlaybookVersion, Cron: r.Cron,
		IntervalSeconds: r.IntervalSeconds, Timezone: r.Timezone, Enabled: r.Enabled, InputPayload: r.InputPayload,
		Overlap: r.Overlap, CatchupSeconds: r.CatchupSeconds, JitterSeconds: r.JitterSeconds, Meta: r.Meta}
}

// POST /api/schedules
func (a *API) createSchedule(ctx context.Context, c *call, r wire.ScheduleRequest) (wire.Schedule, error) {
	v, err := a.svc.CreateSchedule(ctx, schedulePatch(r))
	if err != nil {
		return wire.Schedule{}, err
	}
	return scheduleJSON(*v), nil
}

// GET /api/schedules?limit=&cursor=
func (a *API) listSchedules(ctx context.Context, c *call, q pageQuery) (wire.SchedulePage, error) {
	limit := cmp.Or(q.Limit, DefaultListLimit)
	var after int64
	if s := q.Cursor; s != "" {
		parts, err := cursorParts(s, scheduleCursorTag, 2)
		if err != nil {
			return wire.SchedulePage{}, err
		}
		if after, err = strconv.ParseInt(parts[1], 10, 64); err != nil {
			return wire.SchedulePage{}, badCursor()
		}
	}
	rows, err := a.svc.ListSchedules(ctx, after, int(limit))
	if err != nil {
		return wire.SchedulePage{}, err
	}
	out := wire.SchedulePage{Schedules: make([]wire.Schedule, len(rows))}
	for i, r := range rows {
		out.Schedules[i] = scheduleJSON(r)
	}
	if len(rows) == int(limit) {
		out.NextCursor = wire.OptString(cursorEncoding.EncodeToString([]byte(scheduleCursorTag + ":" + strconv.FormatInt(rows[len(rows)-1].ScheduleID, 10))))
	}
	return out, nil
}

// GET /api/schedules/{id}
func (a *API) getSchedule(ctx context.Context, c *call, p schedulePath) (wire.Schedule, error) {
	v, err := a.svc.Schedule(ctx, int64(p.ID))
	if err != nil {
		return wire.Schedule{}, err
	}
	return scheduleJSON(*v), nil
}

// PATCH /api/schedules/{id}: pause and resume with enabled, or change any field.
func (a *API) updateSchedule(ctx context.Context, c *call, p schedulePath, r wire.ScheduleRequest) (wire.Schedule, error) {
	v, err := a.svc.UpdateSchedule(ctx, int64(p.ID), schedulePatch(r))
	if err != nil {
		return wire.Schedule{}, err
	}
	return scheduleJSON(*v), nil
}

// DELETE /api/schedules/{id}
func (a *API) deleteSchedule(ctx context.Context, c *call, p schedulePath) (wire.ScheduleDeleted, error) {
	if err := a.svc.DeleteSchedule(ctx, int64(p.ID)); err != nil {
		return wire.ScheduleDeleted{}, err
	}
	return wire.ScheduleDeleted{ScheduleID: wire.ID(p.ID), Deleted: true}, nil
}

// POST /api/schedules/{id}/trigger: run now.
func (a *API) triggerSchedule(ctx context.Context, c *call, p schedulePath, _ wire.TriggerRequest) (wire.Triggered, error) {
	r, err := a.svc.TriggerSchedule(ctx, int64(p.ID))
	if err != nil {
		return wire.Triggered{}, err
	}
	return wire.Triggered{ScheduleID: wire.ID(p.ID), ScheduledAt: wire.At(r.ScheduledAt), Outcome: r.Outcome,
		ExecutionID: wire.OptID(r.ExecutionID), Reason: wire.OptString(r.Reason)}, nil
}

// POST /api/schedules/{id}/backfill {from, to}
func (a *API) backfillSchedule(ctx context.Context, c *call, p schedulePath, r wire.BackfillRequest) (wire.Backfilled, error) {
	id := int64(p.ID)
	n, err := a.svc.BackfillSchedule(ctx, id, r.From.Time, r.To.Time)
	if err != nil {
		return wire.Backfilled{}, err
	}
	v, err := a.svc.Schedule(ctx, id)
	if err != nil {
		return wire.Backfilled{}, err
	}
	return wire.Backfilled{ScheduleID: wire.ID(id), DueTimes: n, From: wire.At(v.BackfillNext), To: wire.At(v.BackfillTo)}, nil
}

// GET /api/schedules/{id}/runs?limit=&cursor=
func (a *API) listScheduleRuns(ctx context.Context, c *call, q scheduleRunsQuery) (wire.ScheduleRunPage, error) {
	limit := cmp.Or(q.Limit, DefaultListLimit)
	var (
		before    time.Time
		beforeRun int64
	)
	if s := q.Cursor; s != "" {
		parts, err := cursorParts(s, runCursorTag, 3)
		if err != nil {
			return wire.ScheduleRunPage{}, err
		}
		nanos, err1 := strconv.ParseInt(parts[1], 10, 64)
		run, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			return wire.ScheduleRunPage{}, badCursor()
		}
		before, beforeRun = time.Unix(0, nanos).UTC(), run
	}
	rows, err := a.svc.ScheduleRuns(ctx, int64(q.ID), before, beforeRun, int(limit))
	if err != nil {
		return wire.ScheduleRunPage{}, err
	}
	out := wire.ScheduleRunPage{Runs: make([]wire.ScheduleRun, len(rows))}
	for i, r := range rows {
		out.Runs[i] = wire.ScheduleRun{ScheduledAt: wire.At(r.ScheduledAt), Through: wire.At(r.Through), Count: r.Count,
			Origin: r.Origin, Outcome: r.Outcome, ExecutionID: wire.OptID(r.ExecutionID), Status: wire.OptString(r.Status),
			Reason: wire.OptString(r.Reason), RecordedAt: wire.At(r.RecordedAt)}
	}
	if len(rows) == int(limit) {
		last := rows[len(rows)-1]
		out.NextCursor = wire.OptString(cursorEncoding.EncodeToString([]byte(runCursorTag + ":" +
			strconv.FormatInt(last.ScheduledAt.UnixNano(), 10) + ":" + strconv.FormatInt(last.RunID, 10))))
	}
	return out, nil
}

const (
	scheduleCursorTag = "s1"
	runCursorTag      = "r1"
)

func scheduleJSON(v controlplane.ScheduleView) wire.Schedule {
	s := v.Schedule
	out := wire.Schedule{
		ScheduleID: wire.ID(s.ScheduleID), PlaybookPath: s.PlaybookPath, Cron: wire.OptString(s.Cron), Timezone: s.Timezone,
		Enabled: s.Enabled, InputPayload: wire.Object(s.InputPayload), Overlap: s.Overlap, CatchupSeconds: s.CatchupSeconds,
		JitterSeconds: s.JitterSeconds, Meta: wire.Object(s.Meta), LastRunAt: wire.At(s.LastRunAt),
		LastScheduledAt: wire.At(s.LastScheduledAt), LastExecutionID: wire.OptID(s.LastExecutionID),
		LastStatus: wire.OptString(v.LastStatus), BufferedAt: wire.At(s.BufferedAt),
		CreatedAt: wire.At(s.CreatedAt), UpdatedAt: wire.At(s.UpdatedAt),
	}
	if s.PlaybookVersion > 0 {
		out.PlaybookVersion = &s.PlaybookVersion
	}
	if s.IntervalSeconds > 0 {
		out.IntervalSeconds = &s.IntervalSeconds
	}
	if s.Enabled {
		out.NextRunAt = wire.At(s.NextRunAt)
	}
	if !s.BackfillNext.IsZero() {
		out.Backfill = &wire.Backfill{Next: wire.At(s.BackfillNext), To: wire.At(s.BackfillTo)}
	}
	if out.InputPayload == nil {
		out.InputPayload = wire.Object{}
	}
	if out.Meta == nil {
		out.Meta = wire.Object{}
	}
	return out
}
