package api

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/wire"
)

// The schedule routes (the lifecycle is controlplane/schedule.go's). Bodies
// name every field they may hold: a misspelt field is a 422 naming it, not a
// setting silently left at its default.

func scheduleBody() *Shape {
	return object(
		opt("playbook_path", str().doc("a registered playbook's path (required on create)")),
		opt("playbook_version", integer().orNull().doc("a version; null or absent: the latest when each run starts")),
		opt("cron", str().doc(`5 fields (minute hour day-of-month month day-of-week), or 6 with seconds first, or @daily etc.; exactly one of cron and interval_seconds`)),
		opt("interval_seconds", integer().doc("due every N seconds since the Unix epoch (1 to a year)")),
		opt("timezone", str().doc("IANA name the cron is read in; default UTC")),
		opt("enabled", boolean().doc("false pauses; default true")),
		opt("input_payload", object().doc("each run's workload overrides")),
		opt("overlap", enum("skip", "buffer_one", "allow").doc("while the previous run is going; default skip")),
		opt("catchup_seconds", integer().doc("after an outage, due times older than this are skipped and recorded; default 60")),
		opt("jitter_seconds", integer().doc("delay each run by up to this; default 0")),
		opt("meta", object()),
	)
}

func backfillBody() *Shape {
	return object(req("from", str().doc("RFC 3339 time: the range's start (inclusive)")),
		req("to", str().doc("RFC 3339 time, not in the future: the range's end (inclusive)")))
}

func pageQuery() []Param {
	return []Param{param("limit", integer(), "page size, at most 1000"), param("cursor", str(), "the previous page's next_cursor")}
}

var scheduleFields = []string{"playbook_path", "playbook_version", "cron", "interval_seconds", "timezone", "enabled",
	"input_payload", "overlap", "catchup_seconds", "jitter_seconds", "meta"}

// decodeSchedule reads a create or PATCH body.
func decodeSchedule(body []byte) (controlplane.SchedulePatch, error) {
	var p controlplane.SchedulePatch
	o, err := decodeBody(body)
	if err != nil {
		return p, err
	}
	for _, k := range slices.Sorted(maps.Keys(o.M)) {
		if !slices.Contains(scheduleFields, k) {
			return p, invalid(k, "unknown field; a schedule has %s", strings.Join(scheduleFields, ", "))
		}
	}
	str := func(k string) (*string, error) {
		if _, ok := o.Get(k); !ok {
			return nil, nil
		}
		v, err := o.Str(k, false)
		return &v, err
	}
	num := func(k string, lo, hi int64) (*int64, error) {
		v, ok, err := o.integer(k, lo, hi)
		if err != nil || !ok {
			return nil, err
		}
		return &v, nil
	}
	if p.PlaybookPath, err = str("playbook_path"); err != nil {
		return p, err
	}
	if v, present := o.M["playbook_version"]; present {
		n := 0 // null: the latest
		if v != nil {
			x, _, err := o.integer("playbook_version", 1, 1<<31-1)
			if err != nil {
				return p, err
			}
			n = int(x)
		}
		p.PlaybookVersion = &n
	}
	if p.Cron, err = str("cron"); err != nil {
		return p, err
	}
	if p.IntervalSeconds, err = num("interval_seconds", 1, 1<<40); err != nil {
		return p, err
	}
	if p.Timezone, err = str("timezone"); err != nil {
		return p, err
	}
	if _, ok := o.Get("enabled"); ok {
		b, err := o.boolean("enabled")
		if err != nil {
			return p, err
		}
		p.Enabled = &b
	}
	if p.InputPayload, err = o.Object("input_payload"); err != nil {
		return p, err
	}
	if p.Overlap, err = str("overlap"); err != nil {
		return p, err
	}
	if p.CatchupSeconds, err = num("catchup_seconds", 1, controlplane.MaxCatchupSeconds); err != nil {
		return p, err
	}
	if p.JitterSeconds, err = num("jitter_seconds", 0, controlplane.MaxJitterSeconds); err != nil {
		return p, err
	}
	if p.Meta, err = o.Object("meta"); err != nil {
		return p, err
	}
	return p, nil
}

// scheduleID reads the {id} path parameter; messages call it schedule_id.
func scheduleID(c *call) (int64, error) { return parseID("schedule_id", c.params["id"]) }

// POST /api/schedules
func (a *API) createSchedule(ctx context.Context, c *call) (any, error) {
	p, err := decodeSchedule(c.req.Body)
	if err != nil {
		return nil, err
	}
	v, err := a.svc.CreateSchedule(ctx, p)
	if err != nil {
		return nil, err
	}
	return scheduleJSON(*v), nil
}

