package controlplane_test

import (
	"testing"

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
	if n := run(); n != 8 {
		t.Fatalf("with b's first command waiting, a got %d commands in a row, want a burst of 8", n)
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
	if n := run(); n != 30-10 {
		t.Fatalf("with nothing waiting, a got %d commands in a row, want the chain's remaining %d", n, 30-10)
	}
}
