package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/wire"
)

// readExecutionEvent reads an event that names its execution (noetlwire.Read
// owns the rest of the EventRequest).
func readExecutionEvent(o obj) (controlplane.EventInput, error) {
	execID, err := o.id("execution_id", true)
	if err != nil {
		return controlplane.EventInput{}, err
	}
	in, err := noetlwire.Read(o.Prefix, o.M)
	in.ExecutionID = execID
	return in, err
}

// MaxIdempotencyKey bounds an Idempotency-Key header.
const MaxIdempotencyKey = 255

// requestOf is the Idempotency-Key of an event request, nil without one. The
// key is remembered per execution with a hash of the body, so a repeat of the
// request gets the first answer and another request under the key a 422.
func requestOf(c *call) (*controlplane.Request, error) {
	key := strings.TrimSpace(c.req.Header.Get("Idempotency-Key"))
	if key == "" {
		return nil, nil
	}
	if len(key) > MaxIdempotencyKey {
		return nil, invalid("Idempotency-Key", "%d characters; the limit is %d", len(key), MaxIdempotencyKey)
	}
	if err := textParam("Idempotency-Key", key, false); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(c.req.Body)
	return &controlplane.Request{Key: key, Hash: hex.EncodeToString(sum[:])}, nil
}

// POST /api/events. NoETL's workers post their command.heartbeat here: it
// extends the holder's lease and writes no event (R-L1). An event the fence
// refuses (R-L8, R-R10) is stored flagged ignored and answered 200 with the
// reason in `ignored`, as NoETL's server takes it: NoETL's workers retry a
// refused event and then report the command failed, which helps nobody.
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
	if id := in.CommandID(); id != "" {
		c.attrs.setCommand(id)
	}
	if in.IsHeartbeat() {
		return a.heartbeatEvent(ctx, in)
	}
	req, err := requestOf(c)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := a.svc.IngestBatch(ctx, in.ExecutionID, []controlplane.EventInput{in}, req)
	a.recordIngest([]string{in.Type}, err, time.Since(start))
	var fenced *controlplane.FencedError
	if err != nil && !errors.As(err, &fenced) {
		return nil, err
	}
	out := wire.Ingested{Status: "ok", EventID: wire.ID(res[0].EventID),
		CommandsGenerated: res[0].CommandsGenerated, Duplicate: res[0].Duplicate}
	if fenced != nil {
		out.Ignored = fenced.Reason
	}
	return out, nil
}

// heartbeatEvent is a command.heartbeat posted as an event: the lease of the
// command it names (payload or meta command_id) is extended if the worker
// (worker_id, top level or in the payload) holds it.
func (a *API) heartbeatEvent(ctx context.Context, in controlplane.EventInput) (any, error) {
	id := in.CommandID()
	if id == "" {
		return nil, invalid("payload.command_id", "required: the command the heartbeat keeps (NoETL's {command_id, worker_id})")
	}
	worker := in.WorkerID
	if worker == "" {
		worker, _ = in.Payload["worker_id"].(string)
	}
	if worker == "" {
		return nil, invalid("worker_id", "required: the worker holding the command")
	}
	until, err := a.svc.HeartbeatCommand(ctx, in.ExecutionID, id, worker, in.Attempt())
	if errors.Is(err, controlplane.ErrConflict) {
		return wire.Ingested{Status: "ok", Ignored: err.Error()}, nil
	}
	if err != nil {
		return nil, err
	}
	at := wire.At(until)
	return wire.Ingested{Status: "ok", LeaseExpiresAt: &at}, nil
}

// POST /api/events/batch {execution_id, worker_id?, events: [...]}: all or
// nothing, orchestrating every triggering event in order. Heartbeats in a
// batch extend leases and take no event id ("0"); fenced events are answered
// as on /api/events.
func (a *API) ingestBatch(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	execID, err := o.id("execution_id", true)
	if err != nil {
		return nil, err
	}
	worker, err := o.Str("worker_id", false)
	if err != nil {
		return nil, err
	}
	list, err := eventList(o)
	if err != nil {
		return nil, err
	}
	req, err := requestOf(c)
	if err != nil {
		return nil, err
	}
	var ins, beats []controlplane.EventInput
	var slots []int // position in the answer of each of ins
	var types []string
	for i, raw := range list {
		name := fmt.Sprintf("events[%d]", i)
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, invalid(name, "expected object, got %s", jsonx.TypeName(raw))
		}
		eo := obj{jsonx.Fields{Prefix: name, M: m}}
		if id, err := eo.id("execution_id", false); err != nil {
			return nil, err
		} else if id != 0 && id != execID {
			return nil, invalid(eo.Name("execution_id"), "%d differs from the batch's execution_id %d; a batch belongs to one execution", id, execID)
		}
		in, err := noetlwire.Read(name, m)
		if err != nil {
			return nil, err
		}
		in.ExecutionID = execID
		if in.WorkerID == "" {
			in.WorkerID = worker
		}
		if in.IsHeartbeat() {
			beats = append(beats, in)
			continue
		}
		ins, slots, types = append(ins, in), append(slots, i), append(types, in.Type)
	}
	c.attrs.setExecution(execID)
	out := wire.IngestedBatch{Status: "ok", EventIDs: make([]wire.ID, len(list))}
	for _, b := range beats {
		if _, err := a.heartbeatEvent(ctx, b); err != nil {
			return nil, err
		}
	}
	if len(ins) == 0 {
		return out, nil
	}
	start := time.Now()
	res, err := a.svc.IngestBatch(ctx, execID, ins, req)
	a.recordIngest(types, err, time.Since(start))
	var fenced *controlplane.FencedError
	if err != nil && !errors.As(err, &fenced) {
		return nil, err
	}
	for i, r := range res {
		out.EventIDs[slots[i]] = wire.ID(r.EventID)
		out.CommandsGenerated += r.CommandsGenerated
	}
	if fenced != nil {
		out.Ignored = fenced.Reason
		for _, id := range fenced.EventIDs {
			out.IgnoredEventIDs = append(out.IgnoredEventIDs, wire.ID(id))
		}
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
	worker, err := o.Str("worker_id", true)
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
	worker, err := o.Str("worker_id", true)
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
	if r.WorkerID, err = o.Str("worker_id", true); err != nil {
		return nil, err
	}
	if r.Pool, err = o.Str("pool", false); err != nil {
		return nil, err
	}
	if take, _, err := o.integer("take", 0, MaxTake); err != nil {
		return nil, err
	} else {
		r.Take = int(take)
	}
	list, _, err := o.Array("events", false)
	if err != nil {
		return nil, err
	}
	claims, _, err := o.Array("claims", false)
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
		in, err := readExecutionEvent(obj{jsonx.Fields{Prefix: name, M: m}})
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
	list, _, err := o.Array("events", true)
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
