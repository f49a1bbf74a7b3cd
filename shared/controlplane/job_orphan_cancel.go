package controlplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/noetl-go/noetl/shared/store"
)

// cancelOrphans is the orphan-cancel job: it re-drives the cancel cascade of
// ended parents (R-R10) for children cancelChildren missed (a failure after
// the parent's commit).
func (s *Service) cancelOrphans(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	orphans, err := store.ListOrphanedChildren(ctx, sh.Pool(), sweepBatch)
	if err != nil {
		return err
	}
	// One child that fails does not hold back the others: each is its own
	// transaction, its error kept.
	var errs []error
	for _, id := range orphans {
		err := s.Cancel(ctx, id, "the parent execution was cancelled")
		switch {
		case err == nil, isConflict(err):
			r.ChildrenCancelled++
		case store.Transient(err) || ctx.Err() != nil:
			return errors.Join(append(errs, err)...)
		default:
			errs = append(errs, fmt.Errorf("execution %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
