package controlplane

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/noetl-go/noetl/shared/store"
)

// Fair dispatch. Eager dispatch hands a worker the command its own report
// just issued, so a running chain never waits — and, under load, chains
// already running take every free slot while commands announced on NATS
// (a new execution's first step) wait behind them: the step-cycle tail grows
// far past its median. So an execution gets at most dispatchBurst commands
// in a row by eager dispatch while commands of its pool are waiting; then it
// yields: its report's slot goes to the longest-waiting command, and its own
// next one waits in turn. With nothing waiting for a slot (a chain on its
// own, or fewer chains than slots) nothing changes.
//
// A yielded command is deferred, not announced: it waits in this process's
// queue (deferred, first in, first out) and a later report that yields, or
// that has slots to spare, takes it — claimed in that report's transaction
// and handed out in its answer, as eager dispatch hands out its own. So a
// yielded step costs a claim more than one handed back, and no notification
// (its outbox row, the publish, the mark, the worker's fetch and claim). A
// command announced on NATS that has waited longer than the oldest deferred
// one is served first: the report leaves its slot to the worker's claim.
// When no report of their pool comes for idleFor (the chains that reported
// here have ended, or report to another process), this process announces
// them all (announceStranded), and any that waited staleAfter whatever the
// reports do; if it stops (or, in AWS, its Lambda instance
// is frozen between invocations, timers with it), the drain announces them
// again (lifecycle.ReannounceDue: 10 s after they became claimable), as any
// pending command.
//
// The burst sets the tail: with more executions than slots a yielded command
// waits behind all those queued, and the queue moves one command per burst+1
// steps, so the longest cycle is about burst+1 times the average
// (docs/step-path.md, "Fair dispatch", has both measured).
//
// What waits is what this process announced or deferred and no claim it
// served has taken yet: a view of its own, as the snapshot cache is. Another
// process's are not seen; a command claimed elsewhere leaves the view after
// waitingFor.

// dispatchBurst bounds the commands one execution gets in a row by eager
// dispatch while others wait: one, so under load a chain alternates between
// a step handed back and a step queued.
const dispatchBurst = 1

// waitingFor is how long an announcement counts as waiting at most.
const waitingFor = time.Minute

// inTransit bounds how long an announcement takes to be claimed by a worker
// with a free slot (the publish, the worker's fetch, its next report); one
// older waits for a slot. At W=500 with 100 slots the queue's waits are
// hundreds of milliseconds.
const inTransit = 50 * time.Millisecond

// maxTracked bounds each of the fair-dispatch maps; past it they start over
// (waiting keeps its deferred entries: nothing else queues them).
const maxTracked = 100_000

type dispatch struct {
	mu sync.Mutex
	// waiting: pool → issued event id → when it was announced or
	// deferred, and of which execution.
	waiting map[string]map[int64]announcement
	// bursts: execution → commands handed out in a row by eager dispatch.
	bursts map[int64]int
	// deferred: pool → the deferred commands, oldest first. One no longer
	// in waiting was claimed (or forgotten) and is dropped when reached.
	deferred map[string][]deferredCmd
	// asked: pool → when a report of it last came (a chain that reports
	// yields within a burst or two); armed, whether announceStranded is
	// scheduled.
	asked map[string]time.Time
	armed bool
	// failedAt: when the last publish failed (NATS away), unix nanoseconds;
	// 0 once one succeeded. For unpublishedFor after it no chain yields: what
	// was announced reaches no worker, and a command deferred now may wait
	// for a report that never comes.
	failedAt atomic.Int64
}

// unpublishedFor is how long a failed publish stops the yielding, unless one
// succeeds sooner: bounded, so a process that publishes nothing for a while
// after NATS is back (its chains all handed their own next commands) does
// not go on without fair dispatch.
const unpublishedFor = 10 * time.Second

func newDispatch() *dispatch {
	return &dispatch{waiting: map[string]map[int64]announcement{}, bursts: map[int64]int{},
		deferred: map[string][]deferredCmd{}, asked: map[string]time.Time{}}
}

// announcement is one waiting command: when it was announced (or deferred),
// of which execution, and whether it was deferred.
type announcement struct {
	at       time.Time
	exec     int64
	deferred bool
}

