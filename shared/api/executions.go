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
	out := make([]any, len(rows))
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

func executionSummary(r store.Execution) map[string]any {
	return map[string]any{
		"execution_id": formatID(r.ExecutionID), "catalog_id": formatID(r.CatalogID), "path": r.Path,
		"version": int64(r.Version), "status": r.Status, "started_at": timeOrNull(r.StartedAt),
		"completed_at": timeOrNull(r.CompletedAt), "parent_execution_id": idOrNull(r.ParentExecutionID),
		// Every event is numbered 1..last_seq (R-S4): the count without a scan.
		"event_count": r.LastSeq,
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
	out := executionSummary(v.Row)
	steps := make(map[string]any, len(v.Steps))
	for name, s := range v.Steps {
		steps[name] = map[string]any{
			"status": s.Status, "result": m.Redact(s.Result), "attempts": int64(s.Attempts), "visits": int64(s.Visits),
			"started_at": timeOrNull(s.StartedAt), "completed_at": timeOrNull(s.CompletedAt), "error": strOrNull(maskedString(m, s.Error)),
		}
	}
	out["workload"] = emptyIfNil(maskedObject(m, v.Row.Workload))
	out["steps"] = steps
	out["context"] = emptyIfNil(maskedObject(m, v.Context))
	out["result"] = m.Redact(v.Result)
	out["error"] = strOrNull(maskedString(m, v.Row.Error))
	// NoETL's detail carries the log's tail (its clients show it); the whole
	// log, paged, is GET /api/executions/{id}/events.
	_, evs, err := a.svc.ExecutionEvents(ctx, store.EventFilter{ExecutionID: id,
		AfterSeq: max(0, v.Row.LastSeq-DetailEventsTail), Limit: DetailEventsTail})
	if err != nil {
		return nil, err
	}
	tail := make([]any, len(evs))
	for i, e := range evs {
		tail[i] = eventJSON(m, e)
	}
	out["events"] = tail
	out["event_count"] = v.Row.LastSeq
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
	return map[string]any{"execution_id": formatID(id), "is_cancelled": v.IsCancelled, "status": v.Status}, nil
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
	out := make([]any, len(evs))
	for i, e := range evs {
		out[i] = eventJSON(m, e)
	}
	var next any
	if len(evs) == f.Limit {
		next = evs[len(evs)-1].Seq
	}
	return map[string]any{"events": out, "next_after_seq": next}, nil
}

// eventJSON is an event as users read it, its values masked with m.
func eventJSON(m *redact.Masker, e store.Event) map[string]any {
	return map[string]any{
		"event_id": formatID(e.EventID), "execution_id": formatID(e.ExecutionID), "seq": e.Seq,
		"event_type": e.EventType, "node_name": strOrNull(e.NodeName), "node_type": strOrNull(e.NodeType),
		"status": strOrNull(e.Status), "context": objOrNull(maskedObject(m, e.Context)), "meta": objOrNull(maskedObject(m, e.Meta)),
		"result": objOrNull(maskedObject(m, e.Result)), "error": strOrNull(maskedString(m, e.Error)), "worker_id": strOrNull(e.WorkerID),
		"command_id": strOrNull(e.CommandID), "parent_event_id": idOrNull(e.ParentEventID),
		"client_event_id": strOrNull(e.ClientEventID), "ignored": e.Ignored, "created_at": timeOrNull(e.CreatedAt),
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

func statusJSON(v *controlplane.StatusView) map[string]any {
	return map[string]any{
		"execution_id": formatID(v.ExecutionID), "status": v.Status, "current_step": strOrNull(v.CurrentStep),
		"progress": map[string]any{
			"total_steps": int64(v.TotalSteps), "completed_steps": int64(v.CompletedSteps),
			"running_steps": int64(v.RunningSteps), "failed_steps": int64(v.FailedSteps),
			"skipped_steps": int64(v.SkippedSteps),
		},
		"is_cancelled": v.IsCancelled,
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
	return map[string]any{"execution_id": formatID(id), "status": store.ExecutionCancelled,
		"message": "Execution cancellation requested"}, nil
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
	return map[string]any{"execution_id": formatID(id), "status": status,
		"message": "Execution finalized with status: " + status}, nil
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
