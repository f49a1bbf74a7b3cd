package controlplane

import (
	"context"

	"github.com/noetl-go/noetl/shared/store"
)

// cleanOutbox is the cleanup job: it deletes published outbox rows older than
// store.OutboxRetention, a bounded batch per run.
func (s *Service) cleanOutbox(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	n, err := store.DeletePublishedOutbox(ctx, sh.Pool(), store.OutboxRetention, 10000)
	if err != nil {
		return err
	}
	r.OutboxDeleted += n
	return nil
}
