package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/store"
)

// Every state change follows one path: a txn on the execution's shard locks
// what it changes (executions first, then commands, R-L5), folds each trigger
// with the engine (advance), gathers everything decided — events, command
// rows, stored results, notifications, the new snapshots — and writes it all
// with COMMIT in one round trip (commit); notifications are published after
// the commit. A txn that only locks and reads, then writes, costs two round
// trips to Postgres however many events, executions and commands it touches.

// txn is one transaction on a shard.
type txn struct {
	s   *Service
	ctx context.Context
	sh  *store.Shard
	tx  *store.Tx
	ids *idSource
	// now is the database clock once the locks are held (R-S4); local is
	// when it was read, on this process's monotonic clock.
	now   time.Time
	local time.Time
	// reachableSince is when the database last became reachable (its start,
	// or an outage's end): no lease lapses within a lease of it.
	reachableSince time.Time
	execs          map[int64]*execution
	order          []*execution
	cmds           map[string]*command
	ch             store.Changes
	// announce lists commands issued or retried here, in order: each is
	// published unless it was given to a worker in this txn (eager dispatch).
	announce []string
	// seen maps client ids of events already stored to their event ids.
	seen map[store.ClientEventKey]int64
	// results caches stored values loaded for the engine, per execution.
	results map[int64]map[engine.ResultKey]any
	// pinned are the cached snapshots of the executions locked by id, taken
	// before the lock; the lock leaves out the state of a row still at the
	// pinned seq (store.LockSet.KnownStates).
	pinned map[int64]snapEntry
	// cause is who causes the trigger being advanced, for the command
	// transitions it decides: "" is a worker's report.
	cause lifecycle.Actor
	// handed and yielded are the executions eager dispatch handed a command
	// (once per command) and those whose burst was spent (dispatch.go).
	handed, yielded []int64
	// deferred are the commands issued here whose execution yielded: not
	// announced, queued for a later report to hand out (dispatch.go).
	deferred []string
	// unpublished are the command.issued event ids of the commands whose
	// notification the commit could not publish (NATS away): the drain's.
	unpublished []int64
	// assumed: the executions and commands were taken from the process's
	// cache, not read (assume.go).
	assumed bool
	// fault is a command transition the lifecycle does not allow
	// (lifecycle.Check): a bug, refused at commit.
	fault error
	// tolerant: the lock keeps an execution the server cannot load
	// (execution.unloadable) rather than failing, for the one caller that
	// ends such an execution without the engine (endTx: Cancel, Finalize).
	tolerant bool
}

// execution is one execution locked by a txn, with its snapshot decoded once
// and kept current as triggers are advanced.
type execution struct {
	row  store.Execution
	pb   *playbook.Playbook
	run  *engine.Run
	snap *engine.Snapshot
	// base is the cached encoding snap was found with; enc is the state this
	// txn encoded against it (only the steps that changed are written).
	base, enc *engine.Encoded
	isNew     bool // inserted by this txn (execute)
	dirty     bool
	// unloadable is why the execution cannot be folded (its playbook or its
	// snapshot does not load, for good): set only in a tolerant txn, which
	// never advances it.
	unloadable error
}

// command is a command row known to a txn: read under its execution's lock,
// or created here. change gathers what the txn does to an existing row.
type command struct {
	row    store.Command
	isNew  bool
	change *store.CommandChange
}

// begin starts a txn on a shard; release it with rollback (a no-op after
// commit).
func (s *Service) begin(ctx context.Context, sh *store.Shard) (*txn, error) {
	tx, err := sh.Begin(ctx)
	if err != nil {
		return nil, err
	}
	t := &txn{s: s, ctx: ctx, sh: sh, tx: tx, execs: map[int64]*execution{}, cmds: map[string]*command{},
		results: map[int64]map[engine.ResultKey]any{}}
	t.ids = &idSource{ctx: ctx, q: tx, pool: s.ids, shard: sh.Index()}
	return t, nil
}

func (t *txn) rollback() { t.tx.Rollback(t.ctx) }

// errDiscard, returned by a withTx body, ends the transaction without
// writing anything (an idempotent repeat, nothing to sweep); withTx then
// returns nil.
var errDiscard = errors.New("controlplane: nothing to commit")

