package controlplane_test

import (
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/controlplane/cptest"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

// TestAssumedClockFollowsTheRowsStamp (issue 29): the database stamps an
// execution's updated_at as it writes the row, later than the txn read its
// clock; the next report, arriving at once on a loaded machine, must not
// assume a clock before that stamp (its guard would fail, and the step pay
// the lock path's round trips). The process's estimate is made to lag by an
// hour: the report still costs one round trip, and its events come after
// the log's (R-S4).
func TestAssumedClockFollowsTheRowsStamp(t *testing.T) {
	cs := cptest.New(t, 1)
	db := &store.Counter{}
	st, err := store.Open(cs.Ctx, store.Config{ClusterDSN: cs.PG.ClusterDSN, ShardDSNs: cs.PG.ShardDSNs, MaxConns: 4, Tracer: db})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	svc, err := controlplane.New(controlplane.Config{Store: st, ServerURL: "http://test", Lease: time.Minute, Publisher: cs.Publisher})
	if err != nil {
		t.Fatal(err)
	}
	ctx := cs.Ctx
	if _, err := svc.Register(ctx, cptest.ThreeSteps); err != nil {
		t.Fatal(err)
	}
	started, err := svc.Execute(ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	if err != nil {
		t.Fatal(err)
	}
	id := started.ExecutionID
	sh, _ := st.ShardFor(id)
	cmds, err := storetest.ActiveCommands(ctx, sh.Pool(), id)
	if err != nil || len(cmds) != 1 {
		t.Fatalf("the first command: %v %v", cmds, err)
	}
	body, err := svc.Claim(ctx, cmds[0].IssuedEventID, "w1", true)
	if err != nil {
		t.Fatal(err)
	}
	// start's completion hands out middle, claimed and started.
	out, err := svc.Report(ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1,
		Events: []controlplane.EventInput{completion(body, "w1", map[string]any{"n": int64(1)})}})
	if err != nil || out.Events[0].Err != nil || len(out.Commands) != 1 {
		t.Fatalf("start's report: %v %+v", err, out)
	}
	middle := out.Commands[0]
	if !svc.LagClock(id, time.Hour) {
		t.Fatal("the report's commit left no cache entry")
	}
	before := db.Snapshot()
	out, err = svc.Report(ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1,
		Events: []controlplane.EventInput{completion(middle, "w1", nil)}})
	if err != nil || out.Events[0].Err != nil {
		t.Fatalf("middle's report: %v %+v", err, out)
	}
	if work := db.Snapshot().Sub(before); work.RoundTrips != 1 || work.Commits != 1 {
		t.Errorf("middle's completion took %d round trips and %d commits: want one of each (the assumed txn)", work.RoundTrips, work.Commits)
	}
	var backwards int
	if err := sh.Pool().QueryRow(ctx, `SELECT count(*) FROM event a JOIN event b USING (execution_id)
		WHERE execution_id = $1 AND b.seq = a.seq + 1 AND b.created_at < a.created_at`, id).Scan(&backwards); err != nil {
		t.Fatal(err)
	}
	if backwards > 0 {
		t.Errorf("%d events are stamped before the event they follow (R-S4)", backwards)
	}
}
