package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/store"
)

// DrainReport counts what one scheduled run did.
type DrainReport struct {
	Published         int           `json:"published"`
	PublishFailed     int           `json:"publish_failed"`
	Expired           int           `json:"expired"`
	TimedOut          int           `json:"timed_out"`
	RetriesAnnounced  int           `json:"retries_announced"`
	ChildrenCancelled int           `json:"children_cancelled"`
	OutboxDeleted     int64         `json:"outbox_deleted"`
	OutboxPending     int64         `json:"outbox_pending"`
	OutboxLag         time.Duration `json:"-"`
	OutboxLagSeconds  float64       `json:"outbox_lag_seconds"`
}

// sweepBatch bounds the commands one sweep transaction handles.
const sweepBatch = 100

// outboxMaxDelay caps a failed publish's backoff (events.md §2).
const outboxMaxDelay = 5 * time.Minute

// Drain is the scheduled run (api.md, last section): on every shard it publishes
// the outbox, expires leases (R-L4), fails commands past their deadline (R-L2),
// announces due retries, re-drives the cancel cascade of ended parents (R-R10),
// deletes old published rows, and measures the outbox lag. It is safe to run
// concurrently with itself: every claim uses SKIP LOCKED.
func (s *Service) Drain(ctx context.Context, maxBatch int) (*DrainReport, error) {
	if maxBatch <= 0 || maxBatch > store.OutboxMaxBatch {
		maxBatch = min(max(maxBatch, 500), store.OutboxMaxBatch)
	}
	r := &DrainReport{}
	var errs []error
	for i := range s.st.NumShards() {
		if err := s.drainShard(ctx, s.st.Shard(i), maxBatch, r); err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
		}
	}
	r.OutboxLagSeconds = r.OutboxLag.Seconds()
	s.log.InfoContext(ctx, "drain", "published", r.Published, "publish_failed", r.PublishFailed, "expired", r.Expired,
		"timed_out", r.TimedOut, "retries_announced", r.RetriesAnnounced, "children_cancelled", r.ChildrenCancelled,
		"outbox_pending", r.OutboxPending, "outbox_lag_seconds", r.OutboxLagSeconds)
	return r, errors.Join(errs...)
}

func (s *Service) drainShard(ctx context.Context, sh *store.Shard, maxBatch int, r *DrainReport) error {
	if err := s.drainOutbox(ctx, sh, maxBatch, r); err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	if err := s.sweep(ctx, sh, r); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if err := s.announceRetries(ctx, sh, r); err != nil {
		return fmt.Errorf("retries: %w", err)
	}
	orphans, err := store.ListOrphanedChildren(ctx, sh.Pool(), sweepBatch)
	if err != nil {
		return err
	}
	for _, id := range orphans {
		if err := s.Cancel(ctx, id, "the parent execution was cancelled"); err != nil && !isConflict(err) {
			return err
		}
		r.ChildrenCancelled++
	}
	n, err := store.DeletePublishedOutbox(ctx, sh.Pool(), store.OutboxRetention, 10000)
	if err != nil {
		return err
	}
	r.OutboxDeleted += n
	pending, err := store.PendingOutboxCount(ctx, sh.Pool())
	if err != nil {
		return err
	}
	r.OutboxPending += pending
	lag, err := store.OutboxLag(ctx, sh.Pool())
	if err != nil {
		return err
	}
	r.OutboxLag = max(r.OutboxLag, lag)
	return nil
}

// drainOutbox publishes rows the post-commit publisher did not (R-A6).
func (s *Service) drainOutbox(ctx context.Context, sh *store.Shard, maxBatch int, r *DrainReport) error {
	if s.cfg.Publisher == nil {
		return nil
	}
	msgs, err := store.ClaimOutbox(ctx, sh.Pool(), maxBatch)
	if err != nil {
		return err
	}
	var done []int64
	for _, m := range msgs {
		if err := s.cfg.Publisher.Publish(ctx, m.Subject, m.MsgID, m.Payload); err != nil {
			r.PublishFailed++
			if _, merr := store.MarkOutboxFailed(ctx, sh.Pool(), m.OutboxID, err.Error(), outboxMaxDelay); merr != nil {
				return merr
			}
			continue
		}
		done = append(done, m.OutboxID)
	}
	if len(done) > 0 {
		if _, err := store.MarkOutboxPublished(ctx, sh.Pool(), done); err != nil {
			return err
		}
	}
	r.Published += len(done)
	return nil
}

