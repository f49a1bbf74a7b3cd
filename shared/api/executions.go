package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/replay"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
)

// executionID reads the {id} path parameter; messages call it execution_id.
func executionID(c *call) (int64, error) {
	id, err := parseID("execution_id", c.params["id"])
	if err != nil {
		return 0, err
	}
	c.attrs.setExecution(id)
	return id, nil
}

var executionStatuses = []string{store.ExecutionRunning, store.ExecutionFailing, store.ExecutionCompleted,
	store.ExecutionFailed, store.ExecutionCancelled}

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
func (a *API) listExecutions(ctx context.Context, c *call) (any, error) {
	q := c.req.Query
	f := store.ExecutionFilter{PathContains: q.Get("path"), Limit: DefaultExecutionsLimit}
	var err error
	if s := q.Get("status"); s != "" {
		f.Status = strings.ToUpper(s)
		if !slices.Contains(executionStatuses, f.Status) {
			return nil, invalid("status", "expected one of %s, got %q", strings.Join(executionStatuses, ", "), truncate(s, 40))
		}
	}
	if f.CatalogID, err = queryID(q, "catalog_id"); err != nil {
		return nil, err
	}
	if f.ParentExecutionID, err = queryID(q, "parent_execution_id"); err != nil {
		return nil, err
	}
	capped := false
	if n, ok, err := queryInt(q, "limit", 1, 1<<31-1); err != nil {
		return nil, err
	} else if ok {
		f.Limit = int(min(n, MaxExecutionsLimit))
		capped = n > MaxExecutionsLimit
	}
	if n, ok, err := queryInt(q, "offset", 0, 1<<31-1); err != nil {
		return nil, err
	} else if n > MaxListOffset {
		return nil, invalid("offset", "%d is past the offset limit %d; page further with the cursor the %s header carries", n, MaxListOffset, HeaderNextCursor)
	} else if ok {
		f.Offset = int(n)
	}
	if s := q.Get("cursor"); s != "" {
		if f.After, err = decodeExecutionCursor(s); err != nil {
			return nil, err
		}
	}
	rows, err := a.svc.ListExecutions(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]wire.ExecutionSummary, len(rows))
	for i, r := range rows {
		out[i] = executionSummary(r)
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
		for k, v := range q {
			if k != "cursor" && k != "offset" {
				nq[k] = v
			}
		}
		nq.Set("cursor", next)
		resp.Header.Set("Link", "<"+c.req.Path+"?"+nq.Encode()+">; rel=\"next\"")
	}
	return resp, nil
}

func executionSummary(r store.Execution) wire.ExecutionSummary {
	return wire.ExecutionSummary{
		ExecutionID: wire.ID(r.ExecutionID), CatalogID: wire.ID(r.CatalogID), Path: r.Path,
		Version: r.Version, Status: r.Status, StartedAt: wire.At(r.StartedAt), CompletedAt: wire.At(r.CompletedAt),
		ParentExecutionID: wire.OptID(r.ParentExecutionID), EventCount: r.LastSeq,
		ScheduleID: wire.OptID(r.ScheduleID), ScheduledAt: wire.At(r.ScheduledAt),
	}
}

// GET /api/executions/{id}
func (a *API) getExecution(ctx context.Context, c *call) (any, error) {
	id, err := executionID(c)
	if err != nil {
		return nil, err
	}
	v, err := a.svc.Execution(ctx, id)
	if err != nil {
		return nil, err
	}
	m := maskerFor(v.Row.Workload)
	out := wire.Execution{ExecutionSummary: executionSummary(v.Row), Steps: make(map[string]wire.Step, len(v.Steps))}
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
	// NoETL's detail carries the log's tail (its clients show it); the whole
	// log, paged, is GET /api/executions/{id}/events.
	_, evs, err := a.svc.ExecutionEvents(ctx, store.EventFilter{ExecutionID: id,
		AfterSeq: max(0, v.Row.LastSeq-DetailEventsTail), Limit: DetailEventsTail})
	if err != nil {
		return nil, err
	}
	out.Events = make([]wire.Event, len(evs))
	for i, e := range evs {
		out.Events[i] = eventJSON(m, e)
	}
	return out, nil
}

// DetailEventsTail is how many of the latest events GET /api/executions/{id}
// carries (NoETL carries up to 2000; ours stays one page of the events route).
const DetailEventsTail = 100

// GET /api/executions/{id}/cancellation-check: what NoETL's workers ask
// before running a command. O(1): read from the execution row.
func (a *API) cancellationCheck(ctx context.Context, c *call) (any, error) {
	id, err := executionID(c)
	if err != nil {
		return nil, err
	}
	v, err := a.svc.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	return wire.CancellationCheck{ExecutionID: wire.ID(id), IsCancelled: v.IsCancelled, Status: v.Status}, nil
}

