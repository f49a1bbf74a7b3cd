package controlplane

import (
	"context"

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
	for _, id := range orphans {
		if err := s.Cancel(ctx, id, "the parent execution was cancelled"); err != nil && !isConflict(err) {
			return err
		}
		r.ChildrenCancelled++
	}
	return nil
}
