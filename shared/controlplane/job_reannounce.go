package controlplane

import (
	"context"

	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/store"
)

// announceAgain is the job that announces again: a notification can be lost
// (NATS restarted without its stream, a worker took it and died before
// claiming, NoETL's worker dropped it as a repeat), so a pending command of
// any attempt that nobody claimed is announced again when
// lifecycle.ReannounceDue says, under a message id of its own
// (notify.AgainMsgID): JetStream's duplicate window, which drops repeats of
// the first announcement's id, never holds it back. Its notification goes
// through the outbox like any.
func (s *Service) announceAgain(ctx context.Context, sh *store.Shard, r *DrainReport) error {
	if s.cfg.Publisher == nil {
		return nil
	}
	return s.sweepBatches(ctx, sh, sweep{
		lock: func(q store.Querier, skip []int64, limit int) ([]store.Command, error) {
			return store.LockReannounceDue(ctx, q, s.reannounce, skip, limit)
		},
		apply: func(t *txn, x *execution, k *command) error { return t.announceAgain(x, k) },
		done:  func(cmds []store.Command) { r.Reannounced += len(cmds) },
	})
}

// announceAgain records a pending command's announcement again and queues
// its notification, published after the commit.
func (t *txn) announceAgain(x *execution, k *command) error {
	c := k.row
	t.changeCommand(c.CommandID, store.CommandChange{Status: c.Status, AnnouncedAt: t.now}, lifecycle.Announce)
	m := t.s.notification(x.row, c.CommandID, c.IssuedEventID, c.Step, c.Attempt)
	m.MsgID = notify.AgainMsgID(c.CommandID, c.Attempt, t.now)
	if m.OutboxID = t.ids.next(); t.ids.err != nil {
		return t.ids.err
	}
	t.ch.Outbox = append(t.ch.Outbox, m)
	return nil
}
