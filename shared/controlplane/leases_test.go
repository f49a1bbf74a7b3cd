package controlplane_test

import (
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

// timeLimited is a step with a time limit of 2 s and one retry.
const timeLimited = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: time_limited, path: tests/time_limited}
workflow:
  - step: start
    tool: {kind: noop}
    timeout: 2
    retry: {max_attempts: 2, delay: 0}
`

// TestPoolHeartbeatsEndAtTheTimeLimit: a worker that holds a command it
// cannot report (it finished, and its answer never gets through) keeps
// pool-heartbeating; its lease is extended while it lasts, but never past
// the step's time limit (deadline + grace, lifecycle.LeaseEnd), and then the
// command fails for it and is retried, pool heartbeats notwithstanding.
func TestPoolHeartbeatsEndAtTheTimeLimit(t *testing.T) {
	const grace = 300 * time.Millisecond
	s := newStack(t, func(c *controlplane.Config) { c.Lease = time.Second; c.DeadlineGrace = grace })
	s.register(t, timeLimited)
	if _, err := s.svc.RegisterWorker(s.ctx, noetlwire.Registration{Name: "stuck", Pool: "shared", Runtime: "python", Instance: "1"}); err != nil {
		t.Fatal(err)
	}
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/time_limited"})
	if err != nil {
		t.Fatal(err)
	}
	c := s.pending(t, st.ExecutionID)[0]
	if _, err := s.svc.Claim(s.ctx, c.IssuedEventID, "stuck", true); err != nil {
		t.Fatal(err)
	}
	sh, _ := s.st.ShardFor(st.ExecutionID)
	extended, capped := 0, 0
	for beats := 0; ; beats++ {
		if beats == 200 {
			t.Fatalf("the command was never ended after %d pool heartbeats (%d extended a lease)", beats, extended)
		}
		w, _, err := s.svc.WorkerHeartbeat(s.ctx, "stuck", nil)
		if err != nil {
			t.Fatal(err)
		}
		extended += int(w.LeasesExtended)
		row, err := storetest.Command(s.ctx, sh.Pool(), c.CommandID)
		if err != nil {
			t.Fatal(err)
		}
		if row.Attempt > 1 {
			break
		}
		if limit := row.DeadlineAt.Add(grace); row.LeaseExpiresAt.After(limit) {
			t.Fatalf("beat %d: the lease runs to %v, past the time limit %v (deadline %v + grace %s)", beats, row.LeaseExpiresAt, limit, row.DeadlineAt, grace)
		} else if row.LeaseExpiresAt.Equal(limit) {
			capped++
		}
		if _, err := s.svc.Drain(s.ctx, 100); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if extended == 0 || capped == 0 {
		t.Fatalf("pool heartbeats extended %d leases, %d of them up to the time limit; want both", extended, capped)
	}
	retried, err := storetest.Command(s.ctx, sh.Pool(), c.CommandID)
	if err != nil || retried.Status != store.CommandPending || retried.Attempt != 2 || retried.WorkerID != "" {
		t.Fatalf("after the time limit: %+v %v; want attempt 2 pending", retried, err)
	}
	evs, _ := s.svc.Events(s.ctx, store.EventFilter{ExecutionID: st.ExecutionID, Limit: 100})
	found := false
	for _, e := range evs {
		if e.EventType == "command.failed" && e.Meta["class"] == "timeout" && strings.Contains(e.Error, "timeout of 2s") {
			found = true
		}
	}
	if !found {
		t.Fatal("no command.failed {class: timeout} naming the 2 s time limit")
	}
	body, err := s.svc.Claim(s.ctx, c.IssuedEventID, "healthy", true)
	if err != nil || body.Attempt != 2 {
		t.Fatalf("claim of the retry: %+v %v", body, err)
	}
	s.report(t, body, "healthy", nil)
	if v := s.execution(t, st.ExecutionID); v.Row.Status != lifecycle.ExecutionCompleted {
		t.Fatalf("status %s", v.Row.Status)
	}
}

// TestOurWorkersPoolBeatKeepsNoLease: our worker heartbeats each command it
// runs, so its pool beat extends no lease: a command it holds but no longer
// runs (a result it cannot deliver) ends with its lease and is retried.
// NoETL's Rust worker, which heartbeats no command, keeps its leases by the
// pool beat.
func TestOurWorkersPoolBeatKeepsNoLease(t *testing.T) {
	s := newStack(t, func(c *controlplane.Config) { c.Lease = 2 * time.Second })
	s.register(t, threeStepsNoDelay)
	sh := func(id int64) *store.Shard { sh, _ := s.st.ShardFor(id); return sh }
	for _, c := range []struct {
		runtime string
		extends int64
	}{{"go", 0}, {"rust", 1}} {
		name := "beater-" + c.runtime
		if _, err := s.svc.RegisterWorker(s.ctx, noetlwire.Registration{Name: name, Pool: "shared", Runtime: c.runtime, Instance: "1"}); err != nil {
			t.Fatal(err)
		}
		st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
		if err != nil {
			t.Fatal(err)
		}
		cmd := s.pending(t, st.ExecutionID)[0]
		if _, err := s.svc.Claim(s.ctx, cmd.IssuedEventID, name, true); err != nil {
			t.Fatal(err)
		}
		before, _ := storetest.Command(s.ctx, sh(st.ExecutionID).Pool(), cmd.CommandID)
		time.Sleep(20 * time.Millisecond)
		w, _, err := s.svc.WorkerHeartbeat(s.ctx, name, nil)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := storetest.Command(s.ctx, sh(st.ExecutionID).Pool(), cmd.CommandID)
		if w.LeasesExtended != c.extends || after.LeaseExpiresAt.After(before.LeaseExpiresAt) != (c.extends == 1) {
			t.Errorf("a %s worker's pool beat extended %d leases (%v → %v), want %d", c.runtime, w.LeasesExtended,
				before.LeaseExpiresAt, after.LeaseExpiresAt, c.extends)
		}
	}
}