// withTx is the locked transaction every state change runs in: begin on sh,
// take the locks of ls (nil: fn takes its own, after locking rows the
// LockSet cannot name), run fn, then commit what fn gathered and publish
// after the commit (commit). It adds no round trip to what the caller did
// by hand: lock is one, commit is one. Any error from fn rolls back.
//
// A transaction that fails before its COMMIT is sent, for a cause that may
// not recur (a lost connection, a serialization failure, a deadlock:
// store.Retryable), runs again, up to txAttempts times in all: fn must
// start from scratch each time (set, not append to, what it hands back).
// What still fails is Transient, which the API answers 503.
func (s *Service) withTx(ctx context.Context, sh *store.Shard, ls *store.LockSet, fn func(*txn) error) error {
	for attempt := 1; ; attempt++ {
		err := s.txOnce(ctx, sh, ls, fn)
		if err == nil || attempt == txAttempts || !store.Retryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt*attempt) * 25 * time.Millisecond):
		}
	}
}

// txAttempts bounds the runs of one transaction (withTx).
const txAttempts = 3

func (s *Service) txOnce(ctx context.Context, sh *store.Shard, ls *store.LockSet, fn func(*txn) error) error {
	t, err := s.begin(ctx, sh)
	if err != nil {
		return err
	}
	defer t.rollback()
	if ls != nil {
		if err := t.lock(ls); err != nil {
			return err
		}
	}
	switch err := fn(t); {
	case errors.Is(err, errDiscard):
		return nil
	case err != nil:
		return err
	}
	return t.commit()
}

// withExecution is withTx on the shard of execution id, with id among the
// executions ls locks (nil ls: only it); fn gets the locked execution. An id
// no shard owns, or no row has, is ErrNotFound.
func (s *Service) withExecution(ctx context.Context, id int64, ls *store.LockSet, fn func(*txn, *execution) error) error {
	sh, err := s.st.ShardFor(id)
	if err != nil {
		return Errorf(ErrNotFound, "execution %d not found", id)
	}
	if ls == nil {
		ls = &store.LockSet{}
	}
	if !slices.Contains(ls.Executions, id) {
		ls.Executions = append(ls.Executions, id)
		slices.Sort(ls.Executions)
	}
	return s.withTx(ctx, sh, ls, func(t *txn) error {
		x, err := t.execution(id)
		if err != nil {
			return err
		}
		return fn(t, x)
	})
}

// lock takes the locks of ls in one round trip and adopts what it read:
// executions (with their playbooks) and commands.
func (t *txn) lock(ls *store.LockSet) error {
	// The states left out are exactly those this txn pinned: a LockSet used
	// again (a retried transaction) must not carry another txn's pins.
	ls.KnownStates = map[int64]int64{}
	for id, e := range t.s.snaps.pin(ls.Executions) {
		if t.pinned == nil {
			t.pinned = map[int64]snapEntry{}
		}
		t.pinned[id], ls.KnownStates[id] = e, e.seq
	}
	if err := t.tx.Lock(t.ctx, ls); err != nil {
		return err
	}
	t.now, t.local, t.seen, t.reachableSince = ls.Now, time.Now(), ls.Seen, ls.ReachableSince
	ids := make([]int64, 0, len(ls.ExecutionRows))
	for id := range ls.ExecutionRows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if _, err := t.adopt(ls.ExecutionRows[id]); err != nil {
			return err
		}
	}
	for _, c := range ls.CommandRows {
		t.adoptCommand(c)
	}
	return t.settle(ls.Staged)
}

// settle enters the staged events of the locked executions into their logs
// (stage, store.StageEvents), oldest first and before anything else the txn
// does: each is fenced against its command as it is now, under the lock, and
// folded, or stored ignored. None is lost: one its checks would refuse now
// (its command gone, say) is stored ignored too, since it was accepted.
func (t *txn) settle(staged []store.StagedEvent) error {
	last := map[int64]time.Time{}
	for _, se := range staged {
		x := t.execs[se.ExecutionID]
		if x == nil {
			return fmt.Errorf("controlplane: a staged event of execution %d, which the transaction did not lock", se.ExecutionID)
		}
		if se.Command != nil {
			t.adoptCommand(*se.Command)
		}
		e := se.Event
		e.RawOutput = se.Raw
		// Its place in the log is now: never before what the log holds
		// (R-S4), though it keeps its arrival time when it can.
		e.CreatedAt = latest(e.CreatedAt, x.row.UpdatedAt, last[x.row.ExecutionID])
		last[x.row.ExecutionID] = e.CreatedAt
		if x.unloadable != nil {
			// Nothing can fold it (the execution is being ended without
			// the engine): kept in the log, ignored.
			if _, err := t.appendIgnored(x, e); err != nil {
				return err
			}
			continue
		}
		_, err := t.ingest(x, e)
		var fenced *FencedError
		switch {
		case err == nil, errors.As(err, &fenced):
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalid):
			if _, err := t.appendIgnored(x, e); err != nil {
				return err
			}
		default:
			return err
		}
	}
	return nil
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// undecodable is a snapshot that does not decode: it will not, however
// often it is tried (wontLoad).
type undecodable struct{ err error }

