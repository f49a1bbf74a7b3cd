package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/noetl-go/noetl/shared/store"
)

// DrainReport counts what one scheduled run did.
type DrainReport struct {
	Published         int           `json:"published"`
	PublishFailed     int           `json:"publish_failed"`
	Expired           int           `json:"expired"`
	TimedOut          int           `json:"timed_out"`
	Reannounced       int           `json:"reannounced"`
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
// the outbox, enters into the log staged events no transaction came for
// (job_staged_events.go), ends leases that ended (R-L4; past the deadline, R-L2), announces
// again pending commands nobody claimed, re-drives the cancel cascade of ended parents (R-R10),
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
	if len(errs) > 0 {
		return r, errors.Join(errs...) // the caller says it failed, once per outage
	}
	// A run that did nothing says so only at debug: it runs every minute
	// (EventBridge), or every few seconds locally, outages included.
	level := slog.LevelDebug
	if r.Published+r.PublishFailed+r.Expired+r.TimedOut+r.Reannounced+r.ChildrenCancelled > 0 || r.OutboxDeleted > 0 {
		level = slog.LevelInfo
	}
	s.log.Log(ctx, level, "drain", "published", r.Published, "publish_failed", r.PublishFailed, "expired", r.Expired,
		"timed_out", r.TimedOut, "reannounced", r.Reannounced, "children_cancelled", r.ChildrenCancelled,
		"outbox_pending", r.OutboxPending, "outbox_lag_seconds", r.OutboxLagSeconds)
	return r, nil
}

// drainJob is one of the scheduled run's jobs; each lives in its own file,
// named by the job (job_*.go), and runs on one shard.
type drainJob struct {
	name string
	run  func(ctx context.Context, sh *store.Shard, r *DrainReport) error
}

// drainJobs are the jobs of a scheduled run, in the order they run on each
// shard: publish first (the oldest duty, R-A6), then the sweeps whose
// transitions announce new work, then the cascade, then cleanup and the
// measurement of what is left.
func (s *Service) drainJobs(maxBatch int) []drainJob {
	return []drainJob{
		{"outbox", func(ctx context.Context, sh *store.Shard, r *DrainReport) error {
			return s.publishOutbox(ctx, sh, maxBatch, r)
		}},
		{"staged events", s.settleStaged},
		{"leases", s.expireLeases},
		{"announce again", s.announceAgain},
		{"orphans", s.cancelOrphans},
		{"cleanup", s.cleanOutbox},
		{"outbox stats", s.measureOutbox},
	}
}

func (s *Service) drainShard(ctx context.Context, sh *store.Shard, maxBatch int, r *DrainReport) error {
	for _, j := range s.drainJobs(maxBatch) {
		if err := j.run(ctx, sh, r); err != nil {
			return fmt.Errorf("%s: %w", j.name, err)
		}
	}
	return nil
}

// sweepBatches runs sweepOnce until a batch comes back short, counting the
// commands handled.
func (s *Service) sweepBatches(ctx context.Context, sh *store.Shard, lock func(store.Querier) ([]store.Command, error),
	apply func(*txn, *execution, *command) error, count *int) error {
	for {
		n, err := s.sweepOnce(ctx, sh, lock, apply)
		if err != nil {
			return err
		}
		*count += n
		if n < sweepBatch {
			return nil
		}
	}
}

// sweepOnce runs one sweep batch in one transaction: it locks the commands
// lock picks (SKIP LOCKED, executions first, R-L5), then applies apply to
// each under its execution's lock.
func (s *Service) sweepOnce(ctx context.Context, sh *store.Shard, lock func(store.Querier) ([]store.Command, error),
	apply func(*txn, *execution, *command) error) (int, error) {
	n := 0
	err := s.withTx(ctx, sh, nil, func(t *txn) error {
		cmds, err := lock(t.tx)
		if err != nil {
			return err
		}
		if len(cmds) == 0 {
			return errDiscard
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
			return err
		}
		for _, c := range cmds {
			k := t.adoptCommand(c)
			x, err := t.execution(c.ExecutionID)
			if err != nil {
				return err
			}
			if err := apply(t, x, k); err != nil {
				return err
			}
		}
		n = len(cmds)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
