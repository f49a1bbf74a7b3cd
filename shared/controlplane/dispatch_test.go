package controlplane_test

import (
	"slices"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/dev/bench"
)

// TestFairDispatchBoundsABurst (issue 29): while a command of its pool waits
// (announced, unclaimed), a running chain gets at most a bounded burst of
// commands in a row by eager dispatch; its next one is announced instead,
// behind the waiting one. With nothing waiting, eager dispatch is unbounded.
func TestFairDispatchBoundsABurst(t *testing.T) {
	s := newStack(t)
	entry := s.register(t, bench.Chain("tests/fair", 30))
	a, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: entry.Path})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: entry.Path})
	if err != nil {
		t.Fatal(err)
	}
	body, err := s.svc.Claim(s.ctx, s.pending(t, a.ExecutionID)[0].IssuedEventID, "w1", true)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(controlplane.InTransit) // b's command now waits for a slot
	// run reports a's steps one by one, Take 1, until an answer hands out
	// nothing; it returns how many it handed out in a row.
	run := func() int {
		n := 0
		for {
			out, err := s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1,
				Events: []controlplane.EventInput{completion(body, "w1", nil)}})
			if err != nil || out.Events[0].Err != nil {
				t.Fatalf("report: %v %+v", err, out)
			}
			if len(out.Commands) == 0 {
				return n
			}
			n++
			body = out.Commands[0]
		}
	}
	if n := run(); n != 1 {
		t.Fatalf("with b's first command waiting, a got %d commands in a row, want a burst of 1", n)
	}
	next := s.pending(t, a.ExecutionID)
	if len(next) != 1 || s.pending(t, b.ExecutionID)[0].Step != "start" {
		t.Fatalf("a's next command %+v: want it announced, pending behind b's", next)
	}
	// The longest-waiting first: b's, then a's.
	if _, err := s.svc.Claim(s.ctx, s.pending(t, b.ExecutionID)[0].IssuedEventID, "w2", true); err != nil {
		t.Fatal(err)
	}
	if body, err = s.svc.Claim(s.ctx, next[0].IssuedEventID, "w1", true); err != nil {
		t.Fatal(err)
	}
	// Nothing waits now: a's chain runs to its end by eager dispatch.
	if n := run(); n != 30-3 {
		t.Fatalf("with nothing waiting, a got %d commands in a row, want the chain's remaining %d", n, 30-3)
	}
}

// TestFairDispatchServesInTurn: chains sharing one slot are served in turn,
// each its burst at a time, the longest-waiting first: a command not handed
// back is announced and queues behind those announced before it (the
// stream's order, kept here by the test as NATS keeps it), and the slot's
// next claim takes the front of the queue. Without fair dispatch the first
// chain would run to its end before the others started.
func TestFairDispatchServesInTurn(t *testing.T) {
	s := newStack(t)
	entry := s.register(t, bench.Chain("tests/turn", 6))
	names := map[int64]string{}
	var queue []int64 // executions whose pending command waits, in announcement order
	for _, name := range []string{"a", "b", "c"} {
		x, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: entry.Path})
		if err != nil {
			t.Fatal(err)
		}
		names[x.ExecutionID] = name
		queue = append(queue, x.ExecutionID)
	}
	var served []string
	claims, handed := 0, 0
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		body, err := s.svc.Claim(s.ctx, s.pending(t, id)[0].IssuedEventID, "w1", true)
		if err != nil {
			t.Fatal(err)
		}
		claims++
		for body != nil {
			served = append(served, names[body.ExecutionID]+":"+body.Step)
			time.Sleep(controlplane.InTransit) // what was announced waits for the slot
			out, err := s.svc.Report(s.ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1,
				Events: []controlplane.EventInput{completion(body, "w1", nil)}})
			if err != nil || out.Events[0].Err != nil {
				t.Fatalf("report: %v %+v", err, out)
			}
			if len(out.Commands) == 1 {
				handed++
				body = out.Commands[0]
				continue
			}
			if len(s.pending(t, body.ExecutionID)) == 1 {
				queue = append(queue, body.ExecutionID) // yielded: announced, behind the others
			}
			body = nil
		}
	}
	want := []string{"a:start", "a:s2", "b:start", "b:s2", "c:start", "c:s2", "a:s3", "a:s4", "b:s3", "b:s4",
		"c:s3", "c:s4", "a:s5", "a:s6", "b:s5", "b:s6", "c:s5", "c:s6"}
	if !slices.Equal(served, want) {
		t.Fatalf("served in the order\n%v\nwant\n%v", served, want)
	}
	// One claim (a notification) per burst: half the steps went by the queue.
	if claims != 9 || handed != 9 {
		t.Fatalf("%d claims and %d commands handed back, want 9 and 9", claims, handed)
	}
}
