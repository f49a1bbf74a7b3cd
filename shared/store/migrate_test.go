package store_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/ids"
	"github.com/noetl-go/noetl/shared/store"
)

func TestEmbeddedMigrations(t *testing.T) {
	for _, set := range []string{store.SetCluster, store.SetShard} {
		ms, err := store.Migrations(set)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) == 0 {
			t.Fatalf("no %s migrations", set)
		}
		for i, m := range ms {
			if m.Version != i+1 || m.Set != set || !strings.HasSuffix(m.Name, ".sql") || m.SQL == "" {
				t.Errorf("%s migration %d: %+v", set, i, m.Name)
			}
		}
	}
	if _, err := store.Migrations("nope"); err == nil {
		t.Error("unknown set accepted")
	}
}

func countRows(t *testing.T, dsn, sql string, args ...any) int {
	t.Helper()
	ctx := testContext(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func migrationCount(t *testing.T, set string) int {
	ms, err := store.Migrations(set)
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

func TestMigrateIdempotent(t *testing.T) {
	ctx := testContext(t)
	pg := devstacktest.Postgres(t, 2)
	cfg := store.Config{ClusterDSN: pg.ClusterDSN, ShardDSNs: pg.ShardDSNs}
	for run := 0; run < 3; run++ {
		if err := store.Migrate(ctx, cfg); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	const q = `SELECT count(*)::int FROM schema_migrations WHERE set_name = $1`
	if got, want := countRows(t, pg.ClusterDSN, q, store.SetCluster), migrationCount(t, store.SetCluster); got != want {
		t.Errorf("cluster: %d migration rows, want %d", got, want)
	}
	if got := countRows(t, pg.ClusterDSN, q, store.SetShard); got != 0 {
		t.Errorf("cluster database got %d shard migrations in sharded mode", got)
	}
	for i, dsn := range pg.ShardDSNs {
		if got, want := countRows(t, dsn, q, store.SetShard), migrationCount(t, store.SetShard); got != want {
			t.Errorf("shard %d: %d migration rows, want %d", i, got, want)
		}
		if got := countRows(t, dsn, `SELECT shard_index FROM shard_info`); got != i {
			t.Errorf("shard %d records index %d", i, got)
		}
	}
}

func TestMigrateSingleDatabase(t *testing.T) {
	ctx := testContext(t)
	pg := devstacktest.Postgres(t, 0)
	cfg := store.Config{ClusterDSN: pg.ClusterDSN} // no shards: the cluster is shard 0
	if err := store.Migrate(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := store.Migrate(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.NumShards() != 1 || s.Shard(0).Pool() != s.Cluster() {
		t.Errorf("single database: %d shards, shared pool %v", s.NumShards(), s.Shard(0).Pool() == s.Cluster())
	}
	for _, table := range []string{"catalog", "execution", "event", "command", "outbox", "step_result"} {
		if n := countRows(t, pg.ClusterDSN, `SELECT count(*)::int FROM pg_tables WHERE tablename = $1`, table); n != 1 {
			t.Errorf("table %s missing in the single database", table)
		}
	}
}

// TestMigrateConcurrent races migrators on fresh databases: every one succeeds and each
// migration is applied once.
func TestMigrateConcurrent(t *testing.T) {
	ctx := testContext(t)
	pg := devstacktest.Postgres(t, 2)
	cfg := store.Config{ClusterDSN: pg.ClusterDSN, ShardDSNs: pg.ShardDSNs}
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	start := make(chan struct{})
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = store.Migrate(ctx, cfg)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	for i, dsn := range pg.ShardDSNs {
		if got, want := countRows(t, dsn, `SELECT count(*)::int FROM schema_migrations`), migrationCount(t, store.SetShard); got != want {
			t.Errorf("shard %d: %d migration rows, want %d", i, got, want)
		}
	}
	if got, want := countRows(t, pg.ClusterDSN, `SELECT count(*)::int FROM schema_migrations`), migrationCount(t, store.SetCluster); got != want {
		t.Errorf("cluster: %d migration rows, want %d", got, want)
	}
}

func TestOpenChecksShardMap(t *testing.T) {
	ctx := testContext(t)
	pg := devstacktest.Postgres(t, 2)
	cfg := store.Config{ClusterDSN: pg.ClusterDSN, ShardDSNs: pg.ShardDSNs}

	if _, err := store.Open(ctx, cfg); err == nil || !strings.Contains(err.Error(), "noetl migrate") {
		t.Fatalf("Open before Migrate: %v, want a hint to migrate", err)
	}
	if err := store.Migrate(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	swapped := store.Config{ClusterDSN: pg.ClusterDSN, ShardDSNs: []string{pg.ShardDSNs[1], pg.ShardDSNs[0]}}
	if _, err := store.Open(ctx, swapped); !errors.Is(err, store.ErrShardMismatch) {
		t.Errorf("Open with swapped shards: %v, want ErrShardMismatch", err)
	}
	if err := store.Migrate(ctx, swapped); !errors.Is(err, store.ErrShardMismatch) {
		t.Errorf("Migrate with swapped shards: %v, want ErrShardMismatch", err)
	}
	s, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestRouting(t *testing.T) {
	s, _ := newStore(t, 2)
	if s.NumShards() != 2 {
		t.Fatalf("NumShards = %d", s.NumShards())
	}
	var seen [2]int
	for range 10 {
		seen[s.NextShard().Index()]++
	}
	if seen != [2]int{5, 5} {
		t.Errorf("round robin over 10 picks: %v", seen)
	}
	s.PinShard(1)
	for range 3 {
		if got := s.NextShard().Index(); got != 1 {
			t.Errorf("pinned NextShard = %d", got)
		}
	}
	s.PinShard(-1)
	a, b := s.NextShard().Index(), s.NextShard().Index()
	if a == b {
		t.Errorf("round robin not restored: %d, %d", a, b)
	}
	for i := range 2 {
		id := allocate(t, s.Shard(i), 1)[0]
		sh, err := s.ShardFor(id)
		if err != nil || sh.Index() != i {
			t.Errorf("ShardFor(%d) = %v, %v; want shard %d", id, sh, err, i)
		}
	}
	if _, err := s.ShardFor(ids.Compose(5, 7)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ShardFor on an unconfigured shard: %v", err)
	}
	if s.ShardForKey("k-1") != s.ShardForKey("k-1") {
		t.Error("ShardForKey not stable")
	}
}
