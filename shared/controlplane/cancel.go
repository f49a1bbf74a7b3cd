package controlplane

import (
	"context"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/store"
)

// Cancel ends an execution as CANCELLED (dsl.md §4.11, R-R10): every command in
// flight is cancelled, then its children, each in its own transaction.
// Cancelling a cancelled execution is a no-op; a completed or failed one is a
// conflict.
func (s *Service) Cancel(ctx context.Context, id int64, reason string) error {
	if reason == "" {
		reason = "cancelled by request"
	}
	ctxv := map[string]any{"reason": reason}
	return s.end(ctx, id, eventtype.PlaybookCancelled, store.ExecutionCancelled, ctxv, true)
}

// Finalize forces a terminal status (an operator's action): like cancel for
// commands and children. status is COMPLETED or FAILED.
func (s *Service) Finalize(ctx context.Context, id int64, status, errMsg string) error {
	var typ string
	switch status {
	case store.ExecutionCompleted:
		typ = eventtype.PlaybookCompleted
	case store.ExecutionFailed:
		typ = eventtype.PlaybookFailed
	default:
		return Errorf(ErrInvalid, "status: expected COMPLETED or FAILED, got %q", status)
	}
	ctxv := map[string]any{"forced": true}
	if errMsg != "" {
		ctxv["error"] = errMsg
	}
	return s.end(ctx, id, typ, status, ctxv, false)
}

func (s *Service) end(ctx context.Context, id int64, typ, status string, ctxv map[string]any, idempotent bool) error {
	sh, err := s.st.ShardFor(id)
	if err != nil {
		return Errorf(ErrNotFound, "execution %d not found", id)
	}
	changed, err := s.endTx(ctx, sh, id, typ, status, ctxv, idempotent)
	if err != nil {
		return err
	}
	if changed {
		s.log.InfoContext(ctx, "execution ended by request", "execution_id", id, "status", status)
	}
	return s.cancelChildren(ctx, sh, id)
}

// endTx writes the terminal event and cancels the execution's commands in one
// transaction; changed is false for an idempotent repeat.
func (s *Service) endTx(ctx context.Context, sh *store.Shard, id int64, typ, status string, ctxv map[string]any, idempotent bool) (bool, error) {
	changed := false
	err := s.withTx(ctx, sh, &store.LockSet{Executions: []int64{id}}, func(t *txn) error {
		x, err := t.execution(id)
		if err != nil {
			return err
		}
		if terminal(x.row.Status) {
			if idempotent && x.row.Status == status {
				return errDiscard
			}
			return Errorf(ErrConflict, "execution %d is already %s", id, x.row.Status)
		}
		if _, _, err := t.advance(x, store.Event{EventType: typ, Status: status, Context: ctxv}); err != nil {
			return err
		}
		// The command table is the truth: cancel whatever the snapshot did not know.
		if _, err := store.CancelActiveCommands(ctx, t.tx, id); err != nil {
			return err
		}
		changed = true
		return nil
	})
	return changed, err
}

// cancelChildren cancels the running children of an execution; they live on
// their parent's shard (R-I3). A failure here is retried by the drain.
func (s *Service) cancelChildren(ctx context.Context, sh *store.Shard, parent int64) error {
	f := store.ExecutionFilter{ParentExecutionID: parent, Limit: 1000}
	for {
		page, err := store.ListExecutions(ctx, sh.Pool(), f)
		if err != nil {
			return err
		}
		for _, c := range page {
			if terminal(c.Status) {
				continue
			}
			if err := s.Cancel(ctx, c.ExecutionID, "the parent execution ended"); err != nil && !isConflict(err) {
				return err
			}
		}
		if len(page) < f.Limit {
			return nil
		}
		cur := page[len(page)-1].Cursor()
		f.After = &cur
	}
}
