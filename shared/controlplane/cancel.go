package controlplane

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/store"
)

// Cancel ends an execution as CANCELLED with its children (dsl.md §4.11,
// R-R10): every command in flight is cancelled, then its children, each in
// its own transaction. Cancelling a cancelled execution is a no-op; a
// completed or failed one is a conflict.
func (s *Service) Cancel(ctx context.Context, id int64, reason string) error {
	out, err := s.CancelRequested(ctx, id, reason, true)
	if err != nil {
		return err
	}
	if out.Already != "" && out.Already != store.ExecutionCancelled {
		return Errorf(ErrConflict, "execution %d is already %s", id, out.Already)
	}
	return nil
}

// Cancelled is what a cancel request did.
type Cancelled struct {
	// IDs are the executions this request ended, the one asked for first,
	// then its children (depth first); empty when it had already ended.
	IDs []int64
	// Already is the status the execution had already ended with; "" when
	// this request ended it.
	Already string
}

// CancelRequested is a user's cancel (POST /api/executions/{id}/cancel):
// Cancel, except that an execution that already ended is no error (Already
// says how it ended, as NoETL answers), and cascade false leaves its children
// running; the cancel event records it, so the drain's orphan job leaves them
// too (store.CascadeKey).
func (s *Service) CancelRequested(ctx context.Context, id int64, reason string, cascade bool) (Cancelled, error) {
	if reason == "" {
		reason = "cancelled by request"
	}
	ctxv := map[string]any{"reason": reason}
	if !cascade {
		ctxv[store.CascadeKey] = false
	}
	sh, err := s.st.ShardFor(id)
	if err != nil {
		return Cancelled{}, Errorf(ErrNotFound, "execution %d not found", id)
	}
	prior, err := s.endTx(ctx, sh, id, eventtype.PlaybookCancelled, store.ExecutionCancelled, ctxv)
	if err != nil {
		return Cancelled{}, err
	}
	out := Cancelled{Already: prior}
	if prior == "" {
		s.log.InfoContext(ctx, "execution ended by request", "execution_id", id, "status", store.ExecutionCancelled, "cascade", cascade)
		out.IDs = []int64{id}
	}
	if !cascade {
		return out, nil
	}
	// A repeated cancel re-drives the cascade of one that failed part way.
	if prior == "" || prior == store.ExecutionCancelled {
		children, err := s.cancelChildren(ctx, sh, id)
		out.IDs = append(out.IDs, children...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
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
	sh, err := s.st.ShardFor(id)
	if err != nil {
		return Errorf(ErrNotFound, "execution %d not found", id)
	}
	prior, err := s.endTx(ctx, sh, id, typ, status, ctxv)
	if err != nil {
		return err
	}
	if prior != "" {
		return Errorf(ErrConflict, "execution %d is already %s", id, prior)
	}
	s.log.InfoContext(ctx, "execution ended by request", "execution_id", id, "status", status)
	_, err = s.cancelChildren(ctx, sh, id)
	return err
}

// endTx writes the terminal event and cancels the execution's commands in one
// transaction; an execution that already ended is left as it is, and prior
// says how it ended ("" when this call ended it).
func (s *Service) endTx(ctx context.Context, sh *store.Shard, id int64, typ, status string, ctxv map[string]any) (string, error) {
	prior := ""
	err := s.withTx(ctx, sh, &store.LockSet{Executions: []int64{id}}, func(t *txn) error {
		x, err := t.execution(id)
		if err != nil {
			return err
		}
		if terminal(x.row.Status) {
			prior = x.row.Status
			return errDiscard
		}
		if _, _, err := t.advance(x, store.Event{EventType: typ, Status: status, Context: ctxv}); err != nil {
			return err
		}
		// The command table is the truth: cancel whatever the snapshot did not know.
		_, err = store.CancelActiveCommands(ctx, t.tx, id)
		return err
	})
	return prior, err
}

// cancelChildren cancels the running children of an execution, and theirs,
// returning the ids it ended; they live on their parent's shard (R-I3). A
// failure here is retried by the drain.
func (s *Service) cancelChildren(ctx context.Context, sh *store.Shard, parent int64) ([]int64, error) {
	var ended []int64
	f := store.ExecutionFilter{ParentExecutionID: parent, Limit: 1000}
	for {
		page, err := store.ListExecutions(ctx, sh.Pool(), f)
		if err != nil {
			return ended, err
		}
		for _, c := range page {
			if terminal(c.Status) {
				continue
			}
			out, err := s.CancelRequested(ctx, c.ExecutionID, "the parent execution ended", true)
			ended = append(ended, out.IDs...)
			if err != nil {
				return ended, err
			}
		}
		if len(page) < f.Limit {
			return ended, nil
		}
		cur := page[len(page)-1].Cursor()
		f.After = &cur
	}
}

// MaxIdleCancels bounds the executions one cleanup request lists or cancels;
// a larger backlog takes more requests.
const MaxIdleCancels = 1000

// CancelIdle is POST /api/executions/cleanup: the running executions nothing
// moved for idle (store.ListIdle), oldest id first, up to MaxIdleCancels;
// unless dryRun, each is cancelled with its children. It returns those it
// found (dry run) or ended, their children included.
func (s *Service) CancelIdle(ctx context.Context, idle time.Duration, dryRun bool) ([]int64, error) {
	before := time.Now().Add(-idle)
	var found []int64
	for i := range s.st.NumShards() {
		ids, err := store.ListIdle(ctx, s.st.Shard(i).Pool(), before, MaxIdleCancels-len(found))
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		found = append(found, ids...)
		if len(found) >= MaxIdleCancels {
			break
		}
	}
	slices.Sort(found)
	if dryRun {
		return found, nil
	}
	reason := fmt.Sprintf("cleaned up: nothing moved it for %s", idle)
	var ended []int64
	for _, id := range found {
		// A child listed after its parent was ended with it: no repeat.
		out, err := s.CancelRequested(ctx, id, reason, true)
		ended = append(ended, out.IDs...)
		if err != nil {
			return ended, err
		}
	}
	return ended, nil
}
