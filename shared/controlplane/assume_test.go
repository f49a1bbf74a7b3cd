package controlplane_test

import (
	"context"
	"encoding/json"
	"errors"
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
	cs, st, db, svc := counted(t)
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

// TestAssumedClaim (issue 29): a report that claims a command this process
// issued and announced (a worker heard of it from NATS) claims it in the
// assumed txn: one round trip, the payload from the cache equal to the row's.
// When the row's payload was edited, or another process claimed it first, the
// guard fails and the lock path hands out the edit, or refuses the claim.
func TestAssumedClaim(t *testing.T) {
	cs, st, db, svc := counted(t)
	// Another process over the same databases, with a cache of its own.
	other, err := controlplane.New(controlplane.Config{Store: cs.Store, ServerURL: "http://test", Lease: time.Minute, Publisher: cs.Publisher})
	if err != nil {
		t.Fatal(err)
	}
	ctx := cs.Ctx
	if _, err := svc.Register(ctx, cptest.ThreeSteps); err != nil {
		t.Fatal(err)
	}
	sh, cmd := firstCommand(t, svc, st)
	before := db.Snapshot()
	out, err := svc.Report(ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1, Claims: []int64{cmd.IssuedEventID}})
	if err != nil || out.Claims[0].Err != nil || len(out.Commands) != 1 {
		t.Fatalf("the claim: %v %+v", err, out)
	}
	claimedAssumed(t, db.Snapshot().Sub(before), sh, cmd, out.Commands[0], store.CommandRunning)

	// Its payload edited in the database by hand: the guard sees the edit,
	// and the lock path hands out the row's payload.
	sh, cmd = firstCommand(t, svc, st)
	if _, err := sh.Pool().Exec(ctx, `UPDATE command SET context = '{"edited": true}' WHERE command_id = $1`, cmd.CommandID); err != nil {
		t.Fatal(err)
	}
	before = db.Snapshot()
	out, err = svc.Report(ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1, Claims: []int64{cmd.IssuedEventID}})
	if err != nil || out.Claims[0].Err != nil || len(out.Commands) != 1 || out.Commands[0].Context["edited"] != true {
		t.Fatalf("the claim of an edited command: %v %+v", err, out)
	}
	if work := db.Snapshot().Sub(before); work.RoundTrips < 2 {
		t.Errorf("the claim of an edited command took %d round trips: want the failed assumption and the lock path", work.RoundTrips)
	}

	// Claimed first through another process: this one's cache is stale.
	sh, cmd = firstCommand(t, svc, st)
	if _, err := other.Claim(ctx, cmd.IssuedEventID, "w2", true); err != nil {
		t.Fatal(err)
	}
	before = db.Snapshot()
	out, err = svc.Report(ctx, controlplane.Report{WorkerID: "w1", Pool: "shared", Take: 1, Claims: []int64{cmd.IssuedEventID}})
	var refused *controlplane.RefusedClaim
	if err != nil || !errors.As(out.Claims[0].Err, &refused) || refused.Code != controlplane.ClaimActive || len(out.Commands) != 0 {
		t.Fatalf("a claim of a command w2 holds: %v %+v", err, out)
	}
	if work := db.Snapshot().Sub(before); work.RoundTrips < 2 {
		t.Errorf("the refused claim took %d round trips: want the failed assumption and the lock path", work.RoundTrips)
	}
	if row, err := storetest.Command(ctx, sh.Pool(), cmd.CommandID); err != nil || row.WorkerID != "w2" {
		t.Errorf("the command's holder: %+v %v", row, err)
	}
}

