package controlplane

import (
	"context"
	"fmt"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/store"
)

// failPastDeadline is the deadline job: a command running past its timeout
// (plus the grace) fails with class timeout, and the engine decides a retry
// (R-L2).
func (s *Service) failPastDeadline(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	return s.sweepBatches(ctx, sh,
		func(q store.Querier) ([]store.Command, error) {
			return store.LockPastDeadline(ctx, q, s.grace, s.lease, sweepBatch)
		},
		func(t *txn, x *execution, k *command) error {
			c := k.row
			_, _, err := t.advance(x, store.Event{EventType: engine.EvCommandFailed, NodeName: c.Step, Status: "FAILED",
				CommandID: c.CommandID, WorkerID: c.WorkerID,
				Error: fmt.Sprintf("the command ran past its timeout of %ds", c.TimeoutSeconds),
				Meta:  map[string]any{"command_id": c.CommandID, "attempt": int64(c.Attempt), "class": engine.ClassTimeout}})
			return err
		},
		&r.TimedOut)
}
