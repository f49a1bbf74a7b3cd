package controlplane

import (
	"context"
	"errors"
	"maps"
	"strconv"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/store"
)

// ExternalEvent is one informative event produced outside the control plane
// (stage, frame, business-object events a projector forwards), appended by
// Project (R-A4).
type ExternalEvent struct {
	// SourceEventID is the producer's id of the event: the idempotency key.
	SourceEventID int64
	// Event is the row as its producer sent it: ExecutionID, EventType,
	// NodeName, Status, Context, Meta, Result, Error, WorkerID, CommandID.
	// Project sets the rest and redacts secrets.
	store.Event
}

// Projection is the outcome of Project.
type Projection struct {
	Projected  int
	Duplicates int
	// Skipped counts envelopes with no log to go to: no execution_id, no
	// event_type, or an execution this server does not hold. NoETL's
	// projector accepts those (its event table is one flat log); ours is
	// per execution, so they are counted and left out rather than failing
	// the batch.
	Skipped int
}

// projectedPrefix namespaces the client ids of projected events, so a
// producer's event id never collides with a worker's own client ids.
const projectedPrefix = "projected:"

// Project appends external informative events to their executions' logs
// without orchestration (R-A4): under each execution's row lock they get the
// next seq numbers and are folded into the snapshot with engine.Apply (which
// only advances the sequence for such types), so the snapshot stays the fold
// of the log. Re-posting a source event id is a no-op counted in Duplicates.
// Types that drive orchestration (worker and server event types) are stored
// as sent but flagged ignored and not folded: only ingest orchestrates.
//
// Each execution's events commit in their own transaction on its shard, in
// order of first appearance; if one execution fails (unknown id), the ones
// before it stay committed and re-posting the whole batch is safe.
// Ended executions accept informative events too: nothing is decided on them.
func (s *Service) Project(ctx context.Context, events []ExternalEvent) (*Projection, error) {
	type group struct {
		id     int64
		events []ExternalEvent
	}
	var order []*group
	groups := map[int64]*group{}
	out := &Projection{}
	for i, e := range events {
		switch {
		case e.SourceEventID <= 0:
			return nil, Errorf(ErrInvalid, "events[%d].event_id: required (the producer's id makes projection idempotent)", i)
		case e.EventType == "" || e.ExecutionID <= 0:
			out.Skipped++
			continue
		}
		g := groups[e.ExecutionID]
		if g == nil {
			g = &group{id: e.ExecutionID}
			groups[e.ExecutionID] = g
			order = append(order, g)
		}
		g.events = append(g.events, e)
	}
	for _, g := range order {
		p, d, err := s.project(ctx, g.id, g.events)
		if errors.Is(err, ErrNotFound) {
			out.Skipped += len(g.events)
			continue
		}
		if err != nil {
			return out, err
		}
		out.Projected += p
		out.Duplicates += d
	}
	return out, nil
}

func (s *Service) project(ctx context.Context, executionID int64, events []ExternalEvent) (projected, duplicates int, err error) {
	ls := &store.LockSet{Executions: []int64{executionID}}
	for _, e := range events {
		ls.ClientEvents = append(ls.ClientEvents, store.ClientEventKey{ExecutionID: executionID, ClientID: projectedClient(e)})
	}
	err = s.withExecution(ctx, executionID, ls, func(t *txn, x *execution) (err error) {
		projected, duplicates, err = t.project(x, events)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return projected, duplicates, nil
}

// project appends external events to a locked execution and applies them to
// its snapshot without deciding anything.
func (t *txn) project(x *execution, events []ExternalEvent) (projected, duplicates int, err error) {
	executionID := x.row.ExecutionID
	base, err := t.snapshot(x)
	if err != nil {
		return 0, 0, err
	}
	snap := base.Clone()
	x.snap = snap
	seen := map[string]bool{}
	for _, e := range events {
		client := projectedClient(e)
		if _, stored := t.seen[store.ClientEventKey{ExecutionID: executionID, ClientID: client}]; stored || seen[client] {
			duplicates++
			continue
		}
		seen[client] = true
		r := externalRow(e, client)
		r.ExecutionID, r.EventID, r.Seq, r.CreatedAt = executionID, t.ids.next(), x.row.LastSeq+1, t.eventTime(x)
		if t.ids.err != nil {
			return 0, 0, t.ids.err
		}
		if typ := eventtype.Canonical(e.EventType); workerTypes[typ] || serverTypes[typ] {
			r.Ignored = true // kept in the log, never folded (as appendIgnored)
		}
		t.ch.Events = append(t.ch.Events, r)
		if !r.Ignored {
			engine.Apply(snap, toEngine(r))
		}
		x.row.LastSeq, x.dirty = r.Seq, true
		projected++
	}
	return projected, duplicates, nil
}

// projectedClient is the client id an external event is stored under.
func projectedClient(e ExternalEvent) string {
	return projectedPrefix + strconv.FormatInt(e.SourceEventID, 10)
}

// externalRow is the event row of an external event: secrets redacted
// (events.md §7), the producer's id kept in meta.
func externalRow(e ExternalEvent, client string) store.Event {
	r := store.Event{ExecutionID: e.ExecutionID, EventType: e.EventType, NodeName: e.NodeName, Status: e.Status,
		Error: e.Error, WorkerID: e.WorkerID, CommandID: e.CommandID, ClientEventID: client}
	if e.Context != nil {
		r.Context = redact.Value(e.Context).(map[string]any)
	}
	meta := map[string]any{}
	if e.Meta != nil {
		// Value may return the caller's own map: clone before adding a key.
		meta = maps.Clone(redact.Value(e.Meta).(map[string]any))
	}
	meta["source_event_id"] = strconv.FormatInt(e.SourceEventID, 10)
	r.Meta = meta
	if e.Result != nil {
		r.Result = redact.Value(e.Result).(map[string]any)
	}
	return r
}
