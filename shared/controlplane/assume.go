package controlplane

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/noetl-go/noetl/shared/store"
)

// The fast path's one round trip. A chain's next report most often lands in
// the process that committed its last step, which keeps what that step
// wrote (snapCache): the execution's row and snapshot at its seq, and the
// command it handed out. A txn that assumes them (assume) reads nothing
// before deciding: it folds the report, and sends its writes and COMMIT
// behind guards that check, under the executions' locks, that nothing it
// assumed has moved (store.Assume) — one round trip per step. When a guard
// fails (another writer moved the execution, a re-post, staged events), the
// transaction has not committed and the report runs again on the lock path;
// so does a report the assumption cannot answer exactly (a refused event).

// errAssumption ends an assumed txn that must run on the lock path instead.
var errAssumption = errors.New("controlplane: the assumption does not cover this transaction")

// assume makes the txn take ls's executions and commands from the process's
// cache instead of reading them, and queues the guards; false when the cache
// does not hold all of them (the lock path then reads them).
func (t *txn) assume(ls *store.LockSet) (bool, error) {
	if ls.IdempotencyKey != "" || ls.Request != nil {
		return false, nil
	}
	// A claim names its command by the command.issued event: assumed when
	// this process wrote the command, still pending, with its payload
	// (snapCache.put keeps that of a small pending command).
	execs := slices.Clone(ls.Executions)
	for _, ev := range ls.IssuedEventIDs {
		id, ok := t.s.snaps.executionOf(ev)
		if !ok {
			return false, nil
		}
		execs = append(execs, id)
	}
	slices.Sort(execs)
	execs = slices.Compact(execs)
	if len(execs) == 0 {
		return false, nil
	}
	pins := t.s.snaps.pin(execs)
	if len(pins) != len(execs) {
		return false, nil
	}
	held := map[string]store.Command{}
	a := store.Assumption{Executions: execs, ClientEvents: ls.ClientEvents}
	var now, reachable time.Time
	for _, id := range a.Executions {
		e := pins[id]
		if e.row == nil || e.row.LastSeq != e.seq {
			return false, nil
		}
		a.Seqs = append(a.Seqs, e.seq)
		for _, c := range e.cmds {
			held[c.CommandID] = c
		}
		// The database's clock, read by the txn that wrote the entry, and
		// how long ago on this process's clock: never ahead of the
		// database's own. Nor before the row's last write, which the
		// database stamped later than that txn read its clock (the guard
		// checks it, R-S4): a report that follows at once would otherwise
		// fail the guard and pay the lock path.
		now = latest(now, e.now.Add(time.Since(e.local)), e.row.UpdatedAt)
		reachable = latest(reachable, e.reachable)
	}
	for _, id := range ls.Commands {
		c, ok := held[id]
		if !ok {
			return false, nil
		}
		a.Commands = append(a.Commands, c)
	}
	for _, ev := range ls.IssuedEventIDs {
		c := claimableIn(pins, ev)
		if c == nil {
			return false, nil
		}
		a.Commands = append(a.Commands, *c)
	}
	// Stored with the database's precision, as a clock read from it is:
	// the live snapshot and the log's replay must carry the same times.
	now = now.Truncate(time.Microsecond)
	t.pinned, t.now, t.local, t.reachableSince, t.seen = pins, now, time.Now(), reachable, map[store.ClientEventKey]int64{}
	a.Now = now
	for _, id := range a.Executions {
		row := *pins[id].row
		if _, err := t.adopt(row); err != nil {
			return false, err
		}
	}
	for _, c := range a.Commands {
		t.adoptCommand(c)
	}
	if err := t.tx.Assume(a); err != nil {
		return false, err
	}
	t.assumed = true
	return true, nil
}

// claimableBytes bounds the payload of a pending command a cache entry keeps
// so that its claim can be assumed; a larger one (a step's large rendered
// input) is claimed on the lock path, which reads it.
const claimableBytes = 64 << 10

// claimablePayload is the size of k's payload when a cache entry keeps it:
// a command this txn issued that waits for a claim, within claimableBytes;
// else 0.
func claimablePayload(k *command) int {
	if !k.isNew || k.row.Status != store.CommandPending {
		return 0
	}
	if size := commandBytes(k.row); size <= claimableBytes {
		return size
	}
	return 0
}

// claimableIn is the pending command the pinned entries wrote for
// command.issued event ev, if they kept its payload (a nil Context: left out,
// so a claim of it takes the lock path).
func claimableIn(pins map[int64]snapEntry, ev int64) *store.Command {
	for _, e := range pins {
		for i := range e.cmds {
			if c := &e.cmds[i]; c.IssuedEventID == ev && c.Status == store.CommandPending && c.Context != nil {
				return c
			}
		}
	}
	return nil
}

// withAssumedOrLocked runs fn in a txn that assumes ls when it can
// (withAssumed), and on the lock path (withTx) when that txn did not commit.
func (s *Service) withAssumedOrLocked(ctx context.Context, sh *store.Shard, ls *store.LockSet, fn func(*txn) error) error {
	if done, err := s.withAssumed(ctx, sh, ls, fn); done {
		return err
	}
	return s.withTx(ctx, sh, ls, fn)
}

// withAssumed runs fn in a txn that assumes ls (assume) when it can, and
// says whether that txn committed; when it did not, nothing was written. A
// COMMIT whose outcome is unknown is not run again: its error is returned.
func (s *Service) withAssumed(ctx context.Context, sh *store.Shard, ls *store.LockSet, fn func(*txn) error) (bool, error) {
	t, err := s.begin(ctx, sh)
	if err != nil {
		return false, nil
	}
	defer t.rollback()
	if ok, err := t.assume(ls); !ok || err != nil {
		return false, nil
	}
	if err := fn(t); err != nil {
		t.keepPins()
		return false, nil
	}
	err = t.commit()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrCommitInDoubt):
		return true, err // resolve could not decide: running it again could do it twice
	}
	t.keepPins()
	return false, nil
}

// keepPins puts back the entries an assumed txn took that did not commit:
// commit dropped them, and an entry still current spares the lock path
// reading the state.
func (t *txn) keepPins() {
	for _, e := range t.pinned {
		t.s.snaps.restore(e)
	}
}
