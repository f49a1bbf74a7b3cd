package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/replay"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
)

var executionStatuses = []string{lifecycle.ExecutionRunning, lifecycle.ExecutionFailing, lifecycle.ExecutionCompleted,
	lifecycle.ExecutionFailed, lifecycle.ExecutionCancelled}

// List paging (NoETL's contract, issue 12): limit defaults to 50 and is
// capped at 100 — a larger limit is served capped and says so in
// X-Noetl-Limit-Capped, as NoETL does; offset skips rows (at most
// MaxListOffset, past which the cursor must be used).
const (
	DefaultExecutionsLimit = 50
	MaxExecutionsLimit     = 100
	MaxListOffset          = 900
)

// Headers of GET /api/executions. The body is NoETL's bare array; paging
// travels in headers so NoETL's clients read the body unchanged.
const (
	HeaderNextCursor   = "X-Next-Cursor"
	HeaderHasMore      = "X-Noetl-Has-More"
	HeaderLimitApplied = "X-Noetl-Limit-Applied"
	HeaderLimitCapped  = "X-Noetl-Limit-Capped"
)

// GET /api/executions?path=&status=&catalog_id=&parent_execution_id=&limit=&offset=&cursor=
// answers a bare JSON array (NoETL's shape) in (started_at DESC,
// execution_id DESC) order. path matches a case-insensitive substring, as
// NoETL's does. Keyset paging across shards stays ours: a full page carries
// the next page's cursor in X-Next-Cursor (and a Link rel="next"); offset
// pages the NoETL way.
func (a *API) listExecutions(ctx context.Context, c *call, q executionsQuery) (any, error) {
	f := store.ExecutionFilter{PathContains: q.Path, Limit: DefaultExecutionsLimit,
		CatalogID: int64(q.CatalogID), ParentExecutionID: int64(q.ParentExecutionID)}
	if s := q.Status; s != "" {
		f.Status = strings.ToUpper(s)
		if !slices.Contains(executionStatuses, f.Status) {
			return nil, invalid("status", "expected one of %s, got %q", strings.Join(executionStatuses, ", "), jsonx.Cut(s, 40))
		}
	}
	capped := false
	if n := q.Limit; n != 0 {
		f.Limit = int(min(n, MaxExecutionsLimit))
		capped = n > MaxExecutionsLimit
	}
	if q.Offset > MaxListOffset {
		return nil, invalid("offset", "%d is past the offset limit %d; page further with the cursor the %s header carries", q.Offset, MaxListOffset, HeaderNextCursor)
	}
	f.Offset = int(q.Offset)
	if q.Cursor != "" {
		var err error
		if f.After, err = decodeExecutionCursor(q.Cursor); err != nil {
			return nil, err
		}
	}
	rows, err := a.svc.ListExecutions(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]wire.ExecutionSummary, len(rows))
	now := time.Now()
	for i, r := range rows {
		out[i] = executionSummary(r, now, progress(r.Status, 0, 0))
	}
	resp := a.jsonResponse(http.StatusOK, out)
	full := len(rows) == f.Limit
	resp.Header.Set(HeaderLimitApplied, strconv.Itoa(f.Limit))
	resp.Header.Set(HeaderHasMore, strconv.FormatBool(full))
	if capped {
		resp.Header.Set(HeaderLimitCapped, "true")
	}
	if full {
		next := encodeExecutionCursor(rows[len(rows)-1].Cursor())
		resp.Header.Set(HeaderNextCursor, next)
		nq := url.Values{}
		for k, v := range c.req.Query {
			if k != "cursor" && k != "offset" {
				nq[k] = v
			}
		}
		nq.Set("cursor", next)
		resp.Header.Set("Link", "<"+c.req.Path+"?"+nq.Encode()+">; rel=\"next\"")
	}
	return resp, nil
}

