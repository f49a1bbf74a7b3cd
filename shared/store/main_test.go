package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/dev/devstack"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/store"
)

func TestMain(m *testing.M) { devstacktest.Main(m, openExample) }

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// newStore gives the test fresh, migrated databases (cluster + shards shard databases)
// and an open Store over them.
func newStore(t *testing.T, shards int) (*store.Store, *devstack.Postgres) {
	t.Helper()
	ctx := testContext(t)
	pg := devstacktest.Postgres(t, shards)
	cfg := store.Config{ClusterDSN: pg.ClusterDSN, ShardDSNs: pg.ShardDSNs, MaxConns: 20}
	if err := store.Migrate(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, pg
}

// inTx runs fn in a transaction on db and fails the test on error.
func inTx(t *testing.T, db store.DB, fn func(tx pgx.Tx) error) {
	t.Helper()
	if err := pgx.BeginFunc(testContext(t), db, fn); err != nil {
		t.Fatal(err)
	}
}

func mustExec(t *testing.T, q store.Querier, sql string, args ...any) {
	t.Helper()
	if _, err := q.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func allocate(t *testing.T, sh *store.Shard, n int) []int64 {
	t.Helper()
	got, err := store.AllocateIDs(testContext(t), sh.Pool(), sh.Index(), n)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// write commits ch on sh the way the control plane does (store.Tx.Write,
// then COMMIT).
func write(ctx context.Context, sh *store.Shard, ch *store.Changes) error {
	tx, err := sh.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := tx.Write(ch); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// mustWrite is write that fails the test on error.
func mustWrite(t *testing.T, sh *store.Shard, ch *store.Changes) {
	t.Helper()
	if err := write(testContext(t), sh, ch); err != nil {
		t.Fatal(err)
	}
}

// lock begins a store.Tx on sh holding the locks of ls (read into ls); the
// test rolls it back or commits it.
func lock(t *testing.T, sh *store.Shard, ls *store.LockSet) *store.Tx {
	t.Helper()
	ctx := testContext(t)
	tx, err := sh.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	if err := tx.Lock(ctx, ls); err != nil {
		t.Fatal(err)
	}
	return tx
}

// newExecution inserts a RUNNING execution on sh and returns it.
func newExecution(t *testing.T, sh *store.Shard, mutate func(*store.Execution)) store.Execution {
	t.Helper()
	e := store.Execution{
		ExecutionID: allocate(t, sh, 1)[0], CatalogID: 1, Path: "tests/example", Version: 1,
		Pool: "shared", Workload: map[string]any{"n": int64(1)},
	}
	if mutate != nil {
		mutate(&e)
	}
	mustWrite(t, sh, &store.Changes{NewExecutions: []store.Execution{e}})
	stored, err := store.GetExecution(testContext(t), sh.Pool(), e.ExecutionID)
	if err != nil {
		t.Fatalf("insert execution: %v", err)
	}
	return stored
}