// TestAssumedClaimRoute (issue 29): the claim route NoETL's workers call is
// assumed as a claim in our worker's report is: a pending command this
// process issued is claimed in one round trip, with the payload its cache
// kept; a second claim of it (NoETL's worker hears each notification twice)
// and a claim of a payload edited by hand are answered from the lock path.
func TestAssumedClaimRoute(t *testing.T) {
	cs, st, db, svc := counted(t)
	ctx := cs.Ctx
	if _, err := svc.Register(ctx, cptest.ThreeSteps); err != nil {
		t.Fatal(err)
	}
	sh, cmd := firstCommand(t, svc, st)
	before := db.Snapshot()
	body, err := svc.Claim(ctx, cmd.IssuedEventID, "w1", false)
	if err != nil {
		t.Fatal(err)
	}
	claimedAssumed(t, db.Snapshot().Sub(before), sh, cmd, body, store.CommandClaimed)

	// The same command claimed again, by another consumer: refused, its
	// holder unchanged.
	before = db.Snapshot()
	_, err = svc.Claim(ctx, cmd.IssuedEventID, "w2", false)
	var refused *controlplane.RefusedClaim
	if !errors.As(err, &refused) || refused.Code != controlplane.ClaimActive {
		t.Fatalf("a second claim: %v, want %s", err, controlplane.ClaimActive)
	}
	if work := db.Snapshot().Sub(before); work.RoundTrips < 2 {
		t.Errorf("the refused claim took %d round trips: want the lock path's", work.RoundTrips)
	}
	if row, err := storetest.Command(ctx, sh.Pool(), cmd.CommandID); err != nil || row.WorkerID != "w1" {
		t.Errorf("the command's holder: %+v %v", row, err)
	}

	// Its payload edited in the database by hand: the guard sees the edit,
	// and the lock path hands out the row's payload.
	sh, cmd = firstCommand(t, svc, st)
	if _, err := sh.Pool().Exec(ctx, `UPDATE command SET context = '{"edited": true}' WHERE command_id = $1`, cmd.CommandID); err != nil {
		t.Fatal(err)
	}
	before = db.Snapshot()
	body, err = svc.Claim(ctx, cmd.IssuedEventID, "w1", false)
	if err != nil || body.Context["edited"] != true {
		t.Fatalf("the claim of an edited command: %v %+v", err, body)
	}
	if work := db.Snapshot().Sub(before); work.RoundTrips < 2 {
		t.Errorf("the claim of an edited command took %d round trips: want the failed assumption and the lock path", work.RoundTrips)
	}
}

// firstCommand starts tests/three (registered by the caller) and returns its
// shard and its first command, pending.
func firstCommand(t *testing.T, svc *controlplane.Service, st *store.Store) (*store.Shard, store.Command) {
	t.Helper()
	ctx := context.Background()
	started, err := svc.Execute(ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	if err != nil {
		t.Fatal(err)
	}
	sh, _ := st.ShardFor(started.ExecutionID)
	cmds, err := storetest.ActiveCommands(ctx, sh.Pool(), started.ExecutionID)
	if err != nil || len(cmds) != 1 {
		t.Fatalf("the first command: %v %v", cmds, err)
	}
	return sh, cmds[0]
}

// claimedAssumed checks a claim of cmd by w1 that the assumed txn answered:
// one round trip and one commit (work), the row in status and held by w1,
// and the body's payload, from the cache, the row's.
func claimedAssumed(t *testing.T, work store.CounterSnapshot, sh *store.Shard, cmd store.Command, body *controlplane.CommandBody, status string) {
	t.Helper()
	if work.RoundTrips != 1 || work.Commits != 1 {
		t.Errorf("the claim took %d round trips and %d commits: want one of each (the assumed txn)", work.RoundTrips, work.Commits)
	}
	row, err := storetest.Command(context.Background(), sh.Pool(), cmd.CommandID)
	if err != nil {
		t.Fatal(err)
	}
	if body.CommandID != cmd.CommandID || body.WorkerID != "w1" || row.Status != status || row.WorkerID != "w1" {
		t.Errorf("claimed %+v; the row %+v", body, row)
	}
	if got, want := jsonOf(t, body.Context), jsonOf(t, row.Context); got != want || len(body.Context) == 0 {
		t.Errorf("the payload from the cache:\n%s\nthe row's:\n%s", got, want)
	}
}

// counted is a service over a store whose database work is counted.
func counted(t *testing.T) (*cptest.Stack, *store.Store, *store.Counter, *controlplane.Service) {
	t.Helper()
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
	return cs, st, db, svc
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
