package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// readEvent reads one NoETL EventRequest (or a batch element): event_type
// (alias name), payload (alias context), meta, worker_id, result_kind,
// result_uri, event_ids, actionable, informative, event_id (the client's id:
// re-posting it is idempotent), status, created_at (kept in
// meta.client_created_at; the created_at column is the server's, R-S4).
func readEvent(o obj) (controlplane.EventInput, error) {
	var in controlplane.EventInput
	var err error
	if in.Type, err = o.strOf("event_type", true, "name"); err != nil {
		return in, err
	}
	if in.Step, err = o.strOf("step", false, "node_name"); err != nil {
		return in, err
	}
	if in.Payload, err = o.object("payload", "context"); err != nil {
		return in, err
	}
	if in.Meta, err = o.object("meta"); err != nil {
		return in, err
	}
	if in.WorkerID, err = o.str("worker_id", false); err != nil {
		return in, err
	}
	if in.ResultKind, err = o.str("result_kind", false); err != nil {
		return in, err
	}
	if in.ResultURI, err = o.str("result_uri", false); err != nil {
		return in, err
	}
	if in.EventIDs, _, err = o.array("event_ids", false); err != nil {
		return in, err
	}
	if in.ClientEventID, err = o.scalarString("event_id"); err != nil {
		return in, err
	}
	if in.Status, err = o.str("status", false); err != nil {
		return in, err
	}
	for _, k := range []string{"actionable", "informative"} {
		if _, err := o.boolean(k); err != nil {
			return in, err
		}
	}
	if in.CreatedAt, err = o.str("created_at", false); err != nil {
		return in, err
	}
	if in.CreatedAt != "" {
		if _, err := parseClientTime(in.CreatedAt); err != nil {
			return in, invalid(o.name("created_at"), "expected a timestamp such as 2024-05-01T12:00:00Z (a zone-less one is read as UTC), got %q", truncate(in.CreatedAt, 40))
		}
	}
	return in, nil
}

// parseClientTime reads a producer's timestamp: RFC 3339, or the zone-less
// ISO form NoETL's Python workers and Postgres' timestamp columns write (UTC).
func parseClientTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	var err error
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
		var t time.Time
		if t, err = time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, err
}

// readExecutionEvent reads an event that names its execution.
func readExecutionEvent(o obj) (controlplane.EventInput, error) {
	execID, err := o.id("execution_id", true)
	if err != nil {
		return controlplane.EventInput{}, err
	}
	in, err := readEvent(o)
	in.ExecutionID = execID
	return in, err
}

// POST /api/events
func (a *API) ingest(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	in, err := readExecutionEvent(o)
	if err != nil {
		return nil, err
	}
	c.attrs.setExecution(in.ExecutionID)
	if id, _ := in.Meta["command_id"].(string); id != "" {
		c.attrs.setCommand(id)
	}
	start := time.Now()
	res, err := a.svc.Ingest(ctx, in)
	a.recordIngest([]string{in.Type}, err, time.Since(start))
	if err != nil {
		return nil, err
	}
	return map[string]any{"status": "ok", "event_id": formatID(res.EventID),
		"commands_generated": int64(res.CommandsGenerated), "duplicate": res.Duplicate}, nil
}

// POST /api/events/batch {execution_id, worker_id?, events: [...]}: all or
// nothing, orchestrating every triggering event in order.
func (a *API) ingestBatch(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	execID, err := o.id("execution_id", true)
	if err != nil {
		return nil, err
	}
	worker, err := o.str("worker_id", false)
	if err != nil {
		return nil, err
	}
	list, err := eventList(o)
	if err != nil {
		return nil, err
	}
	ins := make([]controlplane.EventInput, len(list))
	types := make([]string, len(list))
	for i, raw := range list {
		name := fmt.Sprintf("events[%d]", i)
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, invalid(name, "expected object, got %s", jsonx.TypeName(raw))
		}
		eo := obj{prefix: name, m: m}
		if id, err := eo.id("execution_id", false); err != nil {
			return nil, err
		} else if id != 0 && id != execID {
			return nil, invalid(eo.name("execution_id"), "%d differs from the batch's execution_id %d; a batch belongs to one execution", id, execID)
		}
		in, err := readEvent(eo)
		if err != nil {
			return nil, err
		}
		in.ExecutionID = execID
		if in.WorkerID == "" {
			in.WorkerID = worker
		}
		ins[i], types[i] = in, in.Type
	}
	c.attrs.setExecution(execID)
	start := time.Now()
	res, err := a.svc.IngestBatch(ctx, execID, ins)
	a.recordIngest(types, err, time.Since(start))
	if err != nil {
		return nil, err
	}
	eventIDs := make([]any, len(res))
	generated := int64(0)
	for i, r := range res {
		eventIDs[i] = formatID(r.EventID)
		generated += int64(r.CommandsGenerated)
	}
	return map[string]any{"status": "ok", "event_ids": eventIDs, "commands_generated": generated}, nil
}