func (e undecodable) Error() string { return e.err.Error() }
func (e undecodable) Unwrap() error { return e.err }

// wontLoad says whether err, from loading an execution, will recur however
// often it is tried: its catalog entry no longer parses or is gone, or its
// snapshot does not decode. A database error may not.
func wontLoad(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, store.ErrNotFound) || errors.As(err, new(undecodable))
}

// adopt makes a locked execution row part of the txn; in a tolerant txn,
// one that cannot be loaded is kept with why (execution.unloadable).
func (t *txn) adopt(row store.Execution) (*execution, error) {
	if x := t.execs[row.ExecutionID]; x != nil {
		return x, nil
	}
	pb, err := t.s.playbook(t.ctx, t.tx, t.sh, row.CatalogID)
	if err != nil && (!t.tolerant || !wontLoad(err)) {
		return nil, err
	}
	x := &execution{row: row, pb: pb, run: runOf(row), unloadable: err}
	if x.unloadable == nil && t.tolerant {
		// Decoded now rather than when first folded: what fails here is
		// known before anything is decided for it.
		if _, err := t.snapshot(x); err != nil {
			x.unloadable = err
		}
	}
	t.execs[row.ExecutionID] = x
	t.order = append(t.order, x)
	return x, nil
}

// adoptCommand makes a command row read under its execution's lock part of
// the txn.
func (t *txn) adoptCommand(c store.Command) *command {
	if k := t.cmds[c.CommandID]; k != nil {
		return k
	}
	k := &command{row: c}
	t.cmds[c.CommandID] = k
	return k
}

// execution returns a locked execution of the txn.
func (t *txn) execution(id int64) (*execution, error) {
	if x := t.execs[id]; x != nil {
		return x, nil
	}
	return nil, Errorf(ErrNotFound, "execution %d not found", id)
}

// changeCommand records a change of a command row, caused by by: checked
// against the command lifecycle (lifecycle.Check), applied at once to the
// row the txn holds, and written at commit.
func (t *txn) changeCommand(id string, ch store.CommandChange, by lifecycle.Actor) {
	ch.CommandID = id
	k := t.cmds[id]
	if k == nil {
		// Not read here (a command the engine cancels, say): only the change
		// is known, and only it is written.
		k = &command{row: store.Command{CommandID: id}}
		t.cmds[id] = k
	}
	if err := lifecycle.Check(k.row.Status, ch.Status, by); err != nil && t.fault == nil {
		t.fault = fmt.Errorf("command %s: %w", id, err)
	}
	ch.Apply(&k.row)
	if k.isNew {
		return
	}
	if k.change == nil {
		c := ch
		k.change = &c
		return
	}
	k.change.Merge(ch)
}

func runOf(row store.Execution) *engine.Run {
	return &engine.Run{ExecutionID: row.ExecutionID, CatalogID: row.CatalogID, Path: row.Path, Version: row.Version,
		ParentExecutionID: row.ParentExecutionID, Workload: row.Workload}
}

// snapshot is the execution's snapshot, decoded once per txn (or found in
// the process's cache). Callers must not change it in place: advance folds
// into a clone.
func (t *txn) snapshot(x *execution) (*engine.Snapshot, error) {
	if x.snap != nil {
		return x.snap, nil
	}
	if p, ok := t.pinned[x.row.ExecutionID]; ok && p.seq == x.row.LastSeq {
		x.snap, x.base = p.snap, p.enc
		return p.snap, nil
	}
	if e, ok := t.s.snaps.get(x.row.ExecutionID, x.row.LastSeq); ok {
		x.snap, x.base = e.snap, e.enc
		return e.snap, nil
	}
	snap, err := engine.UnmarshalSnapshot(x.row.State)
	if err != nil {
		return nil, undecodable{fmt.Errorf("decode the snapshot of execution %d: %w", x.row.ExecutionID, err)}
	}
	x.snap = snap
	return snap, nil
}

// eventTime is the time of the execution's next event: the database clock,
// never before anything already written for the execution (R-S4; the row's
// updated_at is written after every event it covers).
func (t *txn) eventTime(x *execution) time.Time {
	if x.row.UpdatedAt.After(t.now) {
		return x.row.UpdatedAt
	}
	return t.now
}