// executionSummary is an execution row as lists and the detail carry it:
// ours, and NoETL's times measured at now.
func executionSummary(r store.Execution, now time.Time, progress int) wire.ExecutionSummary {
	return wire.ExecutionSummary{
		ExecutionID: wire.ID(r.ExecutionID), CatalogID: wire.ID(r.CatalogID), Path: r.Path,
		Version: r.Version, Status: r.Status, StartedAt: wire.At(r.StartedAt), CompletedAt: wire.At(r.CompletedAt),
		ParentExecutionID: wire.OptID(r.ParentExecutionID), EventCount: r.LastSeq,
		StartTime: wire.Wall(r.StartedAt), EndTime: wire.Wall(r.CompletedAt),
		Elapsed: elapsed(r.StartedAt, r.CompletedAt, now), Progress: progress,
		ScheduleID: wire.OptID(r.ScheduleID), ScheduledAt: wire.At(r.ScheduledAt),
	}
}

// elapsed is NoETL's duration_seconds, from start to end, or to now while
// running (end zero), to the millisecond; and duration_human, the same
// written out.
func elapsed(start, end, now time.Time) wire.Elapsed {
	if end.IsZero() {
		end = now
	}
	secs := math.Round(max(0, end.Sub(start).Seconds())*1000) / 1000
	return wire.Elapsed{DurationSeconds: secs, DurationHuman: durationHuman(secs)}
}

// progress is an execution's percent done: 100 once it ended; while it runs,
// the share of its steps done (done of total) when known, at most 99.
func progress(status string, done, total int) int {
	switch {
	case status == lifecycle.ExecutionCompleted || status == lifecycle.ExecutionFailed || status == lifecycle.ExecutionCancelled:
		return 100
	case total > 0:
		return min(99, done*100/total)
	}
	return 0
}

// GET /api/executions/{id}?page=&page_size=&since_event_id=&view=: the
// execution with one page of its events, newest first, paged NoETL's way.
// view=summary leaves out the steps and the events: what a client waiting for
// the outcome needs, at a size that does not grow with the steps' results.
func (a *API) getExecution(ctx context.Context, c *call, q executionQuery) (wire.Execution, error) {
	id := int64(q.ID)
	summary := false
	switch view := q.View; view {
	case "", "full":
	case "summary":
		summary = true
	default:
		return wire.Execution{}, invalid("view", "expected full or summary, got %q", jsonx.Cut(view, 40))
	}
	get := a.svc.Execution
	if summary {
		get = a.svc.ExecutionSummary
	}
	page, size, since := cmp.Or(q.Page, 1), cmp.Or(q.PageSize, DefaultEventsPageSize), int64(q.SinceEventID)
	v, err := get(ctx, id)
	if err != nil {
		return wire.Execution{}, err
	}
	m := maskerFor(v.Row.Workload)
	done := v.Status.CompletedSteps + v.Status.FailedSteps + v.Status.SkippedSteps
	out := wire.Execution{ExecutionSummary: executionSummary(v.Row, time.Now(), progress(v.Row.Status, done, v.Status.TotalSteps)),
		Steps: make(map[string]wire.Step, len(v.Steps))}
	for name, s := range v.Steps {
		out.Steps[name] = wire.Step{
			Status: s.Status, Result: wire.Value{V: m.Redact(s.Result)}, Attempts: s.Attempts, Visits: s.Visits,
			StartedAt: wire.At(s.StartedAt), CompletedAt: wire.At(s.CompletedAt), Error: wire.OptString(maskedString(m, s.Error)),
		}
	}
	out.Workload = maskedObject(m, v.Row.Workload)
	out.Context = maskedObject(m, v.Context)
	out.Result = wire.Value{V: m.Redact(v.Result)}
	out.Error = wire.OptString(maskedString(m, v.Row.Error))
	if summary {
		out.Events = []wire.Event{}
		return out, nil
	}

	// Seqs run 1..last_seq without gaps (R-S4): a page is a seq range, its
	// totals arithmetic, read at the row's last_seq so events appended since
	// wait for the next poll.
	var after int64
	if since != 0 {
		if after, err = a.svc.EventSeq(ctx, id, since); err != nil {
			if errors.Is(err, controlplane.ErrNotFound) {
				return wire.Execution{}, invalid("since_event_id", "%d is not an event of execution %d; give the event_id of one of its events", since, id)
			}
			return wire.Execution{}, err
		}
	}
	last := v.Row.LastSeq
	total := max(0, last-after)
	until := last - (page-1)*size
	var evs []store.Event
	if until > after {
		// Over the byte budget the page holds the newest events of its range
		// that fit; the events route reads the rest (its pages end early
		// too, and say where to go on).
		_, evs, _, err = a.svc.EventPage(ctx, store.EventFilter{ExecutionID: id, AfterSeq: max(after, until-size),
			UntilSeq: until, Limit: int(size), Desc: true, MaxBytes: MaxEventsPageBytes})
		if err != nil {
			return wire.Execution{}, err
		}
	}
	if out.Events, err = a.eventsJSON(ctx, v.Row, m, evs); err != nil {
		return wire.Execution{}, err
	}
	pages := max(1, (total+size-1)/size)
	out.Pagination = wire.EventsPagination{Page: int(page), PageSize: int(size), TotalEvents: total, TotalPages: pages,
		HasNext: page < pages, HasPrev: page > 1}
	return out, nil
}