// sweep expires lapsed leases and fails commands past their deadline, each
// through the engine, which decides retries (R-L3, R-L4, R-L2).
func (s *Service) sweep(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	type pass struct {
		lock  func(store.Querier) ([]store.Command, error)
		apply func(*txn, *execution, *command) error
		count *int
	}
	passes := []pass{
		{
			lock:  func(q store.Querier) ([]store.Command, error) { return store.LockExpiredLeases(ctx, q, sweepBatch) },
			apply: func(t *txn, x *execution, k *command) error { return t.expire(x, k) },
			count: &r.Expired,
		},
		{
			lock: func(q store.Querier) ([]store.Command, error) {
				return store.LockPastDeadline(ctx, q, s.grace, sweepBatch)
			},
			apply: func(t *txn, x *execution, k *command) error {
				c := k.row
				_, _, err := t.advance(x, store.Event{EventType: engine.EvCommandFailed, NodeName: c.Step, Status: "FAILED",
					CommandID: c.CommandID, WorkerID: c.WorkerID,
					Error: fmt.Sprintf("the command ran past its timeout of %ds", c.TimeoutSeconds),
					Meta:  map[string]any{"command_id": c.CommandID, "attempt": int64(c.Attempt), "class": engine.ClassTimeout}})
				return err
			},
			count: &r.TimedOut,
		},
	}
	for _, p := range passes {
		for {
			n, err := s.sweepOnce(ctx, sh, p.lock, p.apply)
			if err != nil {
				return err
			}
			*p.count += n
			if n < sweepBatch {
				break
			}
		}
	}
	return nil
}

// sweepOnce runs one sweep pass's batch in one transaction.
func (s *Service) sweepOnce(ctx context.Context, sh *store.Shard, lock func(store.Querier) ([]store.Command, error),
	apply func(*txn, *execution, *command) error) (int, error) {
	t, err := s.begin(ctx, sh)
	if err != nil {
		return 0, err
	}
	defer t.rollback()
	cmds, err := lock(t.tx)
	if err != nil || len(cmds) == 0 {
		return 0, err
	}
	// The executions are locked already; this reads them and the clock.
	ls := &store.LockSet{}
	for _, c := range cmds {
		if !slices.Contains(ls.Executions, c.ExecutionID) {
			ls.Executions = append(ls.Executions, c.ExecutionID)
		}
	}
	slices.Sort(ls.Executions)
	if err := t.lock(ls); err != nil {
		return 0, err
	}
	for _, c := range cmds {
		k := t.adoptCommand(c)
		x, err := t.execution(c.ExecutionID)
		if err != nil {
			return 0, err
		}
		if err := apply(t, x, k); err != nil {
			return 0, err
		}
	}
	return len(cmds), t.commit()
}

// announceRetries re-publishes retries whose backoff ended, so a worker that gave
// up after a 429 hears of them again; JetStream drops duplicates (msg id
// command:attempt).
func (s *Service) announceRetries(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	if s.cfg.Publisher == nil {
		return nil
	}
	t, err := s.begin(ctx, sh)
	if err != nil {
		return err
	}
	defer t.rollback()
	cmds, err := store.LockDueRetries(ctx, t.tx, sweepBatch)
	if err != nil {
		return err
	}
	execs := map[int64]store.Execution{}
	for _, c := range cmds {
		row, ok := execs[c.ExecutionID]
		if !ok {
			if row, err = store.GetExecution(ctx, t.tx, c.ExecutionID); err != nil {
				return err
			}
			execs[c.ExecutionID] = row
		}
		m := s.notification(row, c.CommandID, c.IssuedEventID, c.Step, c.Attempt)
		if err := s.cfg.Publisher.Publish(ctx, m.Subject, m.MsgID, m.Payload); err != nil {
			return fmt.Errorf("announce retry of %s: %w", c.CommandID, err)
		}
		r.RetriesAnnounced++
	}
	return t.tx.Commit(ctx)
}