// advance appends trigger as the execution's next event and folds it with the
// engine; what the engine decides is gathered for commit. It returns the
// outcome and the trigger as stored.
func (t *txn) advance(x *execution, trigger store.Event) (*engine.Outcome, store.Event, error) {
	trigger.ExecutionID = x.row.ExecutionID
	trigger.Seq = x.row.LastSeq + 1
	if trigger.EventID == 0 {
		trigger.EventID = t.ids.next()
	}
	if trigger.CreatedAt.IsZero() {
		trigger.CreatedAt = t.eventTime(x)
	}
	if t.ids.err != nil {
		return nil, trigger, t.ids.err
	}
	if x.unloadable != nil {
		return nil, trigger, x.unloadable
	}
	snap, err := t.snapshot(x)
	if err != nil {
		return nil, trigger, err
	}
	ev := toEngine(trigger)
	cache := t.results[x.row.ExecutionID]
	if cache == nil {
		cache = map[engine.ResultKey]any{}
		t.results[x.row.ExecutionID] = cache
	}
	in := engine.Inputs{Results: cache, NewID: t.ids.next}
	started := time.Now()
	var out *engine.Outcome
	var rounds engine.Rounds
	for {
		// Handle may change the snapshot before it finds a stored value
		// missing; it then starts again from the state before the trigger.
		work := snap.Clone()
		out, err = t.s.eng.Handle(x.pb, x.run, work, ev, in)
		keys, err := rounds.Next(err)
		if err != nil {
			return nil, trigger, fmt.Errorf("execution %d: %w", x.row.ExecutionID, err)
		}
		if keys != nil {
			if err := t.s.loadResults(t.ctx, t.tx, x.row.ExecutionID, keys, cache); err != nil {
				return nil, trigger, err
			}
			continue
		}
		snap = work
		break
	}
	if err := t.s.storeParts(t.ctx, out.Parts); err != nil {
		return nil, trigger, err
	}
	if t.s.cfg.Observer != nil {
		t.s.cfg.Observer.Orchestrated(eventtype.Canonical(trigger.EventType), time.Since(started))
	}
	if t.ids.err != nil {
		return nil, trigger, t.ids.err
	}
	x.snap, x.dirty = snap, true
	t.ch.Events = append(t.ch.Events, trigger)
	for _, e := range out.Events {
		t.ch.Events = append(t.ch.Events, toStore(x.row.ExecutionID, e))
	}
	x.row.LastSeq = t.ch.Events[len(t.ch.Events)-1].Seq
	t.gather(x, out)
	return out, trigger, nil
}

// gather records what an outcome changes besides events: command rows,
// retries, cancellations, stored results.
func (t *txn) gather(x *execution, out *engine.Outcome) {
	if f := out.Finished; f != nil {
		status := store.CommandCompleted
		switch {
		case f.OK:
		case f.Class == playbook.ClassExpired:
			status = store.CommandExpired
		default:
			status = store.CommandFailed
		}
		by := t.cause
		if by == "" {
			by = lifecycle.Report
		}
		t.changeCommand(f.CommandID, store.CommandChange{Status: status}, by)
	}
	for _, w := range out.Writes {
		t.ch.Results = append(t.ch.Results, store.StepResult{StepResultKey: storeKey(w.Key), ExecutionID: x.row.ExecutionID, Result: w.Value})
		// Not in the database before commit: later triggers of this txn
		// read it from here.
		t.results[x.row.ExecutionID][w.Key] = w.Value
	}
	for _, c := range out.Commands {
		t.cmds[c.ID] = &command{isNew: true, row: store.Command{
			CommandID: c.ID, ExecutionID: x.row.ExecutionID, IssuedEventID: c.IssuedEventID, Step: c.Step,
			ToolKind: c.ToolKind, Status: store.CommandPending, Attempt: c.Attempt, MaxAttempts: c.MaxAttempts,
			TimeoutSeconds: c.Timeout, AvailableAt: c.AvailableAt, Context: c.Payload, Meta: c.Meta,
		}}
		t.announce = append(t.announce, c.ID)
	}
	for _, r := range out.Retries {
		t.changeCommand(r.CommandID, store.CommandChange{Status: store.CommandPending, Attempt: r.Attempt,
			AvailableAt: r.AvailableAt, Release: true}, lifecycle.Engine)
		t.announce = append(t.announce, r.CommandID)
	}
	for _, id := range out.Cancelled {
		t.changeCommand(id, store.CommandChange{Status: store.CommandCancelled}, lifecycle.Engine)
	}
}