// deferredCmd is a deferred command: its command.issued event id, its
// execution, and since when it waits. queued: its announcement was written
// but not published (NATS away), so the drain publishes it and it is not
// announced again from here; reports still serve it.
type deferredCmd struct {
	ev, exec int64
	at       time.Time
	queued   bool
}

// announced records a command announced on NATS (published after commit).
func (d *dispatch) announced(pool string, issuedEventID, exec int64, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.waitingLocked(pool)[issuedEventID] = announcement{at: at, exec: exec}
}

func (d *dispatch) waitingLocked(pool string) map[int64]announcement {
	w := d.waiting[pool]
	switch {
	case w == nil:
		w = map[int64]announcement{}
		d.waiting[pool] = w
	case len(w) >= maxTracked:
		// Start over, keeping what is deferred: only this view queues it.
		for id, a := range w {
			if !a.deferred {
				delete(w, id)
			}
		}
	}
	return w
}

// deferCmds queues committed yielded commands, unannounced; it says whether
// announceStranded must be scheduled.
func (d *dispatch) deferCmds(pool string, cs []deferredCmd) (arm bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.waitingLocked(pool)
	for _, c := range cs {
		w[c.ev] = announcement{at: c.at, exec: c.exec, deferred: true}
	}
	if q := d.deferred[pool]; len(q) >= maxTracked/2 {
		// The older half is left to the drain's announcement, out of view
		// (so what is deferred stays under half of what waiting may hold).
		for _, c := range q[:len(q)/2] {
			delete(w, c.ev)
		}
		d.deferred[pool] = q[len(q)/2:]
	}
	d.deferred[pool] = append(d.deferred[pool], cs...)
	arm, d.armed = !d.armed, true
	return arm
}

// serve takes up to n deferred commands of pool, oldest first, of no
// execution in skip, each older than every announced command waiting
// (that one goes to a worker's claim first).
func (d *dispatch) serve(pool string, n int, skip map[int64]bool) []deferredCmd {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.asked) >= maxTracked {
		clear(d.asked) // pools named by clients: bounded, as the other maps
	}
	d.asked[pool] = time.Now()
	q := d.deferred[pool]
	if n <= 0 || len(q) == 0 {
		return nil
	}
	w := d.waiting[pool]
	// An announced command that has waited staleAfter is most likely not
	// waiting here (claimed through another process, ended, a retry not yet
	// due): it does not hold the queue back; nor does any while publishing
	// fails (no worker hears of it).
	now := time.Now()
	var announcedSince time.Time
	for _, a := range w {
		if !a.deferred && now.Sub(a.at) < staleAfter && (announcedSince.IsZero() || a.at.Before(announcedSince)) {
			announcedSince = a.at
		}
	}
	if d.failing(now) {
		announcedSince = time.Time{}
	}
	var out []deferredCmd
	kept := q[:0]
	for _, c := range q {
		switch a, ok := w[c.ev]; {
		case !ok || !a.deferred:
			// claimed, forgotten, or announced since: not served from here
		case len(out) < n && !skip[c.exec] && (announcedSince.IsZero() || c.at.Before(announcedSince)):
			out = append(out, c)
		default:
			kept = append(kept, c)
		}
	}
	clear(q[len(kept):])
	d.deferred[pool] = kept
	return out
}

// putBack returns served commands a report did not hand out to the front,
// waiting again (a claim in a txn that did not commit forgot them).
// It says, as deferCmds does, whether announceStranded must be scheduled.
func (d *dispatch) putBack(pool string, cs []deferredCmd) (arm bool) {
	if len(cs) == 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.waitingLocked(pool)
	for _, c := range cs {
		w[c.ev] = announcement{at: c.at, exec: c.exec, deferred: true}
	}
	d.deferred[pool] = append(cs[:len(cs):len(cs)], d.deferred[pool]...)
	arm, d.armed = !d.armed, true
	return arm
}

// idleFor is how long no report of a pool comes here before this process
// announces its deferred commands: the reports that hand them out have
// stopped coming. At W=500 one comes every millisecond or so.
const idleFor = 100 * time.Millisecond

// staleAfter is how long a command waits deferred at most: one older is
// announced, as before deferral, whatever the reports do (at W=500 the
// queue's waits are a few hundred milliseconds).
const staleAfter = time.Second

