package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/dev/devstack"
	"github.com/noetl-go/noetl/shared/ids"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
)

const (
	benchExecutions = 100_000
	benchShards     = 2
	benchPaths      = 10
)

// BenchmarkListExecutions measures GET /api/executions through the API layer
// over 100,000 executions on 2 shards (seeded with COPY), paging forward with
// keyset cursors from the newest to the oldest and around again, and reports
// the p50 and p99 of single requests. Durability is on (fsync,
// synchronous_commit, full_page_writes); the settings are logged.
//
//	go test ./shared/api -run '^$' -bench BenchmarkListExecutions -benchtime 3000x
func BenchmarkListExecutions(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pg, err := devstack.StartPostgres(ctx, devstack.PostgresOptions{Shards: benchShards, Fsync: true,
		SynchronousCommit: true, FullPageWrites: true})
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Stop() //nolint:errcheck
	for _, s := range pg.Settings() {
		b.Logf("postgres setting %s=%s", s.Name, s.Value)
	}
	cfg := store.Config{ClusterDSN: pg.ClusterDSN, ShardDSNs: pg.ShardDSNs, MaxConns: 4}
	if err := store.Migrate(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{"server_version", "shared_buffers", "work_mem", "effective_cache_size", "random_page_cost"} {
		var v string
		if err := st.Cluster().QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
			b.Fatal(err)
		}
		b.Logf("postgres %s=%s", name, v)
	}
	start := time.Now()
	if err := seedExecutions(ctx, st); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d executions on %d shards with COPY in %s", benchExecutions, benchShards, time.Since(start).Round(time.Millisecond))
	quiet := slog.New(slog.DiscardHandler) // a log line per request would be measured too
	svc, err := controlplane.New(controlplane.Config{Store: st, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	a := api.New(svc, api.Options{Logger: quiet})

	for _, bc := range []struct{ name, query string }{
		{"all", ""},
		{"status=RUNNING", "status=RUNNING"},
		{"path=tests/p3", "path=tests/p3"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			benchPages(b, a, bc.query)
		})
	}
}

func benchPages(b *testing.B, a *api.API, filter string) {
	lat := make([]time.Duration, 0, b.N)
	cursor := ""
	pages, rows := 0, 0
	b.ResetTimer()
	for range b.N {
		q, _ := url.ParseQuery(filter)
		q.Set("limit", "100")
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		t0 := time.Now()
		resp := a.Serve(context.Background(), &api.Request{Method: "GET", Path: "/api/executions", Query: q, Header: http.Header{}})
		lat = append(lat, time.Since(t0))
		if resp.Status != 200 {
			b.Fatalf("status %d: %s", resp.Status, resp.Body)
		}
		v, err := jsonx.Decode(resp.Body)
		if err != nil {
			b.Fatal(err)
		}
		rows += len(v.([]any))
		pages++
		cursor = resp.Header.Get(api.HeaderNextCursor) // "" at the end: start over
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(rows)/float64(pages), "rows/page")
}

// seedExecutions writes finished and running executions straight into the
// execution tables with COPY, spread over 30 days, alternating shards.
func seedExecutions(ctx context.Context, st *store.Store) error {
	base := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	perShard := benchExecutions / benchShards
	for shard := range benchShards {
		rows := make([][]any, 0, perShard)
		for i := range perShard {
			n := i*benchShards + shard
			seq := int64(i + 1)
			started := base.Add(time.Duration(n) * 30 * 24 * time.Hour / benchExecutions)
			status := lifecycle.ExecutionCompleted
			var completed any = started.Add(2 * time.Second)
			switch {
			case n%10 < 2:
				status, completed = lifecycle.ExecutionRunning, nil
			case n%10 == 2:
				status = lifecycle.ExecutionFailed
			}
			rows = append(rows, []any{ids.Compose(seq, shard), int64(n%benchPaths + 1), "tests/p" + strconv.Itoa(n%benchPaths), 1,
				status, "shared", "{}", "{}", int64(5), started, started, completed})
		}
		pool := st.Shard(shard).Pool()
		n, err := pool.CopyFrom(ctx, pgx.Identifier{"execution"},
			[]string{"execution_id", "catalog_id", "path", "version", "status", "pool", "workload", "state", "last_seq",
				"started_at", "updated_at", "completed_at"},
			pgx.CopyFromRows(rows))
		if err != nil {
			return fmt.Errorf("copy into shard %d: %w", shard, err)
		}
		if n != int64(perShard) {
			return fmt.Errorf("shard %d: copied %d rows", shard, n)
		}
		if _, err := pool.Exec(ctx, `SELECT setval('id_seq', $1)`, perShard+1); err != nil {
			return err
		}
		if _, err := pool.Exec(ctx, `ANALYZE execution`); err != nil {
			return err
		}
	}
	return nil
}