func (a *API) recordIngest(types []string, err error, d time.Duration) {
	if a.opts.Recorder == nil {
		return
	}
	status := http.StatusOK
	if err != nil {
		status = classify(err).Status
	}
	a.opts.Recorder.Ingest(types, status, d)
}

// Command bodies keep NoETL's integers for event_id and execution_id (see the
// package doc).
func commandBody(b *controlplane.CommandBody, status string) map[string]any {
	return map[string]any{
		"status": status, "event_id": b.EventID, "execution_id": b.ExecutionID,
		"node_id": b.Step, "node_name": b.Step, "action": b.Action,
		"context": emptyIfNil(b.Context), "meta": emptyIfNil(b.Meta),
		"command_id": b.CommandID, "attempt": int64(b.Attempt),
		"lease_expires_at": timeOrNull(b.LeaseExpiresAt), "worker_id": strOrNull(b.WorkerID),
	}
}

func emptyIfNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// GET /api/commands/{event_id}: the command without claiming it, masked;
// status is the command's own (PENDING, CLAIMED, …).
func (a *API) getCommand(ctx context.Context, c *call) (any, error) {
	id, err := parseID("event_id", c.params["event_id"])
	if err != nil {
		return nil, err
	}
	b, err := a.svc.Command(ctx, id)
	if err != nil {
		return nil, err
	}
	c.attrs.setExecution(b.ExecutionID)
	c.attrs.setCommand(b.CommandID)
	// A look, not a claim: masked like everything users read (the claim
	// answer carries what the worker needs to run the step).
	workload, err := a.svc.Workload(ctx, b.ExecutionID)
	if err != nil {
		return nil, err
	}
	m := maskerFor(workload)
	masked := *b
	masked.Context, masked.Meta = maskedObject(m, b.Context), maskedObject(m, b.Meta)
	return commandBody(&masked, b.Status), nil
}

// POST /api/commands/{event_id}/claim {worker_id, start?}: start (our
// worker's) records the start with the claim, so no command.started follows.
func (a *API) claim(ctx context.Context, c *call) (any, error) {
	id, err := parseID("event_id", c.params["event_id"])
	if err != nil {
		return nil, err
	}
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	worker, err := o.str("worker_id", true)
	if err != nil {
		return nil, err
	}
	start, err := o.boolean("start")
	if err != nil {
		return nil, err
	}
	b, err := a.svc.Claim(ctx, id, worker, start)
	if rec := a.opts.Recorder; rec != nil {
		status := http.StatusOK
		if err != nil {
			status = classify(err).Status
		}
		rec.Claim(status)
	}
	if err != nil {
		return nil, err
	}
	c.attrs.setExecution(b.ExecutionID)
	c.attrs.setCommand(b.CommandID)
	return commandBody(b, "ok"), nil
}

// POST /api/commands/{event_id}/heartbeat {worker_id, attempt?}
func (a *API) heartbeat(ctx context.Context, c *call) (any, error) {
	id, err := parseID("event_id", c.params["event_id"])
	if err != nil {
		return nil, err
	}
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	worker, err := o.str("worker_id", true)
	if err != nil {
		return nil, err
	}
	attempt, _, err := o.integer("attempt", 1, 1<<31-1)
	if err != nil {
		return nil, err
	}
	until, err := a.svc.Heartbeat(ctx, id, worker, int(attempt))
	if err != nil {
		return nil, err
	}
	return map[string]any{"lease_expires_at": timeOrNull(until)}, nil
}

// MaxTake bounds how many commands one report can take.
const MaxTake = 1000

