package controlplane_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/controlplane/cptest"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

// TestMoreRequestsThanConnections: with many more executes and ingests in
// flight than pooled connections, and an id block of one (every event id is
// a refill), everything completes. A refill that took a second connection
// while its transaction held one deadlocked once every connection was inside
// such a transaction; the deadline below only bounds that hang.
func TestMoreRequestsThanConnections(t *testing.T) {
	cs := cptest.New(t, 1)
	const conns = 10 // the local default (noetl dev, noetl serve)
	st, err := store.Open(cs.Ctx, store.Config{ClusterDSN: cs.PG.ClusterDSN, ShardDSNs: cs.PG.ShardDSNs, MaxConns: conns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	svc, err := controlplane.New(controlplane.Config{Store: st, Publisher: cs.Publisher, ServerURL: "http://test", IDBlock: 1})
	if err != nil {
		t.Fatal(err)
	}
	entry, err := svc.Register(cs.Ctx, cptest.ThreeSteps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(cs.Ctx, 2*time.Minute)
	defer cancel()
	const inFlight = 4 * conns
	var wg sync.WaitGroup
	errs := make(chan error, inFlight)
	for range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started, err := svc.Execute(ctx, controlplane.ExecuteRequest{Path: entry.Entry.Path})
			if err != nil {
				errs <- err
				return
			}
			sh, _ := st.ShardFor(started.ExecutionID)
			cmds, err := storetest.ActiveCommands(ctx, sh.Pool(), started.ExecutionID)
			if err != nil || len(cmds) != 1 {
				errs <- err
				return
			}
			if _, err := svc.Claim(ctx, cmds[0].IssuedEventID, "w1", false); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("with %d requests over %d connections: %v", inFlight, conns, err)
	}
}
