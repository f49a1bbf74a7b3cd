package controlplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
)

// An execution's status moves with its log (the engine's fold, written back
// at commit); the requests that move it by hand are here: Cancel and
// Finalize end it, Redrive reopens an ended one.

// Cancel ends an execution as CANCELLED with its children (dsl.md §4.11,
// R-R10): every command in flight is cancelled, then its children, each in
// its own transaction. Cancelling a cancelled execution is a no-op; a
// completed or failed one is a conflict.
func (s *Service) Cancel(ctx context.Context, id int64, reason string) error {
	out, err := s.CancelRequested(ctx, id, reason, true)
	if err != nil {
		return err
	}
	if out.Already != "" && out.Already != lifecycle.ExecutionCancelled {
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
	prior, err := s.endTx(ctx, sh, id, eventtype.PlaybookCancelled, lifecycle.ExecutionCancelled, ctxv)
	if err != nil {
		return Cancelled{}, err
	}
	out := Cancelled{Already: prior}
	if prior == "" {
		s.log.InfoContext(ctx, "execution ended by request", "execution_id", id, "status", lifecycle.ExecutionCancelled, "cascade", cascade)
		out.IDs = []int64{id}
	}
	if !cascade {
		return out, nil
	}
	// A repeated cancel re-drives the cascade of one that failed part way.
	if prior == "" || prior == lifecycle.ExecutionCancelled {
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
	case lifecycle.ExecutionCompleted:
		typ = eventtype.PlaybookCompleted
	case lifecycle.ExecutionFailed:
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
// says how it ended ("" when this call ended it). One the server cannot load
// (its catalog entry no longer parses, its snapshot does not decode) is
// ended without the engine (endUnloadable): an operator can always end it.
func (s *Service) endTx(ctx context.Context, sh *store.Shard, id int64, typ, status string, ctxv map[string]any) (string, error) {
	prior := ""
	err := s.withTx(ctx, sh, nil, func(t *txn) error {
		prior = ""
		t.tolerant = true
		if err := t.lock(&store.LockSet{Executions: []int64{id}}); err != nil {
			return err
		}
		x, err := t.execution(id)
		if err != nil {
			return err
		}
		if lifecycle.ExecutionEnded(x.row.Status) {
			prior = x.row.Status
			return errDiscard
		}
		if x.unloadable != nil {
			s.log.WarnContext(ctx, "ending an execution the server cannot load, without the engine", "execution_id", id,
				"status", status, "error", x.unloadable.Error())
			return t.endUnloadable(x, typ, status, ctxv)
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

// endUnloadable ends an execution the server cannot load: its ending event
// is written as given, without the engine, the row takes its status (and
// the event's error), and its active commands are cancelled. The stored
// snapshot is kept as it was: nothing can fold it.
func (t *txn) endUnloadable(x *execution, typ, status string, ctxv map[string]any) error {
	e := store.Event{ExecutionID: x.row.ExecutionID, Seq: x.row.LastSeq + 1, EventID: t.ids.next(), EventType: typ,
		Status: status, Context: ctxv, CreatedAt: t.eventTime(x)}
	if t.ids.err != nil {
		return t.ids.err
	}
	t.ch.Events = append(t.ch.Events, e)
	x.row.LastSeq, x.row.Status, x.row.State, x.dirty = e.Seq, status, nil, true
	if msg, ok := ctxv["error"].(string); ok {
		x.row.Error = msg
	}
	_, err := store.CancelActiveCommands(t.ctx, t.tx, x.row.ExecutionID)
	return err
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
			if lifecycle.ExecutionEnded(c.Status) {
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

// Redriven is what a redrive did.
type Redriven struct {
	ExecutionID     int64
	Path            string
	Version         int
	PreviousVersion int
	PreviousStatus  string
	// Commands counts the commands the redrive issued at once.
	Commands int
	// Kept counts, per loop step resumed, the iterations kept.
	Kept map[string]int
}

// Redrive continues a FAILED or CANCELLED execution in place under version
// (0: its own), the same playbook's version or a newer one (issue 31):
// playbook.redriven is its next event, and the engine runs what did not
// complete (engine/redrive.go). A RUNNING or COMPLETED execution is a
// conflict naming its status, so a second redrive of one already redriven
// is refused, never run twice; so is a version without a step that
// completed, naming the step. The execution row moves to the version's
// catalog entry in the same transaction.
func (s *Service) Redrive(ctx context.Context, id int64, version int) (*Redriven, error) {
	if version < 0 {
		return nil, Errorf(ErrInvalid, "version: must be a version number >= 1, got %d", version)
	}
	var out *Redriven
	err := s.withExecution(ctx, id, nil, func(t *txn, x *execution) error {
		switch x.row.Status {
		case lifecycle.ExecutionFailed, lifecycle.ExecutionCancelled:
		default:
			return Errorf(ErrConflict, "execution %d is %s: only a FAILED or CANCELLED execution can be redriven", id, x.row.Status)
		}
		if version == 0 {
			version = x.row.Version
		}
		if version < x.row.Version {
			return Errorf(ErrInvalid, "version: %d is older than the execution's version %d; redrive under %d or a newer version of %s", version, x.row.Version, x.row.Version, x.row.Path)
		}
		catalogID, pb := x.row.CatalogID, x.pb
		if version != x.row.Version {
			entry, err := store.GetCatalogByPath(t.ctx, s.st.Cluster(), x.row.Path, version)
			if errors.Is(err, store.ErrNotFound) {
				return Errorf(ErrInvalid, "version: playbook %s has no version %d; register it first", x.row.Path, version)
			}
			if err != nil {
				return err
			}
			catalogID = entry.CatalogID
			if pb, err = s.playbook(t.ctx, t.tx, t.sh, catalogID); err != nil {
				return err
			}
		}
		snap, err := t.snapshot(x)
		if err != nil {
			return err
		}
		if err := engine.CheckRedrive(pb, snap); err != nil {
			return Errorf(ErrConflict, "version %d: %v", version, err)
		}
		r := engine.Redrive{Version: version, CatalogID: catalogID, PreviousVersion: x.row.Version,
			PreviousStatus: x.row.Status, Kept: map[string]engine.KeptIterations{}}
		out = &Redriven{ExecutionID: id, Path: x.row.Path, Version: version, PreviousVersion: x.row.Version,
			PreviousStatus: x.row.Status, Kept: map[string]int{}}
		for step, visit := range engine.ResumableLoops(pb, snap) {
			idx, err := store.IterationResults(t.ctx, t.tx, id, step, visit)
			if err != nil {
				return err
			}
			if len(idx) > 0 {
				r.Kept[step] = engine.KeptIterations{Visit: visit, Indexes: idx}
				out.Kept[step] = len(idx)
			}
		}
		if err := s.fillEntries(t, id, snap, &r); err != nil {
			return err
		}
		x.pb, x.row.CatalogID, x.row.Version = pb, catalogID, version
		x.run = runOf(x.row)
		res, _, err := t.advance(x, toStore(id, r.Event()))
		if err != nil {
			return err
		}
		out.Commands = len(res.Commands)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "execution redriven", "execution_id", id, "version", out.Version,
		"previous_version", out.PreviousVersion, "previous_status", out.PreviousStatus, "commands", out.Commands)
	return out, nil
}

// onePath refuses a bulk redrive under a version number whose executions
// are of several playbooks: the number names a version of one of them.
// Unknown ids are left to their own refusal.
func (s *Service) onePath(ctx context.Context, ids []int64) error {
	first, firstID := "", int64(0)
	for _, id := range ids {
		sh, err := s.st.ShardFor(id)
		if err != nil {
			continue
		}
		row, err := store.GetExecution(ctx, sh.Pool(), id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		switch {
		case first == "":
			first, firstID = row.Path, id
		case row.Path != first:
			return Errorf(ErrInvalid, "executions: execution %d is of playbook %s and execution %d of %s; a version names a version of one playbook: redrive each playbook's executions in a request of their own", firstID, first, id, row.Path)
		}
	}
	return nil
}

// fillEntries folds the execution's log into what a redrive needs that the
// snapshot does not keep (engine.Entries): one pass over the log, holding
// one event at a time.
func (s *Service) fillEntries(t *txn, id int64, snap *engine.Snapshot, r *engine.Redrive) error {
	e := engine.NewEntries()
	err := store.StreamEvents(t.ctx, t.tx, store.EventFilter{ExecutionID: id}, func(ev *store.Event) error {
		if !ev.Ignored {
			e.Add(toEngine(*ev))
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.Fill(r, snap)
	return nil
}

// MaxRedriveBatch bounds the executions one bulk redrive names; the bulk
// route's request (wire.RedriveManyRequest) declares the same bound, which
// TestRedriveRequests holds equal.
const MaxRedriveBatch = 100

// RedriveOutcome is one execution's answer in a bulk redrive: Redriven, or
// the refusal (Error) with its kind.
type RedriveOutcome struct {
	ExecutionID int64
	Redriven    *Redriven
	Err         error
}

// RedriveMany redrives each execution in its own transaction (one refusal
// does not stop the rest), in the order given, each id once. It is
// idempotent per execution: one already redriven is RUNNING (or has
// completed since) and is refused with 409, never run twice.
func (s *Service) RedriveMany(ctx context.Context, ids []int64, version int) ([]RedriveOutcome, error) {
	if len(ids) == 0 {
		return nil, Errorf(ErrInvalid, "executions: name at least one execution id")
	}
	if len(ids) > MaxRedriveBatch {
		return nil, Errorf(ErrInvalid, "executions: %d ids, more than the limit of %d per request; send them in batches", len(ids), MaxRedriveBatch)
	}
	if version > 0 {
		if err := s.onePath(ctx, ids); err != nil {
			return nil, err
		}
	}
	seen := map[int64]bool{}
	out := make([]RedriveOutcome, 0, len(ids))
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		r, err := s.Redrive(ctx, id, version)
		if err != nil && !isKnown(err) {
			return out, err // the database, not the request: the caller retries (each done one is refused then)
		}
		out = append(out, RedriveOutcome{ExecutionID: id, Redriven: r, Err: err})
	}
	return out, nil
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
	var errs []error
	for _, id := range found {
		// A child listed after its parent was ended with it: no repeat.
		out, err := s.CancelRequested(ctx, id, reason, true)
		ended = append(ended, out.IDs...)
		switch {
		case err == nil:
		case store.Transient(err) || ctx.Err() != nil:
			return ended, errors.Join(append(errs, err)...)
		default:
			// One that fails does not hold back the others.
			errs = append(errs, fmt.Errorf("execution %d: %w", id, err))
		}
	}
	return ended, errors.Join(errs...)
}
