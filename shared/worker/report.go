package worker

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/wire"
)

// slots counts the commands a worker runs at once. A claimed command holds
// one from its claim until the answer to the report that carries its result:
// that answer passes the slot to a command handed back (eager dispatch) or
// frees it.
type slots struct {
	mu   sync.Mutex
	max  int
	free int
	wake chan struct{} // closed when slots free up
}

func newSlots(n int) *slots { return &slots{max: n, free: n, wake: make(chan struct{})} }

// acquire takes n slots, waiting for them; false when ctx ended first.
func (s *slots) acquire(ctx context.Context, n int) bool {
	for {
		s.mu.Lock()
		if s.free >= n {
			s.free -= n
			s.mu.Unlock()
			return true
		}
		wake := s.wake
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-wake:
		}
	}
}

// release frees n slots.
func (s *slots) release(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	s.free += n
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

// grab takes every free slot and says how many.
func (s *slots) grab() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.free
	s.free = 0
	return n
}

// waitFree waits until a slot is free and says how many are (without taking
// them); 0 when ctx ended first.
func (s *slots) waitFree(ctx context.Context) int {
	return s.wait(ctx, func(free int) bool { return free > 0 })
}

// waitIdle waits until every slot is free: nothing runs and nothing waits to
// be reported. False when ctx ended first.
func (s *slots) waitIdle(ctx context.Context) bool {
	return s.wait(ctx, func(free int) bool { return free == s.max }) > 0
}

func (s *slots) wait(ctx context.Context, ok func(free int) bool) int {
	for {
		s.mu.Lock()
		free, wake := s.free, s.wake
		s.mu.Unlock()
		if ok(free) {
			return max(free, 1)
		}
		select {
		case <-ctx.Done():
			return 0
		case <-wake:
		}
	}
}

// completion is a command's end waiting to be reported. It is kept, in
// memory only and masked like everything posted, until the server answers
// for it: taken, refused (the lease is gone), or turned into the failure
// that says why the server would not take it.
type completion struct {
	cmd   *wire.Command
	event wire.EventRequest
	// refused is set on a command.failed made because the server refused the
	// result (4xx): it is the last word, never replaced again.
	refused bool
	// solo sends it in a report of its own: a report carrying it was refused
	// as a whole, and only alone does the answer say whose fault that was.
	solo bool
	// broken counts the server's 500s for it: a bug of ours, not an outage,
	// so it is given up after a few.
	broken int
	// quiet sends it in a report that asks for no commands and claims none:
	// the answer to a report carrying it was over the client's limit, so
	// the server took it but the worker never read what it said.
	quiet bool
	// settle, when set, learns whether the server took the event (a cursor
	// claim commits its rows only then); called once, when that is known.
	settle func(accepted bool)
}

// done tells the completion's settle whether its event was taken.
func (c completion) done(accepted bool) {
	if c.settle != nil {
		c.settle(accepted)
	}
}

// reporter sends completions in reports (POST /api/worker/report), a few
// requests in flight, each carrying everything that completed since the last
// one left: a busy worker reports many executions in one request and one
// transaction, an idle one reports at once, and the server, Postgres and the
// tools keep working while answers travel. Each answer hands back the
// commands the reported events issued, which start at once in the slots the
// completions held.
//
// While the server is unavailable (no answer, 502/503/504, or a 500) the
// completions stay queued and one report at a time probes it, on the
// worker's one backoff (w.server): a finished result is kept until the
// server has acknowledged it, for as long as the lease could still be the
// worker's (fencing by holder makes a late report safe: only the server can
// say the lease is gone, and it says so with a 409).
type reporter struct {
	w        *Worker
	ctx      context.Context
	mu       sync.Mutex
	q        []completion
	claims   []claim
	inFlight int
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

// reportsInFlight bounds the reports a worker has in flight at once.
const reportsInFlight = 4

// maxBroken is how many 500s a result gets before it is given up.
const maxBroken = 5

func newReporter(w *Worker, ctx context.Context) *reporter {
	r := &reporter{w: w, ctx: ctx, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	return r
}

// claim is a notification to claim in the next report; its slot is held.
type claim struct {
	msg     jetstream.Msg
	eventID int64
}

// claim queues a notification's command to be claimed in the next report.
func (r *reporter) claim(c claim) {
	r.mu.Lock()
	r.claims = append(r.claims, c)
	r.mu.Unlock()
	r.wake()
}

// add queues a completion (again); its command's slot stays held until the
// report.
func (r *reporter) add(c completion) {
	r.mu.Lock()
	r.q = append(r.q, c)
	r.mu.Unlock()
	r.wake()
}

// held is how many completions wait to be reported.
func (r *reporter) held() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.q)
}

