package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/wire"
)

// eventInput is a posted event as the service ingests it (noetlwire owns
// what NoETL's fields mean).
func eventInput(executionID wire.ID, f wire.EventFields) controlplane.EventInput {
	in := noetlwire.FromRequest(f)
	in.ExecutionID = int64(executionID)
	return in
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
func (a *API) ingest(ctx context.Context, c *call, r wire.EventRequest) (wire.Ingested, error) {
	in := eventInput(r.ExecutionID, r.EventFields)
	c.attrs.setExecution(in.ExecutionID)
	if id := in.CommandID(); id != "" {
		c.attrs.setCommand(id)
	}
	if in.IsHeartbeat() {
		return a.heartbeatEvent(ctx, in)
	}
	req, err := requestOf(c)
	if err != nil {
		return wire.Ingested{}, err
	}
	start := time.Now()
	res, err := a.svc.IngestBatch(ctx, in.ExecutionID, []controlplane.EventInput{in}, req)
	a.recordIngest([]string{in.Type}, err, time.Since(start))
	var fenced *controlplane.FencedError
	if err != nil && !errors.As(err, &fenced) {
		return wire.Ingested{}, err
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
func (a *API) heartbeatEvent(ctx context.Context, in controlplane.EventInput) (wire.Ingested, error) {
	id := in.CommandID()
	if id == "" {
		return wire.Ingested{}, invalid("payload.command_id", "required: the command the heartbeat keeps (NoETL's {command_id, worker_id})")
	}
	worker := in.WorkerID
	if worker == "" {
		worker, _ = in.Payload["worker_id"].(string)
	}
	if worker == "" {
		return wire.Ingested{}, invalid("worker_id", "required: the worker holding the command")
	}
	until, err := a.svc.HeartbeatCommand(ctx, in.ExecutionID, id, worker, in.Attempt())
	if errors.Is(err, controlplane.ErrConflict) {
		return wire.Ingested{Status: "ok", Ignored: err.Error()}, nil
	}
	if err != nil {
		return wire.Ingested{}, err
	}
	at := wire.At(until)
	return wire.Ingested{Status: "ok", LeaseExpiresAt: &at}, nil
}

// POST /api/events/batch {execution_id, worker_id?, events: [...]}: all or
// nothing, orchestrating every triggering event in order. Heartbeats in a
// batch extend leases and take no event id ("0"); fenced events are answered
// as on /api/events.
func (a *API) ingestBatch(ctx context.Context, c *call, r wire.BatchRequest) (wire.IngestedBatch, error) {
	req, err := requestOf(c)
	if err != nil {
		return wire.IngestedBatch{}, err
	}
	var ins, beats []controlplane.EventInput
	var slots []int // position in the answer of each of ins
	var types []string
	for i, e := range r.Events {
		in := eventInput(r.ExecutionID, e.EventFields)
		if in.WorkerID == "" {
			in.WorkerID = r.WorkerID
		}
		if in.IsHeartbeat() {
			beats = append(beats, in)
			continue
		}
		ins, slots, types = append(ins, in), append(slots, i), append(types, in.Type)
	}
	execID := int64(r.ExecutionID)
	c.attrs.setExecution(execID)
	out := wire.IngestedBatch{Status: "ok", EventIDs: make([]wire.ID, len(r.Events))}
	for _, b := range beats {
		if _, err := a.heartbeatEvent(ctx, b); err != nil {
			return wire.IngestedBatch{}, err
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
		return wire.IngestedBatch{}, err
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
func (a *API) getCommand(ctx context.Context, c *call, p commandPath) (wire.Command, error) {
	b, err := a.svc.Command(ctx, int64(p.EventID))
	if err != nil {
		return wire.Command{}, err
	}
	c.attrs.setExecution(b.ExecutionID)
	c.attrs.setCommand(b.CommandID)
	// A look, not a claim: masked like everything users read (the claim
	// answer carries what the worker needs to run the step).
	workload, err := a.svc.Workload(ctx, b.ExecutionID)
	if err != nil {
		return wire.Command{}, err
	}
	m := maskerFor(workload)
	masked := *b
	masked.Context, masked.Meta = maskedObject(m, b.Context), maskedObject(m, b.Meta)
	return commandBody(&masked, b.Status), nil
}

// POST /api/commands/{event_id}/claim {worker_id, start?}: start (our
// worker's) records the start with the claim, so no command.started follows.
func (a *API) claim(ctx context.Context, c *call, p commandPath, r wire.ClaimRequest) (wire.Command, error) {
	b, err := a.svc.Claim(ctx, int64(p.EventID), r.WorkerID, r.Start)
	if rec := a.opts.Recorder; rec != nil {
		status := http.StatusOK
		if err != nil {
			status = classify(err).Status
		}
		rec.Claim(status)
	}
	if err != nil {
		return wire.Command{}, err
	}
	c.attrs.setExecution(b.ExecutionID)
	c.attrs.setCommand(b.CommandID)
	return commandBody(b, "ok"), nil
}

// POST /api/commands/{event_id}/heartbeat {worker_id, attempt?}
func (a *API) heartbeat(ctx context.Context, c *call, p commandPath, r wire.HeartbeatRequest) (wire.Lease, error) {
	until, err := a.svc.Heartbeat(ctx, int64(p.EventID), r.WorkerID, r.Attempt)
	if err != nil {
		return wire.Lease{}, err
	}
	return wire.Lease{LeaseExpiresAt: wire.At(until)}, nil
}

// POST /api/worker/report {worker_id, pool?, take?, events?: [EventRequest
// with execution_id], claims?: [command.issued event id]}: our worker's one
// request per step. The events of any number of executions are ingested (each
// execution's in order), the claimed commands are claimed and started, and up
// to take of the commands the events issued come back claimed and started
// too. Each event and each claim gets its own status: one refused (404, 409,
// 422, 429) does not refuse the others.
func (a *API) report(ctx context.Context, c *call, req wire.Report) (wire.Reported, error) {
	r := controlplane.Report{WorkerID: req.WorkerID, Pool: req.Pool, Take: req.Take}
	for _, id := range req.Claims {
		r.Claims = append(r.Claims, int64(id))
	}
	types := make([]string, len(req.Events))
	for i, e := range req.Events {
		r.Events = append(r.Events, eventInput(e.ExecutionID, e.EventFields))
		types[i] = e.EventType
	}
	start := time.Now()
	out, err := a.svc.Report(ctx, r)
	a.recordIngest(types, err, time.Since(start))
	if err != nil {
		return wire.Reported{}, err
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
