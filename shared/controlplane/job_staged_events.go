package controlplane

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/noetl-go/noetl/shared/store"
)

// DefaultStagedGrace is Config.StagedGrace's default: how long a staged
// event waits for its execution's next transaction (its command's
// command.completed, most often) before the drain enters it into the log.
const DefaultStagedGrace = time.Minute

// settleStaged is the staged-events job: an event staged without the lock
// (stage) is entered into the log by its execution's next transaction; when
// none has come within Config.StagedGrace (the execution ended as it was staged, or
// its worker stopped before its lease ran out), this job runs one, a bounded
// batch of executions per run.
func (s *Service) settleStaged(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	ids, err := store.StagedExecutions(ctx, sh.Pool(), s.cfg.StagedGrace, sweepBatch)
	if err != nil {
		return err
	}
	// One execution that fails (one the server cannot load) does not hold
	// back the others: each is its own transaction, its error kept.
	var errs []error
	for _, id := range ids {
		// The lock enters them (txn.settle); nothing else is done.
		err := s.withExecution(ctx, id, nil, func(*txn, *execution) error { return nil })
		switch {
		case err == nil, errors.Is(err, ErrNotFound):
		case store.Transient(err) || ctx.Err() != nil:
			return errors.Join(append(errs, err)...)
		default:
			errs = append(errs, fmt.Errorf("execution %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
