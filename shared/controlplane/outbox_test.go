package controlplane_test

import (
	"testing"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/ids"
	"github.com/noetl-go/noetl/shared/replay"
	"github.com/noetl-go/noetl/shared/store"
)

// TestClaimOutboxSharesShards: a claim smaller than the backlog takes rows
// from every shard, then fills up from the shards that have more.
func TestClaimOutboxSharesShards(t *testing.T) {
	s := newStack(t)
	s.register(t, threeSteps)
	s.nc.Close() // publishes fail: rows stay PENDING
	s.st.PinShard(0)
	for range 4 {
		if _, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"}); err != nil {
			t.Fatal(err)
		}
	}
	s.st.PinShard(1)
	if _, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"}); err != nil {
		t.Fatal(err)
	}
	for i := range s.st.NumShards() {
		if _, err := s.st.Shard(i).Pool().Exec(s.ctx, `UPDATE outbox SET created_at = now() - interval '1 minute'`); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.svc.OutboxPendingCount(s.ctx); err != nil || n != 5 {
		t.Fatalf("pending %d %v", n, err)
	}
	rows, err := s.svc.ClaimOutbox(s.ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || ids.ShardOf(rows[0].OutboxID) == ids.ShardOf(rows[1].OutboxID) {
		t.Fatalf("claim 2 of a 4+1 backlog: %d rows (%v)", len(rows), rows)
	}
	rows, err = s.svc.ClaimOutbox(s.ctx, 10)
	if err != nil || len(rows) != 3 {
		t.Fatalf("claim the rest: %d rows %v", len(rows), err)
	}
	if _, err := s.svc.ClaimOutbox(s.ctx, 0); !isKind(err, controlplane.ErrInvalid) {
		t.Fatalf("limit 0: %v", err)
	}
	if n, err := s.svc.MarkOutboxPublished(s.ctx, []int64{rows[0].OutboxID, rows[1].OutboxID, ids.Compose(1<<40, 7)}); err != nil || n != 2 {
		t.Fatalf("mark published %d %v", n, err)
	}
	st, err := s.svc.OutboxStats(s.ctx)
	if err != nil || st.Pending != 3 || st.Lag.Seconds() < 59 {
		t.Fatalf("stats %+v %v", st, err)
	}
	if _, err := s.svc.MarkOutboxFailed(s.ctx, ids.Compose(1<<40, 1), "x", 0, 0); !isKind(err, controlplane.ErrNotFound) {
		t.Fatalf("unknown row: %v", err)
	}
	if _, err := s.svc.MarkOutboxFailed(s.ctx, rows[0].OutboxID, "x", 0, 0); !isKind(err, controlplane.ErrConflict) {
		t.Fatalf("published row: %v", err)
	}
}

// TestProjectIsIdempotentAndConsistent: projected events take the next seq
// numbers under the lock, fold into the snapshot (replay verify agrees), and
// a re-post is a duplicate.
func TestProjectIsIdempotentAndConsistent(t *testing.T) {
	s := newStack(t)
	s.register(t, threeSteps)
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	if err != nil {
		t.Fatal(err)
	}
	ext := func(executionID, source int64, typ string) controlplane.ExternalEvent {
		return controlplane.ExternalEvent{SourceEventID: source, Event: store.Event{ExecutionID: executionID, EventType: typ}}
	}
	evs := []controlplane.ExternalEvent{ext(st.ExecutionID, 1, "stage.opened"), ext(st.ExecutionID, 2, "frame.started"),
		ext(st.ExecutionID, 2, "frame.started")}
	evs[0].Meta = map[string]any{"stage_id": "s"}
	p, err := s.svc.Project(s.ctx, evs)
	if err != nil || p.Projected != 2 || p.Duplicates != 1 {
		t.Fatalf("project: %+v %v", p, err)
	}
	if evs[0].Meta["source_event_id"] != nil {
		t.Fatal("Project changed the caller's meta")
	}
	p, err = s.svc.Project(s.ctx, evs)
	if err != nil || p.Projected != 0 || p.Duplicates != 3 {
		t.Fatalf("re-project: %+v %v", p, err)
	}
	v := s.execution(t, st.ExecutionID)
	types := s.eventTypes(t, st.ExecutionID)
	if int64(len(types)) != v.Row.LastSeq || types[len(types)-1] != "frame.started" {
		t.Fatalf("log %v, last_seq %d", types, v.Row.LastSeq)
	}
	rp, err := s.svc.Replay(s.ctx, st.ExecutionID, replay.Query{Verify: true})
	if err != nil || !rp.Verify.Consistent {
		t.Fatalf("verify after projecting: %+v %v", rp.Verify, err)
	}
	// An engine type (legacy spelling too) is kept in the log but not folded:
	// the snapshot still equals a fresh fold.
	if p, err := s.svc.Project(s.ctx, []controlplane.ExternalEvent{ext(st.ExecutionID, 3, "step_completed")}); err != nil || p.Projected != 1 {
		t.Fatalf("legacy engine type: %+v %v", p, err)
	}
	if rp, err := s.svc.Replay(s.ctx, st.ExecutionID, replay.Query{Verify: true}); err != nil || !rp.Verify.Consistent {
		t.Fatalf("verify after projecting an engine type: %+v %v", rp.Verify, err)
	}
	// NoETL's projector accepts envelopes with no log here: counted, skipped.
	p, err = s.svc.Project(s.ctx, []controlplane.ExternalEvent{ext(ids.Compose(1<<40, 0), 4, "x.y"),
		ext(0, 5, "x.y"), ext(st.ExecutionID, 6, "")})
	if err != nil || p.Skipped != 3 || p.Projected != 0 {
		t.Fatalf("unknown execution, none, no type: %+v %v", p, err)
	}
}
