package controlplane

import (
	"sync"
	"time"
)

// Fair dispatch. Eager dispatch hands a worker the command its own report
// just issued, so a running chain never waits — and, under load, chains
// already running take every free slot while commands announced on NATS
// (a new execution's first step, a chain that yielded) wait behind them:
// the step-cycle tail grows far past its median. So an execution gets at most
// dispatchBurst commands in a row by eager dispatch while commands of its pool
// are waiting; its next one is announced instead and queues behind them, and
// the stream (first in, first out) and the claims in the workers' reports
// serve the longest-waiting command first. With nothing waiting for a slot
// (a chain on its own, or fewer chains than slots) nothing changes.
//
// The burst sets the tail: with more executions than slots a yielded command
// waits behind all those queued, and the queue moves one claim per burst+1
// steps, so the longest cycle is about burst+1 times the average. A queued
// step costs a notification and a claim more than one handed back
// (docs/step-path.md, "Fair dispatch", has both measured).
//
// What waits is what this process announced and no claim it served has taken
// yet: a view of its own, as the snapshot cache is. Another process's
// announcements are not seen; a command claimed elsewhere leaves the view
// after waitingFor.

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

// maxTracked bounds each of the fair-dispatch maps; past it they start over.
const maxTracked = 100_000

type dispatch struct {
	mu sync.Mutex
	// waiting: pool → issued event id → when it was announced, and of
	// which execution.
	waiting map[string]map[int64]announcement
	// bursts: execution → commands handed out in a row by eager dispatch.
	bursts map[int64]int
}

func newDispatch() *dispatch {
	return &dispatch{waiting: map[string]map[int64]announcement{}, bursts: map[int64]int{}}
}

// announcement is one waiting command: when it was announced, and its
// execution.
type announcement struct {
	at   time.Time
	exec int64
}

// announced records a command announced on NATS (published after commit).
func (d *dispatch) announced(pool string, issuedEventID, exec int64, at time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.waiting[pool]
	if w == nil || len(w) >= maxTracked {
		w = map[int64]announcement{}
		d.waiting[pool] = w
	}
	w[issuedEventID] = announcement{at: at, exec: exec}
}

// claimed records a command given to a worker: it waits no more.
func (d *dispatch) claimed(pool string, issuedEventID int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.waiting[pool], issuedEventID)
}

// mayHandOut says whether execution id may have its next command by eager
// dispatch now; false means it yields: the command is announced. Only
// another execution's command waiting for a slot makes it yield: yielding to
// its own (a loop's iterations announced at its start) would serve nobody
// sooner and cost each of them a notification and a claim; nor to one
// announced within inTransit, which is on its way to a worker with a free
// slot, not waiting for one (yielding to those, at W=50 with 100 slots every
// chain yielded to the notifications of the others' yields: a fifth more
// statements per step, and no slot was short). The txn records what it did
// once it commits (handed).
func (d *dispatch) mayHandOut(pool string, id int64, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bursts[id] < dispatchBurst || !d.othersWaitingLocked(pool, id, now)
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

// ended forgets an execution's burst.
func (d *dispatch) ended(id int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.bursts, id)
}