// GET /api/schedules?limit=&cursor=
func (a *API) listSchedules(ctx context.Context, c *call) (any, error) {
	limit, _, err := queryInt(c.req.Query, "limit", 1, MaxListLimit)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = DefaultListLimit
	}
	var after int64
	if s := c.req.Query.Get("cursor"); s != "" {
		parts, err := cursorParts(s, scheduleCursorTag, 2)
		if err != nil {
			return nil, err
		}
		if after, err = strconv.ParseInt(parts[1], 10, 64); err != nil {
			return nil, badCursor()
		}
	}
	rows, err := a.svc.ListSchedules(ctx, after, int(limit))
	if err != nil {
		return nil, err
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
func (a *API) getSchedule(ctx context.Context, c *call) (any, error) {
	id, err := scheduleID(c)
	if err != nil {
		return nil, err
	}
	v, err := a.svc.Schedule(ctx, id)
	if err != nil {
		return nil, err
	}
	return scheduleJSON(*v), nil
}

// PATCH /api/schedules/{id}: pause and resume with enabled, or change any field.
func (a *API) updateSchedule(ctx context.Context, c *call) (any, error) {
	id, err := scheduleID(c)
	if err != nil {
		return nil, err
	}
	p, err := decodeSchedule(c.req.Body)
	if err != nil {
		return nil, err
	}
	v, err := a.svc.UpdateSchedule(ctx, id, p)
	if err != nil {
		return nil, err
	}
	return scheduleJSON(*v), nil
}

// DELETE /api/schedules/{id}
func (a *API) deleteSchedule(ctx context.Context, c *call) (any, error) {
	id, err := scheduleID(c)
	if err != nil {
		return nil, err
	}
	if err := a.svc.DeleteSchedule(ctx, id); err != nil {
		return nil, err
	}
	return wire.ScheduleDeleted{ScheduleID: wire.ID(id), Deleted: true}, nil
}

// POST /api/schedules/{id}/trigger: run now.
func (a *API) triggerSchedule(ctx context.Context, c *call) (any, error) {
	id, err := scheduleID(c)
	if err != nil {
		return nil, err
	}
	if _, err := decodeBody(c.req.Body); err != nil {
		return nil, err
	}
	r, err := a.svc.TriggerSchedule(ctx, id)
	if err != nil {
		return nil, err
	}
	return wire.Triggered{ScheduleID: wire.ID(id), ScheduledAt: wire.At(r.ScheduledAt), Outcome: r.Outcome,
		ExecutionID: wire.OptID(r.ExecutionID), Reason: wire.OptString(r.Reason)}, nil
}

// POST /api/schedules/{id}/backfill {from, to}
func (a *API) backfillSchedule(ctx context.Context, c *call) (any, error) {
	id, err := scheduleID(c)
	if err != nil {
		return nil, err
	}
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	from, err := o.time("from")
	if err != nil {
		return nil, err
	}
	to, err := o.time("to")
	if err != nil {
		return nil, err
	}
	n, err := a.svc.BackfillSchedule(ctx, id, from, to)
	if err != nil {
		return nil, err
	}
	v, err := a.svc.Schedule(ctx, id)
	if err != nil {
		return nil, err
	}
	return wire.Backfilled{ScheduleID: wire.ID(id), DueTimes: n, From: wire.At(v.BackfillNext), To: wire.At(v.BackfillTo)}, nil
}

// GET /api/schedules/{id}/runs?limit=&cursor=
func (a *API) listScheduleRuns(ctx context.Context, c *call) (any, error) {
	id, err := scheduleID(c)
	if err != nil {
		return nil, err
	}
	limit, _, err := queryInt(c.req.Query, "limit", 1, MaxListLimit)
	if err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = DefaultListLimit
	}
	var (
		before    time.Time
		beforeRun int64
	)
	if s := c.req.Query.Get("cursor"); s != "" {
		parts, err := cursorParts(s, runCursorTag, 3)
		if err != nil {
			return nil, err
		}
		nanos, err1 := strconv.ParseInt(parts[1], 10, 64)
		run, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, badCursor()
		}
		before, beforeRun = time.Unix(0, nanos).UTC(), run
	}
	rows, err := a.svc.ScheduleRuns(ctx, id, before, beforeRun, int(limit))
	if err != nil {
		return nil, err
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

// time reads a required RFC 3339 time.
func (o obj) time(k string) (time.Time, error) {
	s, err := o.Str(k, true)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, invalid(o.Name(k), "expected an RFC 3339 time such as 2024-05-01T00:00:00Z, got %q", truncate(s, 40))
	}
	return t, nil
}
