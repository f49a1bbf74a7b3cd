package controlplane

import (
	"context"
	"fmt"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
)

// expireLeases is the lease job: a held command whose lease ended
// (lifecycle.Ended: its holder stopped heartbeating, or its deadline and
// grace passed, heartbeats or not) leaves its holder; past its deadline it
// fails with class timeout, otherwise it expires, and the engine applies the
// step's retry policy (txn.endLease; R-L2, R-L3).
//
// An execution the server cannot load (its catalog entry no longer parses,
// its snapshot does not decode) cannot retry or fail the step: it is failed
// without the engine, saying why, rather than met again at every run.
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
		unloadable: func(t *txn, x *execution, k *command) error {
			msg := fmt.Sprintf("the lease of command %s (step %s) ended and the execution cannot be loaded to retry or fail the step: %v; "+
				"the drain failed it: start a new execution (of a version of the playbook that parses, if this one's catalog entry no longer does)",
				k.row.CommandID, k.row.Step, x.unloadable)
			s.log.WarnContext(ctx, "failing an execution the drain cannot load", "execution_id", x.row.ExecutionID,
				"command_id", k.row.CommandID, "error", x.unloadable.Error())
			return t.endUnloadable(x, eventtype.PlaybookFailed, lifecycle.ExecutionFailed, map[string]any{"error": msg})
		},
		// An unloadable execution's commands (cancelled) count as expired.
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
