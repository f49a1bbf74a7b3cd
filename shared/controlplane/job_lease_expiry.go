package controlplane

import (
	"context"

	"github.com/noetl-go/noetl/shared/store"
)

// expireLeases is the lease job: a held command whose lease ended
// (lifecycle.Ended: its holder stopped heartbeating, or its deadline and
// grace passed, heartbeats or not) leaves its holder; past its deadline it
// fails with class timeout, otherwise it expires, and the engine applies the
// step's retry policy (txn.endLease; R-L2, R-L3).
func (s *Service) expireLeases(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	timedOut := 0
	err := s.sweepBatches(ctx, sh,
		func(q store.Querier) ([]store.Command, error) {
			return store.LockEndedLeases(ctx, q, s.limits, sweepBatch)
		},
		func(t *txn, x *execution, k *command) error {
			late, err := t.endLease(x, k)
			if late {
				timedOut++
			}
			return err
		},
		&r.Expired)
	// The batches counted every ended lease; those past their deadline are
	// reported apart. A batch that failed counted nothing.
	r.Expired -= timedOut
	r.TimedOut += timedOut
	return err
}
