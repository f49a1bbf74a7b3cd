package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
)

// The internal routes (R-A6, R-A4) need the internal scope.

// POST /api/internal/outbox/claim {limit?} (default 100): a limit outside
// 1..1000 is clamped into it, as NoETL's server does (its claim_batch).
func (a *API) outboxClaim(ctx context.Context, c *call, r wire.OutboxClaimRequest) (wire.OutboxClaimed, error) {
	limit := int64(DefaultListLimit)
	if r.Limit != nil {
		limit = min(max(*r.Limit, 1), MaxListLimit)
	}
	rows, err := a.svc.ClaimOutbox(ctx, int(limit))
	if err != nil {
		return wire.OutboxClaimed{}, err
	}
	out := wire.OutboxClaimed{Rows: make([]wire.OutboxRow, len(rows)), Claimed: len(rows)}
	for i, r := range rows {
		payload, err := jsonx.Decode(r.Payload)
		if err != nil {
			return wire.OutboxClaimed{}, fmt.Errorf("outbox row %d: decode payload: %w", r.OutboxID, err)
		}
		out.Rows[i] = wire.OutboxRow{OutboxID: wire.ID(r.OutboxID), EventID: wire.ID(r.EventID), ExecutionID: wire.ID(r.ExecutionID),
			Subject: r.Subject, MsgID: r.MsgID, Payload: wire.Value{V: payload}, Attempts: r.Attempts, PayloadCodec: "json"}
	}
	return out, nil
}

// POST /api/internal/outbox/mark-published {outbox_ids: [...]} → {marked}
// (NoETL's name; updated is kept for this project's earlier callers); ids that
// are unknown or already published are not counted.
func (a *API) outboxMarkPublished(ctx context.Context, c *call, r wire.MarkPublishedRequest) (wire.OutboxMarked, error) {
	ids := make([]int64, len(r.OutboxIDs))
	for i, id := range r.OutboxIDs {
		ids[i] = int64(id)
	}
	n, err := a.svc.MarkOutboxPublished(ctx, ids)
	if err != nil {
		return wire.OutboxMarked{}, err
	}
	return wire.OutboxMarked{Marked: n, Updated: n}, nil
}

// POST /api/internal/outbox/mark-failed {outbox_id, error, attempts?,
// max_delay_seconds?} → {marked: true, available_at_in: seconds} (NoETL's
// contract): the row backs off min(max_delay_seconds (default 300),
// 2^min(8, attempts-1)) seconds. attempts defaults to the row's own count,
// which the claim raised (NoETL defaults it to 1: the same after one claim).
func (a *API) outboxMarkFailed(ctx context.Context, c *call, r wire.MarkFailedRequest) (wire.OutboxFailed, error) {
	maxDelay := controlplane.OutboxMaxDelay
	if r.MaxDelaySeconds != nil {
		maxDelay = time.Duration(*r.MaxDelaySeconds * float64(time.Second))
	}
	d, err := a.svc.MarkOutboxFailed(ctx, int64(r.OutboxID), r.Error, r.Attempts, maxDelay)
	if err != nil {
		return wire.OutboxFailed{}, err
	}
	return wire.OutboxFailed{Marked: true, AvailableAtIn: int64(d.Round(time.Second) / time.Second)}, nil
}

// GET /api/internal/outbox/pending-count → {pending}: rows a claim would take
// now (NoETL's count: not those in flight or backing off).
func (a *API) outboxPendingCount(ctx context.Context, _ *call) (wire.OutboxPending, error) {
	n, err := a.svc.OutboxClaimableCount(ctx)
	if err != nil {
		return wire.OutboxPending{}, err
	}
	return wire.OutboxPending{Pending: n}, nil
}

// POST /api/internal/events/project {events: [envelope]}: external
// informative events, idempotent by event_id, without orchestration (R-A4).
// An envelope has the replay data set's row shape: event_id, execution_id,
// event_type (alias name), node_name (alias step), status, context (alias
// payload), meta, result, error, worker_id, command_id, and stage_id,
// frame_id, aggregate_type, aggregate_id (kept in meta, where replay reads
// them).
func (a *API) project(ctx context.Context, c *call, r wire.ProjectRequest) (wire.Projected, error) {
	evs := make([]controlplane.ExternalEvent, len(r.Events))
	for i, e := range r.Events {
		evs[i] = externalEvent(e)
	}
	res, err := a.svc.Project(ctx, evs)
	if err != nil {
		if errors.Is(err, controlplane.ErrNotFound) && res != nil && res.Projected > 0 {
			a.log.WarnContext(ctx, "project stopped at an unknown execution; earlier executions' events were committed",
				"projected", res.Projected)
		}
		return wire.Projected{}, err
	}
	return wire.Projected{Projected: res.Projected, Duplicates: res.Duplicates, Skipped: res.Skipped}, nil
}

// externalEvent is an envelope as the service projects it: the producer's
// time (NoETL: timestamp, else created_at) and the five ids replay reads are
// kept in meta; the row's created_at is the server's (R-S4).
func externalEvent(e wire.Envelope) controlplane.ExternalEvent {
	out := controlplane.ExternalEvent{SourceEventID: int64(e.EventID), Event: store.Event{ExecutionID: int64(e.ExecutionID),
		EventType: e.EventType, NodeName: e.NodeName, Status: e.Status, Context: e.Context, Meta: e.Meta, Result: e.Result,
		Error: e.Error, WorkerID: e.WorkerID, CommandID: string(e.CommandID)}}
	extra := map[string]any{}
	if t := cmp.Or(e.Timestamp, e.CreatedAt); t != "" {
		extra["client_created_at"] = string(t)
	}
	for k, v := range map[string]wire.Scalar{"stage_id": e.StageID, "frame_id": e.FrameID, "aggregate_type": e.AggregateType,
		"aggregate_id": e.AggregateID, "node_id": e.NodeID, "node_type": e.NodeType} {
		if v != "" {
			extra[k] = string(v)
		}
	}
	if len(extra) > 0 {
		meta := maps.Clone(out.Meta) // the decoded body's map is not ours to change
		if meta == nil {
			meta = map[string]any{}
		}
		maps.Copy(meta, extra)
		out.Meta = meta
	}
	return out
}