// GET /api/executions/{id}/events?after_seq=&limit=&event_type=&step=
func (a *API) listEvents(ctx context.Context, c *call) (any, error) {
	id, err := executionID(c)
	if err != nil {
		return nil, err
	}
	q := c.req.Query
	f := store.EventFilter{ExecutionID: id, EventType: q.Get("event_type"), Step: q.Get("step"), Limit: DefaultListLimit}
	if f.AfterSeq, _, err = queryInt(q, "after_seq", 0, 1<<62); err != nil {
		return nil, err
	}
	if n, ok, err := queryInt(q, "limit", 1, MaxListLimit); err != nil {
		return nil, err
	} else if ok {
		f.Limit = int(n)
	}
	row, evs, err := a.svc.ExecutionEvents(ctx, f)
	if err != nil {
		return nil, err
	}
	m := maskerFor(row.Workload)
	out := wire.EventPage{Events: make([]wire.Event, len(evs))}
	for i, e := range evs {
		out.Events[i] = eventJSON(m, e)
	}
	if len(evs) == f.Limit {
		out.NextAfterSeq = &evs[len(evs)-1].Seq
	}
	return out, nil
}

// eventJSON is an event as users read it, its values masked with m.
func eventJSON(m *redact.Masker, e store.Event) wire.Event {
	return wire.Event{
		EventID: wire.ID(e.EventID), ExecutionID: wire.ID(e.ExecutionID), Seq: e.Seq,
		EventType: e.EventType, NodeName: wire.OptString(e.NodeName), NodeType: wire.OptString(e.NodeType),
		Status: wire.OptString(e.Status), Context: maskedObject(m, e.Context), Meta: maskedObject(m, e.Meta),
		Result: maskedObject(m, e.Result), Error: wire.OptString(maskedString(m, e.Error)), WorkerID: wire.OptString(e.WorkerID),
		CommandID: wire.OptString(e.CommandID), ParentEventID: wire.OptID(e.ParentEventID),
		ClientEventID: wire.OptString(e.ClientEventID), Ignored: e.Ignored, CreatedAt: wire.At(e.CreatedAt),
	}
}

// GET /api/executions/{id}/status (events.md §6)
func (a *API) status(ctx context.Context, c *call) (any, error) {
	id, err := executionID(c)
	if err != nil {
		return nil, err
	}
	v, err := a.svc.Status(ctx, id)
	if err != nil {
		return nil, err
	}
	return statusJSON(v), nil
}

func statusJSON(v *controlplane.StatusView) wire.Status {
	return wire.Status{
		ExecutionID: wire.ID(v.ExecutionID), Status: v.Status, CurrentStep: wire.OptString(v.CurrentStep),
		Progress: wire.Progress{
			TotalSteps: v.TotalSteps, CompletedSteps: v.CompletedSteps, RunningSteps: v.RunningSteps,
			FailedSteps: v.FailedSteps, SkippedSteps: v.SkippedSteps,
		},
		IsCancelled: v.IsCancelled,
	}
}

// POST /api/executions/{id}/cancel {reason?}
func (a *API) cancel(ctx context.Context, c *call) (any, error) {
	id, err := executionID(c)
	if err != nil {
		return nil, err
	}
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	reason, err := o.str("reason", false)
	if err != nil {
		return nil, err
	}
	if err := a.svc.Cancel(ctx, id, reason); err != nil {
		return nil, err
	}
	return wire.Ended{ExecutionID: wire.ID(id), Status: store.ExecutionCancelled,
		Message: "Execution cancellation requested"}, nil
}

// POST /api/executions/{id}/finalize {status: COMPLETED|FAILED, error?}
func (a *API) finalize(ctx context.Context, c *call) (any, error) {
	id, err := executionID(c)
	if err != nil {
		return nil, err
	}
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	status, err := o.str("status", true)
	if err != nil {
		return nil, err
	}
	status = strings.ToUpper(status)
	if status != store.ExecutionCompleted && status != store.ExecutionFailed {
		return nil, invalid("status", "expected COMPLETED or FAILED, got %q", truncate(status, 40))
	}
	msg, err := o.str("error", false)
	if err != nil {
		return nil, err
	}
	if err := a.svc.Finalize(ctx, id, status, msg); err != nil {
		return nil, err
	}
	return wire.Ended{ExecutionID: wire.ID(id), Status: status,
		Message: "Execution finalized with status: " + status}, nil
}

// GET /api/executions/{id}/replay
func (a *API) replayByPath(ctx context.Context, c *call) (any, error) {
	id, err := executionID(c)
	if err != nil {
		return nil, err
	}
	return a.replay(ctx, c, id)
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