// appendIgnored stores an event that must not be folded (fenced, R-L8, or late
// for an ended execution, R-R10): it keeps its place in the log and nothing
// else.
func (t *txn) appendIgnored(x *execution, e store.Event) (store.Event, error) {
	e.ExecutionID, e.Seq, e.Ignored = x.row.ExecutionID, x.row.LastSeq+1, true
	if e.EventID == 0 {
		e.EventID = t.ids.next() // a staged event keeps the id it was answered with
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = t.eventTime(x)
	}
	if t.ids.err != nil {
		return e, t.ids.err
	}
	t.ch.Events = append(t.ch.Events, e)
	x.row.LastSeq = e.Seq
	x.dirty = true
	return e, nil
}

// claim gives a command to a worker under a lease (R-L1, R-L2) and records
// command.claimed; started says the worker starts it at once (our worker's
// claim, and eager dispatch), so no separate command.started follows.
func (t *txn) claim(x *execution, k *command, workerID string, started bool) error {
	status := store.CommandClaimed
	if started {
		status = store.CommandRunning
	}
	deadline := lifecycle.Deadline(t.now, k.row.TimeoutSeconds)
	lease := lifecycle.LeaseEnd(t.now, deadline, t.s.limits)
	t.changeCommand(k.row.CommandID, store.CommandChange{Status: status, Hold: true, WorkerID: workerID,
		LeaseExpiresAt: lease, DeadlineAt: deadline}, lifecycle.Claim)
	t.s.fair.claimed(poolOf(x.row), k.row.IssuedEventID)
	meta := map[string]any{"command_id": k.row.CommandID, "attempt": int64(k.row.Attempt), "worker_id": workerID,
		"lease_expires_at": lease.UTC().Format(time.RFC3339Nano)}
	if started {
		meta["started"] = true
	}
	_, _, err := t.advance(x, store.Event{EventType: eventtype.CommandClaimed, NodeName: k.row.Step, Status: status,
		WorkerID: workerID, CommandID: k.row.CommandID, Meta: meta})
	return err
}

// commit writes everything gathered with COMMIT in one round trip, then
// publishes the notifications of commands nobody took here.
func (t *txn) commit() error {
	if t.fault != nil {
		return t.fault
	}
	for _, x := range t.order {
		if !x.dirty && !x.isNew {
			continue
		}
		if x.snap != nil {
			b, err := t.encodeState(x)
			if err != nil {
				return err
			}
			x.row.State = b
			x.row.Status = rowStatus(x.snap.Status)
			x.row.Error = x.snap.Error
		}
		// Until it commits, no cached snapshot of it is current.
		t.s.snaps.drop(x.row.ExecutionID)
		switch {
		case lifecycle.ExecutionEnded(x.row.Status) && x.row.CompletedAt.IsZero():
			x.row.CompletedAt = t.lastEventTime(x.row.ExecutionID)
		case !lifecycle.ExecutionEnded(x.row.Status):
			x.row.CompletedAt = time.Time{} // running again after a redrive
		}
		if x.isNew {
			t.ch.NewExecutions = append(t.ch.NewExecutions, x.row)
		} else {
			t.ch.Executions = append(t.ch.Executions, x.row)
		}
	}
	ids := make([]string, 0, len(t.cmds))
	for id := range t.cmds {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		k := t.cmds[id]
		switch {
		case k.isNew:
			t.ch.NewCommands = append(t.ch.NewCommands, k.row)
		case k.change != nil:
			t.ch.Commands = append(t.ch.Commands, *k.change)
		}
	}
	if t.s.cfg.Publisher != nil {
		skip := map[string]bool{} // deferred (dispatch.go), or announced already
		for _, id := range t.deferred {
			skip[id] = true
		}
		for _, id := range t.announce {
			k := t.cmds[id]
			if k == nil || k.row.Status != store.CommandPending || skip[id] {
				continue // given to a worker here, ended, deferred, or announced already
			}
			skip[id] = true
			x := t.execs[k.row.ExecutionID]
			m := t.s.notification(x.row, id, k.row.IssuedEventID, k.row.Step, k.row.Attempt)
			if m.OutboxID = t.ids.next(); t.ids.err != nil {
				return t.ids.err
			}
			t.ch.Outbox = append(t.ch.Outbox, m)
		}
	}
	if err := t.tx.Write(&t.ch); err != nil {
		return err
	}
	// The COMMIT runs to its end whether or not the caller stays
	// (store.Tx.Commit), and so does what follows it here.
	left := context.AfterFunc(t.ctx, func() {
		t.s.log.Info("the caller went away while COMMIT was in flight; the commit completes regardless",
			"shard", t.sh.Index(), "execution_ids", t.executionIDs())
	})
	err := t.tx.Commit(t.ctx)
	callerLeft := !left()
	if errors.Is(err, store.ErrCommitInDoubt) {
		err = t.resolve(err)
	}
	if err != nil {
		return err
	}
	// The database stamped each row's updated_at as it wrote it
	// (store.Tx.Write): a txn that assumes the row next takes its clock from
	// no earlier than that (txn.assume).
	stamped := make(map[int64]time.Time, len(t.ch.Executions))
	for _, e := range t.ch.Executions {
		stamped[e.ExecutionID] = e.UpdatedAt
	}
	for _, x := range t.order {
		if (x.dirty || x.isNew) && x.snap != nil {
			row := x.row
			row.State = nil
			if at, ok := stamped[row.ExecutionID]; ok {
				row.UpdatedAt = at
			}
			e := snapEntry{id: row.ExecutionID, seq: row.LastSeq, snap: x.snap, enc: x.enc, size: len(x.row.State), row: &row,
				now: t.now, local: t.local, reachable: t.reachableSince}
			for _, k := range t.cmds {
				if k.row.ExecutionID == row.ExecutionID && (k.isNew || k.change != nil) {
					c := k.row
					if size := claimablePayload(k); size > 0 {
						e.size += size // its claim may be assumed (txn.assume): the answer carries the payload
					} else {
						c.Context, c.Meta = nil, nil
					}
					e.cmds = append(e.cmds, c)
				}
			}
			t.s.snaps.put(e)
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), publishTimeout)
	defer cancel()
	// Recorded before the publish: a worker may claim a command as soon as
	// it is published, and a claim must find it recorded to clear it.
	for _, m := range t.ch.Outbox {
		t.s.fair.announced(poolOf(t.execs[m.ExecutionID].row), m.EventID, m.ExecutionID, time.Now())
	}
	t.s.fair.handed(t.handed, t.yielded)
	t.deferCommitted()
	published, unpublished := t.s.publish(ctx, t.sh, t.ch.Outbox)
	t.unpublished = unpublished
	for _, x := range t.order {
		if lifecycle.ExecutionEnded(x.row.Status) {
			t.s.fair.ended(x.row.ExecutionID)
		}
	}
	if callerLeft {
		t.s.log.Info("the commit stands although its caller went away; its notifications were published",
			"shard", t.sh.Index(), "execution_ids", t.executionIDs(), "published", published, "notifications", len(t.ch.Outbox))
	}
	return nil
}

