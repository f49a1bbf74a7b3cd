package controlplane

import (
	"context"
	"errors"
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
	for _, id := range ids {
		// The lock enters them (txn.settle); nothing else is done.
		err := s.withExecution(ctx, id, nil, func(*txn, *execution) error { return nil })
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}