// The events page of GET /api/executions/{id}: NoETL's default of 100 and
// its maximum of 500 (it refuses fewer than 10; any positive size is served
// here).
const (
	DefaultEventsPageSize = 100
	MaxEventsPageSize     = 500
)

// MaxEventsPageBytes bounds the events one page answers (the view's and the
// events route's) by the bytes of their values: a command.issued carries its
// whole command (up to 4 MiB), so a page of hundreds could be gigabytes. A
// page ends early before the event that would pass it, holding one at least.
const MaxEventsPageBytes = 2 << 20

// GET /api/executions/{id}/cancellation-check: what NoETL's workers ask
// before running a command. O(1): read from the execution row.
func (a *API) cancellationCheck(ctx context.Context, c *call, p executionPath) (wire.CancellationCheck, error) {
	v, err := a.svc.Status(ctx, int64(p.ID))
	if err != nil {
		return wire.CancellationCheck{}, err
	}
	return wire.CancellationCheck{ExecutionID: wire.ID(v.ExecutionID), IsCancelled: v.IsCancelled, Status: v.Status}, nil
}

// GET /api/executions/{id}/events?after_seq=&limit=&event_type=&step=
func (a *API) listEvents(ctx context.Context, c *call, q eventsQuery) (wire.EventPage, error) {
	f := store.EventFilter{ExecutionID: int64(q.ID), EventType: q.EventType, Step: q.Step, AfterSeq: q.AfterSeq,
		Limit: int(cmp.Or(q.Limit, DefaultListLimit))}
	f.MaxBytes = MaxEventsPageBytes
	row, evs, full, err := a.svc.EventPage(ctx, f)
	if err != nil {
		return wire.EventPage{}, err
	}
	out := wire.EventPage{}
	if out.Events, err = a.eventsJSON(ctx, row, maskerFor(row.Workload), evs); err != nil {
		return wire.EventPage{}, err
	}
	if len(evs) == f.Limit || full {
		out.NextAfterSeq = &evs[len(evs)-1].Seq
	}
	return out, nil
}

// GET /api/executions/{id}/status (events.md §6)
func (a *API) status(ctx context.Context, c *call, p executionPath) (wire.Status, error) {
	v, err := a.svc.Status(ctx, int64(p.ID))
	if err != nil {
		return wire.Status{}, err
	}
	return statusJSON(v, time.Now()), nil
}

// statusJSON is the status answer: ours, and NoETL's Python server's fields
// as its CLI reads them. A run that ended otherwise than COMPLETED is
// completed and failed, so the CLI prints FAILED (NoETL's server says
// completed false for a failed run, and its CLI prints RUNNING forever;
// docs/noetl-compat.md).
func statusJSON(v *controlplane.StatusView, now time.Time) wire.Status {
	ended := v.Status == lifecycle.ExecutionCompleted || v.Status == lifecycle.ExecutionFailed || v.Status == lifecycle.ExecutionCancelled
	failed := ended && v.Status != lifecycle.ExecutionCompleted
	msg := maskedString(maskerFor(v.Workload), v.Error)
	if msg == "" && v.Status == lifecycle.ExecutionCancelled {
		msg = "the execution was cancelled"
	}
	return wire.Status{
		ExecutionID: wire.ID(v.ExecutionID), Status: v.Status, CurrentStep: wire.OptString(v.CurrentStep),
		Progress: wire.Progress{
			TotalSteps: v.TotalSteps, CompletedSteps: v.CompletedSteps, RunningSteps: v.RunningSteps,
			FailedSteps: v.FailedSteps, SkippedSteps: v.SkippedSteps,
		},
		IsCancelled: v.IsCancelled,
		Completed:   ended, Failed: failed, CompletedSteps: v.DoneSteps, Error: wire.OptString(msg),
		StartTime: wire.At(v.StartedAt), EndTime: wire.At(v.CompletedAt),
		Elapsed: elapsed(v.StartedAt, v.CompletedAt, now),
	}
}