func (r *reporter) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// close stops the loop once nothing is queued or in flight (or the context
// ended).
func (r *reporter) close() {
	close(r.stop)
	<-r.done
}

// dropped empties the queue after close, for the shutdown's last word.
func (r *reporter) dropped() []completion {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.q
	r.q = nil
	return q
}

func (r *reporter) loop() {
	defer close(r.done)
	var wg sync.WaitGroup
	defer wg.Wait()
	stopping := false
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		changed := r.w.server.changed() // before admit: a change after it still wakes the loop
		r.mu.Lock()
		var (
			batch  []completion
			claims []claim
			tk     ticket
			send   bool
			wait   time.Duration
		)
		if r.inFlight < reportsInFlight && len(r.q)+len(r.claims) > 0 {
			tk, wait, send = r.w.server.admit()
		}
		if send {
			batch = r.q[:batchLen(r.q)]
			r.q = r.q[len(batch):]
			if len(batch) == 0 || !(batch[0].solo || batch[0].quiet) {
				claims = r.claims[:min(len(r.claims), maxReportEvents-len(batch))]
				r.claims = r.claims[len(claims):]
			}
			r.inFlight++
		}
		idle := len(r.q)+len(r.claims) == 0 && r.inFlight == 0
		r.mu.Unlock()
		if send {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.send(tk, batch, claims)
				r.mu.Lock()
				r.inFlight--
				r.mu.Unlock()
				r.wake()
			}()
			continue
		}
		if stopping && idle {
			return
		}
		if wait > 0 {
			retry.Reset(wait)
		}
		select {
		case <-r.ctx.Done():
			return
		case <-r.kick:
		case <-retry.C:
		case <-changed:
		case <-r.stop:
			stopping, r.stop = true, nil
		}
	}
}

// maxReportEvents keeps a report's events and claims under the API's batch
// limit.
const maxReportEvents = 500

// batchLen is how many queued completions the next report carries: a solo
// one alone, else those before the first solo one, up to the limit.
func batchLen(q []completion) int {
	if len(q) > 0 && q[0].solo {
		return 1
	}
	n := 0
	for n < len(q) && n < maxReportEvents && !q[n].solo {
		n++
	}
	return n
}

// send reports a batch of completions and claims. What the server did not
// answer for goes back to the queue (completions, first in line) or to NATS
// (claims).
func (r *reporter) send(tk ticket, batch []completion, claims []claim) {
	w := r.w
	held := len(batch) + len(claims)
	take := 0
	if !w.stopping.Load() && !slices.ContainsFunc(batch, func(c completion) bool { return c.quiet }) {
		grabbed := w.slots.grab()
		held += grabbed
		take = len(batch) + grabbed
	}
	req := wire.Report{WorkerID: w.cfg.WorkerID, Pool: w.cfg.Pool, Take: take}
	for _, c := range batch {
		req.Events = append(req.Events, c.event)
	}
	for _, c := range claims {
		req.Claims = append(req.Claims, wire.ID(c.eventID))
	}
	res, err := w.cfg.Client.Report(r.ctx, req)
	if err != nil {
		for _, c := range claims {
			redeliver(c.msg)
		}
		w.slots.release(held - len(batch))
		r.failed(tk, batch, err)
		return
	}
	for i, c := range claims {
		w.settleClaim(c.msg, res.Claims[i])
	}
	// The slots held pass to the commands handed back (claimed, or issued by
	// the reported events), and stay with completions reported again; the
	// rest are free.
	handed, kept := min(len(res.Commands), held), 0
	var again []completion
	var failing *wire.EventOutcome
	for i, c := range batch {
		o := res.Events[i]
		if o.Status >= 500 {
			failing = &res.Events[i]
		}
		switch {
		case o.Status == http.StatusServiceUnavailable:
			again = append(again, c) // a shard's database is away: it waits for it
		case r.settle(c, o):
			kept++
		}
	}
	if failing != nil {
		r.requeue(again)
		w.server.failed(tk, &client.Error{Status: failing.Status, Message: failing.Error}, 0)
	} else {
		w.server.succeeded(tk)
	}
	w.slots.release(held - handed - kept - len(again))
	for i := range res.Commands[:handed] {
		if !w.begin(&res.Commands[i]) {
			w.log.Warn("handed a command this worker already runs; it runs once", "execution_id", res.Commands[i].ExecutionID,
				"command_id", res.Commands[i].CommandID, "attempt", res.Commands[i].Attempt)
			w.slots.release(1)
			continue
		}
		go w.execute(r.ctx, r, &res.Commands[i])
	}
}

