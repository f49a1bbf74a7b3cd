package api

import (
	"context"
	"errors"
	"fmt"
	"github.com/noetl-go/noetl/shared/ids"
	"maps"
	"math"
	"net/http"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/noetlwire"
)

// The internal routes (R-A6, R-A4) need the internal scope.

// POST /api/internal/outbox/claim {limit?} (default 100): a limit outside
// 1..1000 is clamped into it, as NoETL's server does (its claim_batch).
func (a *API) outboxClaim(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	limit, ok, err := o.integer("limit", math.MinInt64, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	if !ok {
		limit = DefaultListLimit
	}
	limit = min(max(limit, 1), MaxListLimit)
	rows, err := a.svc.ClaimOutbox(ctx, int(limit))
	if err != nil {
		return nil, err
	}
	out := make([]any, len(rows))
	for i, r := range rows {
		payload, err := jsonx.Decode(r.Payload)
		if err != nil {
			return nil, fmt.Errorf("outbox row %d: decode payload: %w", r.OutboxID, err)
		}
		out[i] = map[string]any{
			"outbox_id": ids.Format(r.OutboxID), "event_id": ids.Format(r.EventID), "execution_id": ids.Format(r.ExecutionID),
			"subject": r.Subject, "msg_id": r.MsgID, "payload": payload, "attempts": int64(r.Attempts),
			// NoETL's publisher decodes payload by codec; ours are plain JSON.
			"payload_codec": "json",
		}
	}
	return map[string]any{"rows": out, "claimed": int64(len(out))}, nil
}

// POST /api/internal/outbox/mark-published {outbox_ids: [...]} → {marked}
// (NoETL's name; updated is kept for this project's earlier callers); ids that
// are unknown or already published are not counted.
func (a *API) outboxMarkPublished(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	list, _, err := o.Array("outbox_ids", true)
	if err != nil {
		return nil, err
	}
	if len(list) > MaxListLimit {
		return nil, errorf(http.StatusRequestEntityTooLarge, "outbox_ids: %d ids; the limit is %d", len(list), MaxListLimit)
	}
	ids := make([]int64, len(list))
	for i, v := range list {
		if ids[i], err = parseID(fmt.Sprintf("outbox_ids[%d]", i), v); err != nil {
			return nil, err
		}
	}
	n, err := a.svc.MarkOutboxPublished(ctx, ids)
	if err != nil {
		return nil, err
	}
	return map[string]any{"marked": n, "updated": n}, nil
}

// POST /api/internal/outbox/mark-failed {outbox_id, error, attempts?,
// max_delay_seconds?} → {marked: true, available_at_in: seconds} (NoETL's
// contract): the row backs off min(max_delay_seconds (default 300),
// 2^min(8, attempts-1)) seconds. attempts defaults to the row's own count,
// which the claim raised (NoETL defaults it to 1: the same after one claim).
func (a *API) outboxMarkFailed(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	id, err := o.id("outbox_id", true)
	if err != nil {
		return nil, err
	}
	msg, err := o.Str("error", true)
	if err != nil {
		return nil, err
	}
	if msg == "" {
		return nil, invalid("error", "must not be empty: say why the publish failed")
	}
	attempts, _, err := o.integer("attempts", 0, 1<<31-1)
	if err != nil {
		return nil, err
	}
	maxDelay := controlplane.OutboxMaxDelay
	if secs, ok, err := o.number("max_delay_seconds"); err != nil {
		return nil, err
	} else if ok {
		if secs <= 0 || secs > 86400 {
			return nil, invalid("max_delay_seconds", "expected a number of seconds in (0, 86400], got %v", secs)
		}
		maxDelay = time.Duration(secs * float64(time.Second))
	}
	d, err := a.svc.MarkOutboxFailed(ctx, id, msg, int(attempts), maxDelay)
	if err != nil {
		return nil, err
	}
	return map[string]any{"marked": true, "available_at_in": int64(d.Round(time.Second) / time.Second)}, nil
}

// GET /api/internal/outbox/pending-count → {pending}: rows a claim would take
// now (NoETL's count: not those in flight or backing off).
func (a *API) outboxPendingCount(ctx context.Context, _ *call) (any, error) {
	n, err := a.svc.OutboxClaimableCount(ctx)
	if err != nil {
		return nil, err
	}
	return map[string]any{"pending": n}, nil
}

// POST /api/internal/events/project {events: [envelope]}: external
// informative events, idempotent by event_id, without orchestration (R-A4).
// An envelope has the replay data set's row shape: event_id, execution_id,
// event_type (alias name), node_name (alias step), status, context (alias
// payload), meta, result, error, worker_id, command_id, and stage_id,
// frame_id, aggregate_type, aggregate_id (kept in meta, where replay reads
// them).
func (a *API) project(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	list, err := eventList(o)
	if err != nil {
		return nil, err
	}
	evs := make([]controlplane.ExternalEvent, len(list))
	for i, raw := range list {
		name := fmt.Sprintf("events[%d]", i)
		m, ok := raw.(map[string]any)
		if !ok {
			return nil, invalid(name, "expected object, got %s", jsonx.TypeName(raw))
		}
		if evs[i], err = readEnvelope(obj{jsonx.Fields{Prefix: name, M: m}}); err != nil {
			return nil, err
		}
	}
	res, err := a.svc.Project(ctx, evs)
	if err != nil {
		if errors.Is(err, controlplane.ErrNotFound) && res != nil && res.Projected > 0 {
			a.log.WarnContext(ctx, "project stopped at an unknown execution; earlier executions' events were committed",
				"projected", res.Projected)
		}
		return nil, err
	}
	return map[string]any{"projected": int64(res.Projected), "duplicates": int64(res.Duplicates), "skipped": int64(res.Skipped)}, nil
}

func readEnvelope(o obj) (controlplane.ExternalEvent, error) {
	var e controlplane.ExternalEvent
	var err error
	if e.SourceEventID, err = o.id("event_id", true); err != nil {
		return e, err
	}
	// execution_id and event_type are optional, as in NoETL's envelope; an
	// envelope without them is counted in skipped (Service.Project).
	if e.ExecutionID, err = o.id("execution_id", false); err != nil {
		return e, err
	}
	if e.Type, err = o.Str("event_type", false, "name"); err != nil {
		return e, err
	}
	if e.Step, err = o.Str("node_name", false, "step"); err != nil {
		return e, err
	}
	if e.Status, err = o.Str("status", false); err != nil {
		return e, err
	}
	if e.Context, err = o.Object("context", "payload"); err != nil {
		return e, err
	}
	if e.Meta, err = o.Object("meta"); err != nil {
		return e, err
	}
	if e.Result, err = o.Object("result"); err != nil {
		return e, err
	}
	if e.Error, err = o.Str("error", false); err != nil {
		return e, err
	}
	if e.WorkerID, err = o.Str("worker_id", false); err != nil {
		return e, err
	}
	if e.CommandID, err = o.scalarString("command_id"); err != nil {
		return e, err
	}
	extra := map[string]any{}
	// The producer's time (NoETL: timestamp, else created_at) is kept in meta;
	// the row's created_at is the server's (R-S4).
	for _, k := range []string{"timestamp", "created_at"} {
		v, err := o.Str(k, false)
		if err != nil {
			return e, err
		}
		if v != "" {
			if _, err := noetlwire.ParseTime(v); err != nil {
				return e, invalid(o.Name(k), "expected a timestamp such as 2024-05-01T12:00:00Z (a zone-less one is read as UTC), got %q", truncate(v, 40))
			}
			if _, ok := extra["client_created_at"]; !ok {
				extra["client_created_at"] = v
			}
		}
	}
	for _, k := range []string{"stage_id", "frame_id", "aggregate_type", "aggregate_id", "node_id", "node_type"} {
		v, err := o.scalarString(k)
		if err != nil {
			return e, err
		}
		if v != "" {
			extra[k] = v
		}
	}
	if len(extra) > 0 {
		meta := maps.Clone(e.Meta) // the decoded body's map is not ours to change
		if meta == nil {
			meta = map[string]any{}
		}
		maps.Copy(meta, extra)
		e.Meta = meta
	}
	return e, nil
}