// stranded takes the deferred commands to announce: those that waited
// staleAfter, and all of a pool's once no report of it came for idleFor;
// rearm says whether some remain deferred (announceStranded looks again).
func (d *dispatch) stranded(now time.Time) (out []deferredCmd, rearm bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for pool, q := range d.deferred {
		idle := now.Sub(d.asked[pool]) >= idleFor
		kept := q[:0]
		for _, c := range q {
			switch a, ok := d.waiting[pool][c.ev]; {
			case !ok || !a.deferred:
				// claimed, forgotten, or announced since
			case c.queued && now.Sub(c.at) >= waitingFor:
				delete(d.waiting[pool], c.ev) // left to the drain's publish, out of view
			case c.queued:
				kept = append(kept, c) // announcing it again would only queue another row
			case now.Sub(c.at) >= staleAfter || (idle && now.Sub(c.at) >= idleFor):
				out = append(out, c)
			default:
				kept = append(kept, c)
			}
		}
		clear(q[len(kept):])
		if len(kept) == 0 {
			delete(d.deferred, pool)
			continue
		}
		d.deferred[pool] = kept
		rearm = true
	}
	d.armed = rearm
	return out, rearm
}

// claimed records a command given to a worker: it waits no more.
func (d *dispatch) claimed(pool string, issuedEventID int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.waiting[pool], issuedEventID)
}

// mayHandOut says whether execution id may have its next command by eager
// dispatch now; false means it yields: the command is deferred. Only
// another execution's command waiting for a slot makes it yield: yielding to
// its own (a loop's iterations announced at its start) would serve nobody
// sooner and cost each of them a notification and a claim; nor to one
// announced within inTransit, which is on its way to a worker with a free
// slot, not waiting for one (yielding to those, at W=50 with 100 slots every
// chain yielded to the notifications of the others' yields: a fifth more
// statements per step, and no slot was short); nor while publishing fails
// (published). The txn records what it did once it commits (handed).
func (d *dispatch) mayHandOut(pool string, id int64, now time.Time) bool {
	if d.failing(now) {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bursts[id] < dispatchBurst || !d.othersWaitingLocked(pool, id, now)
}

// failing says whether a publish failed within unpublishedFor of now and
// none succeeded since.
func (d *dispatch) failing(now time.Time) bool {
	at := d.failedAt.Load()
	return at != 0 && now.Sub(time.Unix(0, at)) < unpublishedFor
}

// published records how a publish went: a failure stops the yielding until
// one succeeds, for unpublishedFor at most.
func (d *dispatch) published(ok bool) {
	switch {
	case !ok:
		d.failedAt.Store(time.Now().UnixNano())
	case d.failedAt.Load() != 0:
		d.failedAt.Store(0)
	}
}

// handed records a committed txn's eager dispatch: the executions it handed
// a command (once per command) and those that yielded (their bursts start
// again).
func (d *dispatch) handed(out, yielded []int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.bursts) >= maxTracked {
		clear(d.bursts)
	}
	for _, id := range out {
		d.bursts[id]++
	}
	for _, id := range yielded {
		delete(d.bursts, id)
	}
}

// othersWaitingLocked reports whether a command of pool of another
// execution than exec, announced at least inTransit and less than
// waitingFor ago, has not been claimed here, forgetting older ones.
func (d *dispatch) othersWaitingLocked(pool string, exec int64, now time.Time) bool {
	for id, a := range d.waiting[pool] {
		switch age := now.Sub(a.at); {
		case age >= waitingFor:
			delete(d.waiting[pool], id)
		case a.exec != exec && age >= inTransit:
			return true
		}
	}
	return false
}

// forget drops commands from every pool's waiting view: their announcement
// failed, so the drain announces them, and until then no chain yields to
// them (a view that kept them would have chains yield for waitingFor).
func (d *dispatch) forget(evs []int64) {
	if len(evs) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, w := range d.waiting {
		for _, ev := range evs {
			delete(w, ev)
		}
	}
}

// ended forgets an execution's burst.
func (d *dispatch) ended(id int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.bursts, id)
}

