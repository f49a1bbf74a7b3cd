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
	if d.mayHandOut("p", 1, now) {
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
