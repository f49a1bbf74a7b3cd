package controlplane

import (
	"context"

	"github.com/noetl-go/noetl/shared/store"
)

// cleanOutbox is the cleanup job: it deletes published outbox rows older than
// store.OutboxRetention and event requests' Idempotency-Keys older than
// store.RequestRetention, in batches until one comes back short (announcing
// again adds a row a minute for every pending command nobody claims, without
// a bound a run: a bound here would let the table outgrow the job); once per
// run (on shard 0) also the cluster's credential reads older than
// store.CredentialReadRetention.
func (s *Service) cleanOutbox(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	n, err := deleteBatches(func(limit int) (int64, error) {
		return store.DeletePublishedOutbox(ctx, sh.Pool(), store.OutboxRetention, limit)
	})
	r.OutboxDeleted += n
	if err != nil {
		return err
	}
	if _, err := deleteBatches(func(limit int) (int64, error) {
		return store.DeleteOldRequests(ctx, sh.Pool(), store.RequestRetention, limit)
	}); err != nil {
		return err
	}
	if sh.Index() == 0 {
		if _, err := deleteBatches(func(limit int) (int64, error) {
			return store.DeleteOldCredentialReads(ctx, s.st.Cluster(), store.CredentialReadRetention, limit)
		}); err != nil {
			return err
		}
	}
	return nil
}

// cleanupBatch is how many rows one delete statement takes: each batch is
// its own short statement, so no lock is held long.
const cleanupBatch = 10000

// deleteBatches runs del until a batch comes back short, and returns how
// many rows it deleted in all.
func deleteBatches(del func(limit int) (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := del(cleanupBatch)
		total += n
		if err != nil || n < cleanupBatch {
			return total, err
		}
	}
}
