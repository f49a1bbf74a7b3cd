package api

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/wire"
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
	return wire.Ingested{Status: "ok", EventID: wire.ID(res.EventID),
		CommandsGenerated: res.CommandsGenerated, Duplicate: res.Duplicate}, nil
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
	out := wire.IngestedBatch{Status: "ok", EventIDs: make([]wire.ID, len(res))}
	for i, r := range res {
		out.EventIDs[i] = wire.ID(r.EventID)
		out.CommandsGenerated += r.CommandsGenerated
	}
	return out, nil
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

// commandBody is a command as the worker protocol carries it; status is "ok"
// in a claim's answer, the command's own when only read.
func commandBody(b *controlplane.CommandBody, status string) wire.Command {
	return wire.Command{
		Status: status, EventID: wire.NumID(b.EventID), ExecutionID: wire.NumID(b.ExecutionID),
		NodeID: b.Step, NodeName: b.Step, Action: b.Action, Context: b.Context, Meta: b.Meta,
		CommandID: b.CommandID, Attempt: b.Attempt, LeaseExpiresAt: wire.At(b.LeaseExpiresAt), WorkerID: wire.OptString(b.WorkerID),
	}
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
	return wire.Lease{LeaseExpiresAt: wire.At(until)}, nil
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
	res := wire.Reported{Status: "ok", Events: make([]wire.EventOutcome, len(out.Events)),
		Claims: make([]wire.ClaimOutcome, len(out.Claims)), Commands: make([]wire.Command, len(out.Commands))}
	for i, e := range out.Events {
		o := wire.EventOutcome{Status: http.StatusOK, EventID: wire.ID(e.EventID)}
		if e.Err != nil {
			ae := classify(e.Err)
			o.Status, o.Error = ae.Status, ae.Message
			if ae.Status >= 500 && ae.Status != http.StatusServiceUnavailable {
				a.log.ErrorContext(ctx, "report event failed", "execution_id", r.Events[i].ExecutionID, "error", e.Err.Error())
			}
		} else {
			o.CommandsGenerated, o.Duplicate = e.CommandsGenerated, e.Duplicate
		}
		res.Events[i] = o
	}
	for i, c := range out.Claims {
		o := wire.ClaimOutcome{EventID: wire.ID(c.EventID), Status: http.StatusOK}
		if c.Err != nil {
			ae := classify(c.Err)
			o.Status, o.Error, o.RetryAfterSeconds = ae.Status, ae.Message, ae.retryAfterSeconds()
		}
		if rec := a.opts.Recorder; rec != nil {
			rec.Claim(o.Status)
		}
		res.Claims[i] = o
	}
	for i, b := range out.Commands {
		res.Commands[i] = commandBody(b, "ok")
	}
	return res, nil
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
