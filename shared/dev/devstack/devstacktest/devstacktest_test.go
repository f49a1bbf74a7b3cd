package devstacktest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
)

func TestMain(m *testing.M) { Main(m) }

func count(t *testing.T, dsn, sql string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPostgresPerTestDatabases(t *testing.T) {
	var firstAdmin string
	var names []string
	t.Run("first", func(t *testing.T) {
		pg := Postgres(t, 2)
		firstAdmin = pg.Server().AdminDSN()
		for _, dsn := range append([]string{pg.ClusterDSN}, pg.ShardDSNs...) {
			cfg, err := pgx.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, cfg.Database)
		}
	})
	t.Run("second", func(t *testing.T) {
		pg := Postgres(t, 0)
		if pg.Server().AdminDSN() != firstAdmin {
			t.Errorf("second test got another server: %s vs %s", pg.Server().AdminDSN(), firstAdmin)
		}
		if len(pg.ShardDSNs) != 1 || pg.ShardDSNs[0] != pg.ClusterDSN {
			t.Errorf("single-database mode: %v", pg)
		}
		for _, name := range names {
			if n := count(t, firstAdmin, "SELECT count(*)::int FROM pg_database WHERE datname = $1", name); n != 0 {
				t.Errorf("database %s of the first test still exists", name)
			}
		}
	})
	if len(names) != 3 {
		t.Fatalf("first test saw databases %v, want 3", names)
	}
}

func TestNATSPerTest(t *testing.T) {
	n := NATS(t)
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !nc.IsConnected() {
		t.Fatal("not connected")
	}
}
