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
