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
//
// An execution the server cannot load (its catalog entry no longer parses,
// its snapshot does not decode) fails its own transaction and is left out of
// the run (sweepBatches), its error reported; it is not failed here: a
// server of an older version, or one reading a stale catalog, would fail
// executions the others can run. An operator ends it (Cancel, Finalize).
func (s *Service) expireLeases(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	// By command id: a transaction withTx runs again sets each again.
	late := map[string]bool{}
	return s.sweepBatches(ctx, sh, sweep{
		lock: func(q store.Querier, skip []int64, limit int) ([]store.Command, error) {
			return store.LockEndedLeases(ctx, q, s.limits, skip, limit)
		},
		apply: func(t *txn, x *execution, k *command) error {
			timedOut, err := t.endLease(x, k)
			late[k.row.CommandID] = timedOut
			return err
		},
		done: func(cmds []store.Command) {
			for _, c := range cmds {
				if late[c.CommandID] {
					r.TimedOut++
				} else {
					r.Expired++
				}
			}
		},
	})
}