// publishTimeout bounds the publishing after a commit; what is not published
// by then stays in the outbox for the drain.
const publishTimeout = 10 * time.Second

// executionIDs lists the executions the txn changed, for logs.
func (t *txn) executionIDs() []string {
	var out []string
	for _, x := range t.order {
		if x.dirty || x.isNew {
			out = append(out, strconv.FormatInt(x.row.ExecutionID, 10))
		}
	}
	return out
}

// resolve decides a commit whose answer was lost (store.ErrCommitInDoubt)
// by reading the execution's log at the seq of the last event the
// transaction wrote: that event there means it committed. It returns nil
// when it did, an error store.Retryable when it did not (the transaction can
// simply run again), and the doubt itself when the database cannot be
// asked: then nothing is published (the outbox drain publishes what did
// commit) and the caller gets a 503. Each outcome is logged as what it was.
func (t *txn) resolve(doubt error) error {
	log := t.s.log.With("shard", t.sh.Index(), "execution_ids", t.executionIDs(), "error", doubt.Error())
	if len(t.ch.Events) == 0 {
		log.Warn("the connection failed during COMMIT and the transaction wrote no event to check; its outcome is unknown")
		return doubt
	}
	last := t.ch.Events[len(t.ch.Events)-1]
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), resolveFor)
	defer cancel()
	ended := false
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		var id int64
		var err error
		if !ended {
			// A session still in its commit hides what it wrote: end it first.
			_, err = store.EndSession(ctx, t.sh.Pool(), t.tx.PID(), t.now, 5*time.Second)
			ended = err == nil
		}
		if ended {
			id, err = store.EventIDAt(ctx, t.sh.Pool(), last.ExecutionID, last.Seq)
		}
		switch {
		case err == nil && id == last.EventID:
			log.Warn("the connection failed during COMMIT; the commit stands (its last event is in the log)",
				"execution_id", last.ExecutionID, "seq", last.Seq)
			return nil
		case err == nil || errors.Is(err, store.ErrNotFound):
			log.Warn("the connection failed during COMMIT; the transaction did not commit (its last event is not in the log)",
				"execution_id", last.ExecutionID, "seq", last.Seq)
			return fmt.Errorf("the transaction did not commit: %w", errors.Unwrap(doubt))
		case !store.Transient(err):
			log.Warn("the connection failed during COMMIT and reading the log to decide it failed; its outcome is unknown", "check_error", err.Error())
			return doubt
		}
		select {
		case <-ctx.Done():
			log.Warn("the connection failed during COMMIT and the database could not be asked; its outcome is unknown: nothing is published now, the outbox drain publishes it if it committed",
				"check_error", err.Error())
			return doubt
		case <-time.After(wait):
		}
	}
}

