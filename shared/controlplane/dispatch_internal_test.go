package controlplane

import (
	"slices"
	"testing"
	"time"
)

// TestFairDispatchYieldsOnlyToOthers: an execution past its burst yields
// only to another execution's waiting command, never to its own (a loop's
// iterations announced at its start): yielding to itself served nobody
// sooner and cost the 10,000-iteration loop of `make bench` a fifth of its
// throughput in notifications and claims.
func TestFairDispatchYieldsOnlyToOthers(t *testing.T) {
	d := newDispatch()
	now := time.Now()
	d.handed(slices.Repeat([]int64{1}, dispatchBurst), nil)
	d.announced("p", 100, 1, now) // execution 1's own waiting iteration
	if !d.mayHandOut("p", 1, now) {
		t.Fatal("execution 1 yields to its own waiting command")
	}
	d.announced("p", 200, 2, now) // another execution's
	if d.mayHandOut("p", 1, now.Add(inTransit)) {
		t.Fatal("execution 1, past its burst, does not yield to execution 2's waiting command")
	}
	d.claimed("p", 200)
	if !d.mayHandOut("p", 1, now) {
		t.Fatal("execution 1 still yields once execution 2's command was claimed")
	}
	if !d.mayHandOut("p", 1, now.Add(waitingFor)) {
		t.Fatal("an announcement older than waitingFor still counts")
	}
}

// TestFairDispatchPolicy: when an execution past its burst gets its next
// command by eager dispatch, and when it yields (its command announced,
// behind those waiting for a slot).
func TestFairDispatchPolicy(t *testing.T) {
	now := time.Now()
	type waiting struct {
		exec int64
		age  time.Duration
	}
	for _, c := range []struct {
		name    string
		handed  int // commands execution 1 got in a row
		waiting []waiting
		want    bool
	}{
		{name: "nothing waits", handed: 5, want: true},
		{name: "within its burst", handed: dispatchBurst - 1, waiting: []waiting{{2, time.Second}}, want: true},
		{name: "another's command waits for a slot", handed: dispatchBurst, waiting: []waiting{{2, inTransit}}, want: false},
		{name: "only its own commands wait", handed: dispatchBurst, waiting: []waiting{{1, time.Second}, {1, time.Second}}, want: true},
		{name: "another's command is on its way to a free slot", handed: dispatchBurst,
			waiting: []waiting{{2, inTransit - time.Millisecond}, {3, 0}}, want: true},
		{name: "one of many waits for a slot", handed: dispatchBurst,
			waiting: []waiting{{1, time.Second}, {2, 0}, {3, inTransit}}, want: false},
		{name: "what waits was claimed elsewhere long ago", handed: dispatchBurst, waiting: []waiting{{2, waitingFor}}, want: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDispatch()
			d.handed(slices.Repeat([]int64{1}, c.handed), nil)
			for i, w := range c.waiting {
				d.announced("p", int64(100+i), w.exec, now.Add(-w.age))
			}
			if got := d.mayHandOut("p", 1, now); got != c.want {
				t.Fatalf("mayHandOut = %v, want %v", got, c.want)
			}
		})
	}
	// Yielding starts the burst again.
	d := newDispatch()
	d.handed(slices.Repeat([]int64{1}, dispatchBurst), nil)
	d.announced("p", 100, 2, now.Add(-time.Second))
	d.handed(nil, []int64{1})
	if !d.mayHandOut("p", 1, now) {
		t.Fatal("a burst does not start again after yielding")
	}
}

