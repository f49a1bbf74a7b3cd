package controlplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
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

// drainShard runs every job on the shard, each whatever the others did: one
// that fails (an execution it cannot handle, say) must not stop the others,
// run after run. Their errors are returned together, and each job's last one
// is kept for Doctor (drainFailures).
func (s *Service) drainShard(ctx context.Context, sh *store.Shard, maxBatch int, r *DrainReport) error {
	var errs []error
	for _, j := range s.drainJobs(maxBatch) {
		err := j.run(ctx, sh, r)
		s.drained.record(sh.Index(), j.name, err, time.Now())
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", j.name, err))
		}
	}
	return errors.Join(errs...)
}

// sweep is one of the drain's sweeps over commands.
type sweep struct {
	// lock locks up to limit commands due (SKIP LOCKED, executions first,
	// R-L5), leaving out the executions of skip.
	lock func(q store.Querier, skip []int64, limit int) ([]store.Command, error)
	// apply handles one locked command under its execution's lock.
	apply func(*txn, *execution, *command) error
	// done hears the commands of each transaction that committed.
	done func([]store.Command)
}

// sweepBatches runs sweepOnce until a batch comes back short. A batch that
// fails is run again one execution per transaction: an execution that fails
// alone is left out for the rest of the run, its error returned with the
// others, so the healthy ones progress (the oldest rows come first every
// run: one bad row would otherwise hold back the whole shard for ever).
func (s *Service) sweepBatches(ctx context.Context, sh *store.Shard, sw sweep) error {
	var skip []int64
	var errs []error
	failed := func(err error) error { return errors.Join(append(errs, err)...) }
	for {
		n, _, err := s.sweepOnce(ctx, sh, sw, skip, sweepBatch)
		switch {
		case err == nil && n < sweepBatch:
			return errors.Join(errs...)
		case err == nil:
			continue
		case store.Transient(err) || ctx.Err() != nil:
			return failed(err) // the database is away: one by one would only fail again
		}
		s.log.WarnContext(ctx, "a drain sweep's batch failed; retrying its executions one by one",
			"shard", sh.Index(), "error", err.Error())
		for range sweepBatch {
			n, execs, err := s.sweepOnce(ctx, sh, sw, skip, 1)
			if err != nil {
				if store.Transient(err) || ctx.Err() != nil || len(execs) == 0 {
					return failed(err)
				}
				skip = append(skip, execs...)
				errs = append(errs, fmt.Errorf("execution %d: %w", execs[0], err))
				continue
			}
			if n == 0 {
				// Nothing due, or the oldest one's execution is held by a
				// live transaction (SKIP LOCKED): the next run goes on.
				// Batches again could meet the failing one again, for
				// as long as that transaction lasts.
				return errors.Join(errs...)
			}
		}
	}
}

// sweepOnce runs one sweep batch in one transaction: it locks the commands
// sw.lock picks (SKIP LOCKED, executions first, R-L5), then applies sw.apply
// to each under its execution's lock. It returns how many it handled and
// the executions it locked (those that failed it, when it fails).
func (s *Service) sweepOnce(ctx context.Context, sh *store.Shard, sw sweep, skip []int64, limit int) (int, []int64, error) {
	var handled []store.Command
	var execs []int64
	err := s.withTx(ctx, sh, nil, func(t *txn) error {
		handled, execs = nil, nil
		cmds, err := sw.lock(t.tx, skip, limit)
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
		execs = slices.Clone(ls.Executions)
		if err := t.lock(ls); err != nil {
			return err
		}
		for _, c := range cmds {
			k := t.adoptCommand(c)
			x, err := t.execution(c.ExecutionID)
			if err != nil {
				return err
			}
			if err := sw.apply(t, x, k); err != nil {
				return err
			}
		}
		handled = cmds
		return nil
	})
	if err != nil {
		return 0, execs, err
	}
	if sw.done != nil && len(handled) > 0 {
		sw.done(handled)
	}
	return len(handled), execs, nil
}

// drainFailures keeps each drain job's last error per shard, as this
// process ran it, until the job next succeeds: Doctor says the drain runs
// and fails rather than asking whether it runs.
type drainFailures struct {
	mu sync.Mutex
	m  map[drainJobKey]drainFailure
}

type drainJobKey struct {
	shard int
	job   string
}

type drainFailure struct {
	job string
	err string
	at  time.Time
}

func (d *drainFailures) record(shard int, job string, err error, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := drainJobKey{shard, job}
	if err == nil {
		delete(d.m, key)
		return
	}
	if d.m == nil {
		d.m = map[drainJobKey]drainFailure{}
	}
	d.m[key] = drainFailure{job: job, err: err.Error(), at: at}
}

// of lists the shard's failing jobs by name.
func (d *drainFailures) of(shard int) []drainFailure {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []drainFailure
	for k, f := range d.m {
		if k.shard == shard {
			out = append(out, f)
		}
	}
	slices.SortFunc(out, func(a, b drainFailure) int { return strings.Compare(a.job, b.job) })
	return out
}