// resolveFor bounds how long a lost commit answer is looked for.
const resolveFor = 15 * time.Second

// encodeState encodes the execution's snapshot. A state past the bound fails
// the execution first (MaxStateBytes): every step writes (and may read) the
// whole state, so its size is what each step costs; what one decision can add
// is bounded by the render budget, so the stored state stays bounded too.
func (t *txn) encodeState(x *execution) ([]byte, error) {
	enc, err := x.snap.Encode(x.base)
	if err != nil {
		return nil, err
	}
	if x.enc = enc; len(enc.Bytes) <= t.s.cfg.MaxStateBytes || x.snap.Terminal() {
		return enc.Bytes, nil
	}
	msg := fmt.Sprintf("the execution's state grew to %d bytes, over the limit of %d (MaxStateBytes): keep large values in step results (each step's result is kept outside the state) rather than in ctx with set:",
		len(enc.Bytes), t.s.cfg.MaxStateBytes)
	if _, _, err := t.advance(x, store.Event{EventType: eventtype.PlaybookFailed, Status: lifecycle.ExecutionFailed,
		Context: map[string]any{"error": msg}}); err != nil {
		return nil, err
	}
	if x.enc, err = x.snap.Encode(x.base); err != nil {
		return nil, err
	}
	return x.enc.Bytes, nil
}

// lastEventTime is the time of the execution's latest event written here: an
// ended execution's completed_at is its terminal event's.
func (t *txn) lastEventTime(id int64) time.Time {
	for i := len(t.ch.Events) - 1; i >= 0; i-- {
		if t.ch.Events[i].ExecutionID == id {
			return t.ch.Events[i].CreatedAt
		}
	}
	return t.now
}

// rowStatus maps the snapshot status to the execution row's.
func rowStatus(s string) string {
	if s == "" {
		return lifecycle.ExecutionRunning
	}
	return s
}

// poolOf is an execution's pool.
func poolOf(row store.Execution) string {
	if row.Pool == "" {
		return notify.PoolFor("", row.Path)
	}
	return row.Pool
}

func (s *Service) notification(row store.Execution, commandID string, issuedEventID int64, step string, attempt int) store.OutboxMessage {
	pool := poolOf(row)
	payload, _ := json.Marshal(notify.Body{ExecutionID: row.ExecutionID, EventID: issuedEventID, CommandID: commandID,
		Step: step, ServerURL: s.server, ExecutionPool: pool})
	return store.OutboxMessage{
		ExecutionID: row.ExecutionID, EventID: issuedEventID, Subject: notify.Subject(pool, row.ExecutionID),
		MsgID: notify.MsgID(commandID, attempt), Payload: payload,
	}
}

// loadResults fetches stored values the engine asked for (R-S2). Asked for
// one item of a loop's collection, it also loads the items after it: the
// iterations issued next need them, and one round trip serves a batch.
func (s *Service) loadResults(ctx context.Context, q store.Querier, executionID int64, keys []engine.ResultKey, into map[engine.ResultKey]any) error {
	stored := keys[:0:0]
	for _, k := range keys {
		if k.Kind != engine.KindReference {
			stored = append(stored, k)
			continue
		}
		v, err := s.readReference(ctx, executionID, k.URI)
		if err != nil {
			return fmt.Errorf("execution %d: %w", executionID, err)
		}
		into[k] = v
	}
	var sk []store.StepResultKey
	for _, k := range stored {
		sk = append(sk, storeKey(k))
		if k.Kind == engine.KindLoopItem {
			for i := 1; i < itemPrefetch; i++ {
				ahead := k
				ahead.Index += i
				if _, have := into[ahead]; !have {
					sk = append(sk, storeKey(ahead))
				}
			}
		}
	}
	got, err := store.GetStepResults(ctx, q, executionID, sk)
	if err != nil {
		return err
	}
	for _, k := range stored {
		if _, ok := got[storeKey(k)]; !ok {
			return fmt.Errorf("execution %d: stored %s is missing", executionID, k)
		}
	}
	for key, v := range got {
		into[engineKey(key)] = v
	}
	return nil
}

// itemPrefetch is how many loop items one load reads (see loadResults).
const itemPrefetch = 128

