package controlplane

import (
	"context"

	"github.com/noetl-go/noetl/shared/store"
)

// expireLeases is the lease-expiry job: commands whose worker stopped
// heartbeating lose their lease, and the engine decides a retry or the
// failure (R-L3, R-L4).
func (s *Service) expireLeases(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	return s.sweepBatches(ctx, sh,
		func(q store.Querier) ([]store.Command, error) {
			return store.LockExpiredLeases(ctx, q, s.lease, sweepBatch)
		},
		func(t *txn, x *execution, k *command) error { return t.expire(x, k) },
		&r.Expired)
}