// TestFairDispatchServesDeferred: what a report's free slots take from the
// deferred queue: the oldest first, never the reporting executions' own,
// none while an announced command has waited longer (that one goes to a
// worker's claim), and nothing claimed meanwhile; what a report did not hand
// out goes back to the front.
func TestFairDispatchServesDeferred(t *testing.T) {
	now := time.Now()
	d := newDispatch()
	d.deferCmds("p", []deferredCmd{{ev: 10, exec: 1, at: now}, {ev: 20, exec: 2, at: now.Add(time.Millisecond)},
		{ev: 30, exec: 3, at: now.Add(2 * time.Millisecond)}, {ev: 40, exec: 4, at: now.Add(3 * time.Millisecond)}})
	evs := func(cs []deferredCmd) []int64 {
		var out []int64
		for _, c := range cs {
			out = append(out, c.ev)
		}
		return out
	}
	if got := d.serve("p", 0, nil); got != nil {
		t.Fatalf("no slot took %v", evs(got))
	}
	if got := d.serve("other", 5, nil); got != nil {
		t.Fatalf("another pool's report took %v", evs(got))
	}
	d.claimed("p", 20) // claimed elsewhere (announced again by the drain)
	if got := evs(d.serve("p", 2, map[int64]bool{1: true})); !slices.Equal(got, []int64{30, 40}) {
		t.Fatalf("served %v, want [30 40]: the oldest not the reporter's own, 20 dropped as claimed", got)
	}
	d.putBack("p", []deferredCmd{{ev: 40, exec: 4, at: now.Add(3 * time.Millisecond)}})
	d.announced("p", 50, 5, now.Add(-10*time.Millisecond)) // announced before everything deferred
	if got := d.serve("p", 3, nil); got != nil {
		t.Fatalf("served %v while an announced command waited longer", evs(got))
	}
	d.claimed("p", 50)
	if got := evs(d.serve("p", 3, nil)); !slices.Equal(got, []int64{40, 10}) {
		t.Fatalf("served %v, want [40 10]: what went back first, then the rest", got)
	}
	if q := d.deferred["p"]; len(q) != 0 {
		t.Fatalf("%d left deferred", len(q))
	}
	// An announced command that waited staleAfter (claimed elsewhere, say)
	// does not hold the queue back.
	d.announced("p", 60, 6, time.Now().Add(-staleAfter))
	d.deferCmds("p", []deferredCmd{{ev: 70, exec: 7, at: time.Now()}})
	if got := evs(d.serve("p", 1, nil)); !slices.Equal(got, []int64{70}) {
		t.Fatalf("served %v behind a stale announcement, want [70]", got)
	}
}

// TestFairDispatchStranded: deferred commands are announced by their
// process only once no report of their pool came for idleFor and the oldest
// has waited that long.
func TestFairDispatchStranded(t *testing.T) {
	now := time.Now()
	d := newDispatch()
	if !d.deferCmds("p", []deferredCmd{{ev: 10, exec: 1, at: now}}) {
		t.Fatal("the first deferral does not schedule the announcer")
	}
	if d.deferCmds("p", []deferredCmd{{ev: 20, exec: 2, at: now}}) {
		t.Fatal("a deferral schedules a second announcer")
	}
	d.serve("p", 0, nil) // a report came, with no slot to spare
	if cs, rearm := d.stranded(now.Add(idleFor / 2)); cs != nil || !rearm {
		t.Fatalf("stranded %v (rearm %v) before idleFor", cs, rearm)
	}
	d.claimed("p", 20)
	cs, rearm := d.stranded(time.Now().Add(idleFor))
	if len(cs) != 1 || cs[0].ev != 10 || rearm {
		t.Fatalf("stranded %v (rearm %v), want 10 alone and no rearm", cs, rearm)
	}
	// Reports keep coming, but a command deferred staleAfter ago is
	// announced anyway; a younger one waits on.
	if !d.deferCmds("p", []deferredCmd{{ev: 30, exec: 3, at: time.Now().Add(-staleAfter)}, {ev: 40, exec: 4, at: time.Now()}}) {
		t.Fatal("a deferral after the announcer stopped does not schedule it again")
	}
	d.serve("p", 0, nil)
	cs, rearm = d.stranded(time.Now())
	if len(cs) != 1 || cs[0].ev != 30 || !rearm {
		t.Fatalf("stranded %v (rearm %v), want 30 alone, 40 waiting on", cs, rearm)
	}
	if d.putBack("p", nil) {
		t.Fatal("putting nothing back schedules the announcer")
	}
}

// TestFairDispatchForgetsWhatItCouldNotAnnounce: a deferred command taken to
// be announced (by announceStranded, or after a report that failed) whose
// announcement failed too is left to the drain; chains past their burst do
// not yield to it meanwhile.
func TestFairDispatchForgetsWhatItCouldNotAnnounce(t *testing.T) {
	d := newDispatch()
	d.deferCmds("p", []deferredCmd{{ev: 10, exec: 1, at: time.Now().Add(-staleAfter)}})
	cs, _ := d.stranded(time.Now())
	if len(cs) != 1 {
		t.Fatalf("stranded %v, want the one deferred staleAfter ago", cs)
	}
	d.handed([]int64{2}, nil) // execution 2 has had its burst
	if d.mayHandOut("p", 2, time.Now()) {
		t.Fatal("execution 2 does not yield while 10 waits to be announced")
	}
	d.forget([]int64{10}) // its announcement failed
	if !d.mayHandOut("p", 2, time.Now()) {
		t.Fatal("execution 2 yields to a command whose announcement failed")
	}
}