// POST /api/worker/report {worker_id, pool?, take?, events?: [EventRequest
// with execution_id], claims?: [command.issued event id]}: our worker's one
// request per step. The events of any number of executions are ingested (each
// execution's in order), the claimed commands are claimed and started, and up
// to take of the commands the events issued come back claimed and started
// too. Each event and each claim gets its own status: one refused (404, 409,
// 422, 429) does not refuse the others.
func (a *API) report(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	r := controlplane.Report{}
	if r.WorkerID, err = o.str("worker_id", true); err != nil {
		return nil, err
	}
	if r.Pool, err = o.str("pool", false); err != nil {
		return nil, err
	}
	if take, _, err := o.integer("take", 0, MaxTake); err != nil {
		return nil, err
	} else {
		r.Take = int(take)
	}
	list, _, err := o.array("events", false)
	if err != nil {
		return nil, err
	}
	claims, _, err := o.array("claims", false)
	if err != nil {
		return nil, err
	}
	switch {
	case len(list)+len(claims) == 0:
		return nil, invalid("events", "give at least one event or claim")
	case len(list)+len(claims) > MaxBatchEvents:
		return nil, errorf(http.StatusRequestEntityTooLarge, "events and claims: %d in one request; the limit is %d",
			len(list)+len(claims), MaxBatchEvents)
	}
	for i, raw := range claims {
		id, err := parseID(fmt.Sprintf("claims[%d]", i), raw)
		if err != nil {
			return nil, err
		}
		r.Claims = append(r.Claims, id)
	}
	types := make([]string, len(list))
	for i, raw := range list {
		name := fmt.Sprintf("events[%d]", i)
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, invalid(name, "expected object, got %s", jsonx.TypeName(raw))
		}
		in, err := readExecutionEvent(obj{prefix: name, m: m})
		if err != nil {
			return nil, err
		}
		r.Events = append(r.Events, in)
		types[i] = in.Type
	}
	start := time.Now()
	out, err := a.svc.Report(ctx, r)
	a.recordIngest(types, err, time.Since(start))
	if err != nil {
		return nil, err
	}
	events := make([]any, len(out.Events))
	for i, e := range out.Events {
		m := map[string]any{"status": int64(http.StatusOK)}
		if e.EventID != 0 {
			m["event_id"] = formatID(e.EventID)
		}
		if e.Err != nil {
			ae := classify(e.Err)
			m["status"], m["error"] = int64(ae.Status), ae.Message
			if ae.Status >= 500 {
				a.log.ErrorContext(ctx, "report event failed", "execution_id", r.Events[i].ExecutionID, "error", e.Err.Error())
			}
		} else {
			m["commands_generated"], m["duplicate"] = int64(e.CommandsGenerated), e.Duplicate
		}
		events[i] = m
	}
	claimed := make([]any, len(out.Claims))
	for i, c := range out.Claims {
		m := map[string]any{"event_id": formatID(c.EventID), "status": int64(http.StatusOK)}
		if rec := a.opts.Recorder; rec != nil {
			if c.Err != nil {
				rec.Claim(classify(c.Err).Status)
			} else {
				rec.Claim(http.StatusOK)
			}
		}
		if c.Err != nil {
			ae := classify(c.Err)
			m["status"], m["error"] = int64(ae.Status), ae.Message
			if ra, ok := ae.Extra["retry_after_seconds"]; ok {
				m["retry_after_seconds"] = ra
			}
		}
		claimed[i] = m
	}
	cmds := make([]any, len(out.Commands))
	for i, b := range out.Commands {
		cmds[i] = commandBody(b, "ok")
	}
	return map[string]any{"status": "ok", "events": events, "claims": claimed, "commands": cmds}, nil
}

// eventList reads a request's events array: 1..MaxBatchEvents entries (over the
// limit is 413 with the limit named).
func eventList(o obj) ([]any, error) {
	list, _, err := o.array("events", true)
	if err != nil {
		return nil, err
	}
	switch {
	case len(list) == 0:
		return nil, invalid("events", "at least one event is required")
	case len(list) > MaxBatchEvents:
		return nil, errorf(http.StatusRequestEntityTooLarge, "events: %d events in one request; the limit is %d", len(list), MaxBatchEvents)
	}
	return list, nil
}