// POST /api/executions/{id}/cancel {reason?, cascade?}: the execution and,
// unless cascade is false, its children. One that already ended is answered
// as NoETL answers it (200 already_completed, nothing cancelled; NoETL's CLI
// prints it and exits 0), not as a conflict.
func (a *API) cancel(ctx context.Context, c *call, p executionPath, r wire.CancelRequest) (wire.CancelAnswer, error) {
	id := int64(p.ID)
	out, err := a.svc.CancelRequested(ctx, id, r.Reason, r.Cascade == nil || *r.Cascade)
	if err != nil {
		return wire.CancelAnswer{}, err
	}
	ans := wire.CancelAnswer{ExecutionID: wire.ID(id), Status: lifecycle.ExecutionCancelled, CancelledExecutions: make([]wire.ID, len(out.IDs)),
		Message: fmt.Sprintf("Cancelled %d execution(s)", len(out.IDs))}
	for i, x := range out.IDs {
		ans.CancelledExecutions[i] = wire.ID(x)
	}
	if out.Already != "" {
		ans.Status, ans.Already = "already_completed", wire.OptString(out.Already)
		ans.Message = fmt.Sprintf("Execution %d is already %s", id, out.Already)
	}
	return ans, nil
}

// DefaultCleanupMinutes is NoETL's default of older_than_minutes.
const DefaultCleanupMinutes = 5

// POST /api/executions/cleanup {older_than_minutes?, dry_run?}: cancel the
// running executions nothing moved for that long (controlplane.CancelIdle),
// answered in NoETL's shape and words.
func (a *API) cleanup(ctx context.Context, c *call, r wire.CleanupRequest) (wire.CleanupAnswer, error) {
	minutes := DefaultCleanupMinutes
	if r.OlderThanMinutes != nil {
		minutes = *r.OlderThanMinutes
	}
	ids, err := a.svc.CancelIdle(ctx, time.Duration(minutes)*time.Minute, r.DryRun)
	if err != nil {
		return wire.CleanupAnswer{}, err
	}
	out := wire.CleanupAnswer{CancelledCount: len(ids), ExecutionIDs: make([]wire.ID, len(ids)), DryRun: r.DryRun}
	for i, id := range ids {
		out.ExecutionIDs[i] = wire.ID(id)
	}
	switch {
	case r.DryRun:
		out.Message = fmt.Sprintf("[DRY RUN] Would cancel %d stuck executions older than %d minutes", len(ids), minutes)
	case len(ids) == 0:
		out.Message = fmt.Sprintf("No stuck executions found older than %d minutes", minutes)
	default:
		out.Message = fmt.Sprintf("Successfully cancelled %d stuck executions older than %d minutes", len(ids), minutes)
	}
	return out, nil
}

// POST /api/executions/{id}/rerun {workload|payload?}: the same playbook
// version again, with the execution's workload, the given keys replacing its
// keys (controlplane.Rerun).
func (a *API) rerun(ctx context.Context, c *call, p executionPath, r wire.RerunRequest) (wire.Started, error) {
	if err := playbookKind("resource_kind", r.ResourceKind); err != nil {
		return wire.Started{}, err
	}
	st, err := a.svc.Rerun(ctx, int64(p.ID), r.Workload)
	if err != nil {
		return wire.Started{}, err
	}
	return started(st), nil
}

// POST /api/executions/{id}/redrive {version?} (controlplane.Redrive)
func (a *API) redrive(ctx context.Context, c *call, p executionPath, r wire.RedriveRequest) (wire.Redriven, error) {
	out, err := a.svc.Redrive(ctx, int64(p.ID), r.Version)
	if err != nil {
		return wire.Redriven{}, err
	}
	return redriven(out), nil
}

