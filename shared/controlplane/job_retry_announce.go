package controlplane

import (
	"context"
	"fmt"

	"github.com/noetl-go/noetl/shared/store"
)

// announceRetries is the retry-announcement job: it re-publishes retries whose backoff ended, so a worker that gave
// up after a 429 hears of them again; JetStream drops duplicates (msg id
// command:attempt).
func (s *Service) announceRetries(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	if s.cfg.Publisher == nil {
		return nil
	}
	// The rows stay locked while their notifications go out, so two runs
	// do not announce the same retry; nothing is written.
	announced := 0
	err := s.withTx(ctx, sh, nil, func(t *txn) error {
		announced = 0 // from scratch: withTx may run this again
		cmds, err := store.LockDueRetries(ctx, t.tx, sweepBatch)
		if err != nil {
			return err
		}
		execs := map[int64]store.Execution{}
		for _, c := range cmds {
			row, ok := execs[c.ExecutionID]
			if !ok {
				if row, err = store.GetExecution(ctx, t.tx, c.ExecutionID); err != nil {
					return err
				}
				execs[c.ExecutionID] = row
			}
			m := s.notification(row, c.CommandID, c.IssuedEventID, c.Step, c.Attempt)
			if err := s.cfg.Publisher.Publish(ctx, m.Subject, m.MsgID, m.Payload); err != nil {
				return fmt.Errorf("announce retry of %s: %w", c.CommandID, err)
			}
			announced++
		}
		return nil
	})
	r.RetriesAnnounced += announced
	return err
}