// readReference reads a result a worker stored by reference (worker.md §1):
// a URI inside the result store, or a noetl:// reference of this execution
// (resultstore.Resolve); a fragment is a JSON Pointer into the stored value
// (NoETL's Rust worker stages its whole tool result: #/data is the step's
// data, noetlwire.Result). It runs under the execution's row lock, only when
// a decision needs the value; a failure aborts the ingest (the worker
// re-posts, or the lease expires and the command is retried), so nothing is
// decided on a missing result.
func (s *Service) readReference(ctx context.Context, executionID int64, uri string) (any, error) {
	if s.cfg.Results == nil {
		return nil, fmt.Errorf("the result at %s was stored by reference, but this server has no result store (set NOETL_RESULT_STORE)", uri)
	}
	v, err := resultstore.ReadJSON(ctx, s.cfg.Results, uri, executionID)
	var bad *resultstore.ValueError
	switch {
	case errors.As(err, &bad), errors.Is(err, resultstore.ErrTooLarge), errors.Is(err, resultstore.ErrOtherExecution):
		// Never posted, so never checked by the API: refused (422) like a NUL
		// or a body over its limit posted inline; the worker reports the
		// command failed, saying why. Another execution's object (a
		// result_uri recorded before the check, or a worker on another store
		// URL) fails the same on every retry, so it is refused too.
		return nil, Errorf(ErrInvalid, "%v", err)
	case err != nil:
		return nil, err
	}
	return v, nil
}

func storeKey(k engine.ResultKey) store.StepResultKey {
	kind := store.KindResult
	if k.Kind == engine.KindLoopItem {
		kind = store.KindItem
	}
	return store.StepResultKey{Kind: kind, Step: k.Step, Visit: k.Visit, Index: k.Index}
}

func engineKey(k store.StepResultKey) engine.ResultKey {
	kind := engine.KindStepResult
	if k.Kind == store.KindItem {
		kind = engine.KindLoopItem
	}
	return engine.ResultKey{Kind: kind, Step: k.Step, Visit: k.Visit, Index: k.Index}
}

// publish sends committed notifications and marks them published, and says
// how many went out and which commands (their command.issued event ids) were
// not. A failure only leaves rows PENDING for the drain (R-A6): Postgres is
// the truth, NATS a doorbell. A command not published leaves fair dispatch's
// waiting view: no worker hears of it until NATS is back, so a chain that
// yielded to it would only stop (docs/outages.md: running executions keep
// moving while NATS is away); and no chain yields meanwhile
// (dispatch.published).
func (s *Service) publish(ctx context.Context, sh *store.Shard, msgs []store.OutboxMessage) (int, []int64) {
	if s.cfg.Publisher == nil || len(msgs) == 0 {
		return 0, nil
	}
	var done, failed []int64
	for _, m := range msgs {
		if err := s.cfg.Publisher.Publish(ctx, m.Subject, m.MsgID, m.Payload); err != nil {
			s.log.WarnContext(ctx, "publish after commit failed; the outbox drain will retry",
				"execution_id", m.ExecutionID, "msg_id", m.MsgID, "error", err.Error())
			failed = append(failed, m.EventID)
			continue
		}
		done = append(done, m.OutboxID)
	}
	s.fair.forget(failed)
	s.fair.published(len(failed) == 0)
	if len(done) == 0 {
		return 0, failed
	}
	if err := s.marks[sh.Index()].mark(ctx, done); err != nil {
		s.log.WarnContext(ctx, "mark outbox published failed; rows will be re-published (de-duplicated by JetStream)", "error", err.Error())
	}
	return len(done), failed
}

func toEngine(e store.Event) engine.Event {
	ev := engine.Event{Seq: e.Seq, ID: e.EventID, Type: e.EventType, Step: e.NodeName, NodeType: e.NodeType,
		Status: e.Status, Context: e.Context, Meta: e.Meta, Error: e.Error, WorkerID: e.WorkerID,
		CommandID: e.CommandID, Time: e.CreatedAt}
	if e.Result != nil {
		ev.Result = e.Result
	}
	return ev
}

func toStore(executionID int64, e engine.Event) store.Event {
	out := store.Event{ExecutionID: executionID, Seq: e.Seq, EventID: e.ID, EventType: e.Type, NodeName: e.Step,
		NodeType: e.NodeType, Status: e.Status, Context: e.Context, Meta: e.Meta, Error: e.Error,
		WorkerID: e.WorkerID, CommandID: e.CommandID, CreatedAt: e.Time}
	if m, ok := e.Result.(map[string]any); ok {
		out.Result = m
	}
	return out
}
