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
	// By command id: a transaction withTx runs again counts each once.
	late := map[string]bool{}
	ended := 0
	err := s.sweepBatches(ctx, sh,
		func(q store.Querier) ([]store.Command, error) {
			return store.LockEndedLeases(ctx, q, s.limits, sweepBatch)
		},
		func(t *txn, x *execution, k *command) error {
			timedOut, err := t.endLease(x, k)
			if timedOut {
				late[k.row.CommandID] = true
			}
			return err
		},
		&ended)
	r.Expired += max(ended-len(late), 0)
	r.TimedOut += len(late)
	return err
}