// announceStranded announces the deferred commands no report takes, or that
// waited staleAfter (dispatch.stranded), and looks again in idleFor while
// some wait.
func (s *Service) announceStranded() {
	cs, rearm := s.fair.stranded(time.Now())
	if rearm {
		time.AfterFunc(idleFor, s.announceStranded)
	}
	s.announceDeferred(cs)
}

// announceDeferred announces deferred commands (those still pending), one
// transaction per shard; a failure leaves them to the drain. Those not
// announced leave the waiting view (dispatch.forget); those announced but
// not published (NATS away) are deferred again, queued (deferredCmd), so
// reports still hand them out: the chains they belong to keep moving.
func (s *Service) announceDeferred(cs []deferredCmd) {
	byShard := map[*store.Shard][]int64{}
	byEv := make(map[int64]deferredCmd, len(cs))
	for _, c := range cs {
		if sh, err := s.st.ShardFor(c.ev); err == nil {
			byShard[sh] = append(byShard[sh], c.ev)
			byEv[c.ev] = c
		}
	}
	for sh, evs := range byShard {
		ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
		var gone []int64
		var last *txn // the run that committed
		pools := map[int64]string{}
		err := s.withTx(ctx, sh, &store.LockSet{IssuedEventIDs: evs}, func(t *txn) error {
			gone, last = gone[:0], t // from scratch: the body may run again
			for _, ev := range evs {
				if k := t.issuedBy(ev); k != nil && k.row.Status == store.CommandPending {
					t.announce = append(t.announce, k.row.CommandID)
					pools[ev] = poolOf(t.execs[k.row.ExecutionID].row)
				} else {
					gone = append(gone, ev)
				}
			}
			return nil
		})
		cancel()
		if err != nil {
			gone = evs
			s.log.Warn("announcing deferred commands failed; the drain announces them again",
				"shard", sh.Index(), "commands", len(evs), "error", err.Error())
		}
		// What was announced waits as announced (the publish records it);
		// what was gone (claimed elsewhere, ended) or could not be announced
		// waits no more here.
		s.fair.forget(gone)
		if err != nil || last == nil {
			continue
		}
		back := map[string][]deferredCmd{}
		for _, ev := range last.unpublished {
			if c, ok := byEv[ev]; ok && pools[ev] != "" {
				c.queued = true
				back[pools[ev]] = append(back[pools[ev]], c)
			}
		}
		for pool, cs := range back {
			if s.fair.putBack(pool, cs) {
				time.AfterFunc(idleFor, s.announceStranded)
			}
		}
	}
}

// deferCommitted queues the committed txn's deferred commands, and
// schedules announceStranded if it is not.
func (t *txn) deferCommitted() {
	byPool := map[string][]deferredCmd{}
	now := time.Now()
	for _, id := range t.deferred {
		if k := t.cmds[id]; k != nil && k.row.Status == store.CommandPending {
			pool := poolOf(t.execs[k.row.ExecutionID].row)
			byPool[pool] = append(byPool[pool], deferredCmd{ev: k.row.IssuedEventID, exec: k.row.ExecutionID, at: now})
		}
	}
	for pool, cs := range byPool {
		if t.s.fair.deferCmds(pool, cs) {
			time.AfterFunc(idleFor, t.s.announceStranded)
		}
	}
}

// yieldsOf decides, before a report's transactions, which of its executions
// yield (their next command is deferred) and which deferred commands take
// their slots and the worker's spare ones (Take beyond one per execution
// reported), by shard; a shard with only served commands gets a part in
// byShard.
func (s *Service) yieldsOf(r Report, byShard map[*store.Shard]map[int64][]int) (map[int64]bool, map[*store.Shard][]deferredCmd) {
	yields, reported := map[int64]bool{}, map[int64]bool{}
	now := time.Now()
	for _, execs := range byShard {
		for id := range execs {
			reported[id] = true
			if !s.fair.mayHandOut(r.Pool, id, now) {
				yields[id] = true
			}
		}
	}
	served := map[*store.Shard][]deferredCmd{}
	for _, c := range s.fair.serve(r.Pool, len(yields)+max(0, r.Take-len(reported)), reported) {
		sh, err := s.st.ShardFor(c.ev)
		if err != nil {
			continue
		}
		served[sh] = append(served[sh], c)
		if byShard[sh] == nil {
			byShard[sh] = map[int64][]int{}
		}
	}
	return yields, served
}