// TestFairDispatchStartsOverKeepingWhatIsDeferred: when a pool's waiting
// view reaches maxTracked and starts over, the deferred commands stay in it:
// nothing but this view queues them, and one left out would be served by no
// report and announced by no timer (only by the drain, 10 s on).
func TestFairDispatchStartsOverKeepingWhatIsDeferred(t *testing.T) {
	d := newDispatch()
	now := time.Now()
	d.deferCmds("p", []deferredCmd{{ev: 1, exec: 1, at: now}})
	for i := range maxTracked {
		d.announced("p", int64(10+i), 2, now.Add(-staleAfter)) // claimed elsewhere, say
	}
	if n := len(d.waiting["p"]); n > maxTracked/2 {
		t.Fatalf("%d entries waiting after the start over", n)
	}
	if got := d.serve("p", 1, nil); len(got) != 1 || got[0].ev != 1 {
		t.Fatalf("served %v after the start over, want the deferred command 1", got)
	}
	// The queue's own bound leaves its older half to the drain, and out of
	// the view.
	var cs []deferredCmd
	for i := range maxTracked / 2 {
		cs = append(cs, deferredCmd{ev: int64(1_000_000 + i), exec: 3, at: now})
	}
	d.deferCmds("p", cs)
	d.deferCmds("p", []deferredCmd{{ev: 2_000_000, exec: 4, at: now}})
	if _, ok := d.waiting["p"][1_000_000]; ok {
		t.Fatal("a command dropped from the queue still counts as waiting")
	}
	if _, ok := d.waiting["p"][2_000_000]; !ok {
		t.Fatal("the newest deferred command does not count as waiting")
	}
}

// TestFairDispatchKeepsQueuedForReports: a deferred command whose
// announcement was written but not published (queued) is not announced
// again by the announcer; reports may still take it, and once it waited
// waitingFor it is left to the drain's publish, out of view.
func TestFairDispatchKeepsQueuedForReports(t *testing.T) {
	d := newDispatch()
	now := time.Now()
	d.putBack("p", []deferredCmd{{ev: 10, exec: 1, at: now.Add(-staleAfter), queued: true}})
	if cs, rearm := d.stranded(now.Add(idleFor)); cs != nil || !rearm {
		t.Fatalf("stranded %v (rearm %v), want nothing announced and 10 kept", cs, rearm)
	}
	if got := d.serve("p", 1, nil); len(got) != 1 || got[0].ev != 10 {
		t.Fatalf("served %v, want the queued command 10", got)
	}
	d.putBack("p", []deferredCmd{{ev: 20, exec: 2, at: now.Add(-waitingFor), queued: true}})
	if cs, rearm := d.stranded(now); cs != nil || rearm {
		t.Fatalf("stranded %v (rearm %v), want 20 dropped", cs, rearm)
	}
	if _, ok := d.waiting["p"][20]; ok {
		t.Fatal("a queued command past waitingFor still counts as waiting")
	}
}

// TestFairDispatchYieldsNotWhilePublishingFails: a failed publish stops the
// yielding until one succeeds, and for unpublishedFor at most.
func TestFairDispatchYieldsNotWhilePublishingFails(t *testing.T) {
	d := newDispatch()
	now := time.Now()
	d.announced("p", 10, 1, now.Add(-inTransit)) // waits for a slot
	d.handed([]int64{2}, nil)                    // execution 2 has had its burst
	if d.mayHandOut("p", 2, now) {
		t.Fatal("execution 2 does not yield to 10")
	}
	d.published(false)
	if !d.mayHandOut("p", 2, now) {
		t.Fatal("execution 2 yields while publishing fails")
	}
	if d.mayHandOut("p", 2, time.Now().Add(unpublishedFor)) {
		t.Fatal("a failed publish still stops the yielding unpublishedFor later")
	}
	d.published(true)
	if d.mayHandOut("p", 2, now) {
		t.Fatal("execution 2 does not yield once a publish succeeded")
	}
	// A command deferred after 10 was announced goes after it, unless
	// publishing fails: then 10 reaches no worker and holds nothing back.
	d.announced("p", 20, 1, time.Now())
	d.deferCmds("p", []deferredCmd{{ev: 30, exec: 3, at: time.Now()}})
	if got := d.serve("p", 1, nil); got != nil {
		t.Fatalf("served %v ahead of the announced 20", got)
	}
	d.published(false)
	if got := d.serve("p", 1, nil); len(got) != 1 || got[0].ev != 30 {
		t.Fatalf("served %v while publishing fails, want 30", got)
	}
}