// POST /api/executions/redrive {executions, version?} (controlplane.RedriveMany)
func (a *API) redriveMany(ctx context.Context, c *call, r wire.RedriveManyRequest) (wire.RedriveBatch, error) {
	ids := make([]int64, len(r.Executions))
	for i, id := range r.Executions {
		ids[i] = int64(id)
	}
	outs, err := a.svc.RedriveMany(ctx, ids, r.Version)
	if err != nil {
		return wire.RedriveBatch{}, err
	}
	b := wire.RedriveBatch{Executions: make([]wire.RedriveItem, 0, len(outs))}
	for _, o := range outs {
		it := wire.RedriveItem{ExecutionID: wire.ID(o.ExecutionID), Outcome: "redriven"}
		if o.Err != nil {
			e := classify(o.Err)
			it.Outcome, it.Code, it.Error = "refused", e.Status, e.Message
			b.Refused++
		} else {
			rd := redriven(o.Redriven)
			it.Redriven = &rd
			b.Redriven++
		}
		b.Executions = append(b.Executions, it)
	}
	return b, nil
}

func redriven(r *controlplane.Redriven) wire.Redriven {
	out := wire.Redriven{ExecutionID: wire.ID(r.ExecutionID), Status: lifecycle.ExecutionRunning, Path: r.Path,
		Version: r.Version, PreviousVersion: r.PreviousVersion, PreviousStatus: r.PreviousStatus, Commands: r.Commands}
	if len(r.Kept) > 0 {
		out.KeptIterations = r.Kept
	}
	return out
}

// POST /api/executions/{id}/finalize {status: COMPLETED|FAILED, error?}
func (a *API) finalize(ctx context.Context, c *call, p executionPath, r wire.FinalizeRequest) (wire.Ended, error) {
	id := int64(p.ID)
	status := strings.ToUpper(r.Status)
	if status != lifecycle.ExecutionCompleted && status != lifecycle.ExecutionFailed {
		return wire.Ended{}, invalid("status", "expected COMPLETED or FAILED, got %q", jsonx.Cut(status, 40))
	}
	if err := a.svc.Finalize(ctx, id, status, r.Error); err != nil {
		return wire.Ended{}, err
	}
	return wire.Ended{ExecutionID: wire.ID(id), Status: status,
		Message: "Execution finalized with status: " + status}, nil
}

// GET /api/executions/{id}/replay
func (a *API) replayByPath(ctx context.Context, c *call, p executionPath) (any, error) {
	return a.replay(ctx, c, int64(p.ID))
}

// GET /api/replay/state?execution_id= (NoETL's path)
func (a *API) replayByQuery(ctx context.Context, c *call) (any, error) {
	s := c.req.Query.Get("execution_id")
	if s == "" {
		return nil, invalid("execution_id", "required")
	}
	id, err := parseID("execution_id", s)
	if err != nil {
		return nil, err
	}
	c.attrs.setExecution(id)
	return a.replay(ctx, c, id)
}

// replay answers replay.md's document plus verify and diff when asked.
// Parameter errors are NoETL's 400s (R-A2); an unknown execution is 404.
func (a *API) replay(ctx context.Context, c *call, id int64) (any, error) {
	q, err := replay.ParseQuery(c.req.Query)
	if err != nil {
		var pe *replay.ParamError
		if errors.As(err, &pe) {
			return nil, errorf(http.StatusBadRequest, "%s", pe.Msg)
		}
		return nil, errorf(http.StatusBadRequest, "%s", err.Error())
	}
	res, err := a.svc.Replay(ctx, id, q)
	if pe := (*replay.ParamError)(nil); errors.As(err, &pe) {
		return nil, errorf(http.StatusBadRequest, "%s", pe.Msg)
	}
	if err != nil {
		return nil, err
	}
	doc := res.State.Document()
	if res.Verify != nil {
		doc["verify"] = res.Verify
	}
	if q.DiffFrom.Kind != replay.CutoffNone {
		diff := make([]any, len(res.Diff))
		for i, d := range res.Diff {
			diff[i] = d
		}
		doc["diff"] = diff
	}
	// The value rule only (see secrets.go): projections are keyed by names.
	m := maskerFor(res.Workload)
	if m.Empty() {
		return doc, nil
	}
	out, err := plain(doc)
	if err != nil {
		return nil, err
	}
	return m.Value(out), nil
}