// requeue puts completions back at the head of the queue.
func (r *reporter) requeue(cs []completion) {
	if len(cs) == 0 {
		return
	}
	r.mu.Lock()
	r.q = append(slices.Clone(cs), r.q...)
	r.mu.Unlock()
	r.wake()
}

// settle acts on one event's outcome: done, dropped (the lease is gone), or
// queued again — as is after a 500, or as a command.failed that says why the
// server refused the result. It says whether the completion was queued
// again (and keeps its slot).
func (r *reporter) settle(c completion, o wire.EventOutcome) bool {
	w := r.w
	log := w.log.With("execution_id", c.cmd.ExecutionID, "command_id", c.cmd.CommandID, "attempt", c.cmd.Attempt)
	switch {
	case o.Status == http.StatusOK:
		log.Debug("command reported", "event", c.event.EventType)
		c.done(!c.refused)
	case o.Status == http.StatusConflict || o.Status == http.StatusNotFound:
		log.Warn("the report was refused: the lease is gone; dropping the result", "status", o.Status, "error", o.Error)
		c.done(false)
	case o.Status >= 500 && c.broken < maxBroken-1:
		c.broken++
		log.Warn("the server failed on this result; reporting it again", "status", o.Status, "error", o.Error)
		r.add(c)
		return true
	case o.Status >= 400 && o.Status < 500 && !c.refused:
		log.Warn("the server refused the result; reporting the command failed", "status", o.Status, "error", o.Error)
		c.done(false)
		r.add(refusal(c, w.cfg.WorkerID, o.Error))
		return true
	default:
		log.Error("the server keeps failing on this result; dropping it: its lease expires and the command runs again", "status", o.Status, "error", o.Error)
		c.done(false)
	}
	return false
}

// failed handles a report that got no per-event answer. A request refused
// as a whole is split so the offending event is found; a server that could
// not answer (unreachable, 502/503/504, a 500, or this worker stopping)
// keeps the completions queued, and the worker backs off.
func (r *reporter) failed(tk ticket, batch []completion, err error) {
	w := r.w
	status := client.StatusOf(err)
	switch {
	case r.ctx.Err() != nil: // abandoned at shutdown: Run says what is dropped
		r.requeue(batch)
	case client.TooLarge(err):
		// The server answered: it took the events, and the commands it
		// handed out in that answer are lost to this worker (their leases
		// expire and they are retried, R-L3). A refusal, not an outage:
		// the events go again in a report that asks for nothing, whose
		// answer is small, to learn their outcomes (a re-post is
		// idempotent).
		w.server.succeeded(tk)
		w.log.Error("the server's answer to a report was over this worker's answer limit; the commands it carried are lost to this worker and run again when their leases expire; reporting the results again without asking for commands",
			"error", err.Error(), "results", len(batch))
		for i := range batch {
			batch[i].quiet = true
		}
		r.requeue(batch)
	case status >= 400 && status < 500 && status != http.StatusTooManyRequests:
		w.server.succeeded(tk) // it answered
		switch {
		case len(batch) == 0: // claims alone, back with NATS already
			w.log.Warn("the server refused a report of claims; they are delivered again later", "error", err.Error())
		case len(batch) > 1:
			for i := range batch {
				batch[i].solo = true
			}
			r.requeue(batch) // sent one by one next
		case !r.settle(batch[0], wire.EventOutcome{Status: status, Error: err.Error()}):
			w.slots.release(1)
		}
	case status >= 500 && !client.Unavailable(err):
		// A bug of ours on the server, not an outage: a few more tries.
		w.server.failed(tk, err, client.RetryAfterOf(err))
		for _, c := range batch {
			if !r.settle(c, wire.EventOutcome{Status: status, Error: err.Error()}) {
				w.slots.release(1)
			}
		}
	default:
		r.requeue(batch)
		w.server.failed(tk, err, client.RetryAfterOf(err))
	}
}

// refusal turns a refused completion into the command.failed that says why,
// without the result the server would not take.
func refusal(c completion, workerID, why string) completion {
	msg := fmt.Sprintf("the server refused the step's result: %s", why)
	ev := wire.EventRequest{ExecutionID: wire.ID(c.cmd.ExecutionID), EventFields: wire.EventFields{Step: c.cmd.NodeName, EventType: eventtype.CommandFailed, Status: "FAILED",
		Payload:  map[string]any{"command_id": c.cmd.CommandID, "error": msg},
		Meta:     map[string]any{"command_id": c.cmd.CommandID, "attempt": int64(c.cmd.Attempt), "class": "error"},
		WorkerID: workerID, EventID: clientID(c.cmd.CommandID, c.cmd.Attempt, "command.failed.refused")}}
	return completion{cmd: c.cmd, event: ev, refused: true}
}
