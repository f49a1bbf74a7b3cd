package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/noetl-go/noetl/shared/client"
)

// outage is what the worker knows of one dependency's availability (the
// server, NATS), shared by everything that calls it: one outage, one
// backoff, two log lines. While the dependency is up every request goes.
// Once one finds it unavailable, the requests already in flight neither move
// the backoff again when they fail nor end the outage when they succeed
// (they were sent before anyone knew);
// after that one probe at a time goes, each after a capped exponential
// backoff with jitter (client.Backoff, at least the server's Retry-After),
// and the first that succeeds ends the outage for all.
type outage struct {
	log  *slog.Logger
	what string // "the server", "NATS"
	// attrs adds what the line at an outage's start should say besides (the
	// results held).
	attrs func() []any

	mu      sync.Mutex
	down    bool
	since   time.Time
	epoch   int // moves at each failure that moved the backoff, and at the end
	tries   int // failed probes of this outage
	next    time.Time
	probing bool
	wake    chan struct{} // closed when the outage ends or a probe lands
}

// ticket is held by one request while it is in flight.
type ticket struct {
	epoch int
	probe bool
}

func newOutage(log *slog.Logger, what string) *outage {
	return &outage{log: log, what: what, wake: make(chan struct{})}
}

// admit says whether a request may go now, with its ticket; when not, how
// long until the next probe may (0: a probe is in flight, wait for changed).
func (o *outage) admit() (ticket, time.Duration, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case !o.down:
		return ticket{epoch: o.epoch}, 0, true
	case o.probing:
		return ticket{}, 0, false
	}
	if wait := time.Until(o.next); wait > 0 {
		return ticket{}, wait, false
	}
	o.probing = true
	return ticket{epoch: o.epoch, probe: true}, 0, true
}

// await waits until a request may go (sequential callers: the NATS loop);
// false when ctx ended first.
func (o *outage) await(ctx context.Context) (ticket, bool) {
	for {
		changed := o.changed() // before admit: a change after it still wakes us
		t, wait, ok := o.admit()
		if ok {
			return t, true
		}
		var timeout <-chan time.Time
		var timer *time.Timer
		if wait > 0 {
			timer = time.NewTimer(wait)
			timeout = timer.C
		}
		select {
		case <-ctx.Done():
		case <-timeout:
		case <-changed:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return ticket{}, false
		}
	}
}

// changed is closed when the outage ends or a probe lands.
func (o *outage) changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.wake
}

// isDown reports whether an outage is on.
func (o *outage) isDown() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.down
}

// failed notes that a request found the dependency unavailable. retryAfter
// is what the server asked for (0: nothing).
func (o *outage) failed(t ticket, err error, retryAfter time.Duration) {
	o.mu.Lock()
	o.landed(t)
	if t.epoch != o.epoch {
		o.mu.Unlock()
		return // sent before the outage was known, or before the backoff moved
	}
	o.notify()
	first := !o.down
	if first {
		o.down, o.since, o.tries = true, time.Now(), 0
	}
	wait := max(client.Backoff(o.tries), retryAfter)
	o.tries++
	o.epoch++
	o.next = time.Now().Add(wait)
	o.mu.Unlock()
	if first {
		o.log.Warn(o.what+" is unavailable; retrying with backoff, quietly until it answers again",
			append([]any{"error", err.Error(), "retry_in", wait.Round(time.Millisecond).String()}, o.more()...)...)
	}
}

// succeeded notes that a request got an answer. Only a request sent since
// the outage began (a probe) ends it: one already in flight when it began
// may have been answered before, and ending the outage on it would say the
// server is back while it is not, then start the outage again.
func (o *outage) succeeded(t ticket) {
	o.mu.Lock()
	o.landed(t)
	if !o.down || t.epoch != o.epoch {
		o.mu.Unlock()
		return
	}
	o.down = false
	o.epoch++
	o.notify()
	since, tries := o.since, o.tries
	o.mu.Unlock()
	o.log.Info(o.what+" is available again", "down_for", time.Since(since).Round(time.Millisecond).String(), "failed_attempts", tries)
}

// abandoned notes that a request ended with no verdict (its caller's
// context ended): a probe's turn passes to the next request.
func (o *outage) abandoned(t ticket) {
	o.mu.Lock()
	o.landed(t)
	o.mu.Unlock()
}

// landed ends a probe, waking whoever waits for one. Hold o.mu.
func (o *outage) landed(t ticket) {
	if t.probe {
		o.probing = false
		o.notify()
	}
}

// notify wakes whoever waits for a change. Hold o.mu.
func (o *outage) notify() {
	close(o.wake)
	o.wake = make(chan struct{})
}

func (o *outage) more() []any {
	if o.attrs == nil {
		return nil
	}
	return o.attrs()
}
