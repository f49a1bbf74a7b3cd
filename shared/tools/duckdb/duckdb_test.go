package duckdb_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolresult"
	"github.com/noetl-go/noetl/shared/tools"
	"github.com/noetl-go/noetl/shared/tools/duckdb"
)

func TestMain(m *testing.M) { devstacktest.Main(m) }

func registry(t *testing.T) *tools.Registry {
	return tools.New(tools.Options{DuckDB: duckdb.New(), DataDir: t.TempDir()})
}

// run runs one tool item for an execution, the config normalised like a
// rendered one.
func run(t *testing.T, r *tools.Registry, execution string, cfg map[string]any) toolresult.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx = tools.WithCall(ctx, tools.Call{ExecutionID: execution, Step: "s"})
	b, _ := json.Marshal(cfg)
	c, err := jsonx.DecodeObject(b)
	if err != nil {
		t.Fatal(err)
	}
	return r.Exec(ctx, pipeline.Item{Label: "s", Kind: c["kind"].(string), Config: c, Input: map[string]any{}})
}

func ok(t *testing.T, env toolresult.Envelope) map[string]any {
	t.Helper()
	if env.Status != toolresult.StatusSuccess {
		t.Fatalf("status %s: %+v", env.Status, env.Error)
	}
	return env.Data.(map[string]any)
}

func failed(t *testing.T, env toolresult.Envelope, want ...string) {
	t.Helper()
	if env.Status != toolresult.StatusError {
		t.Fatalf("status %s, want error naming %q (data %v)", env.Status, want, env.Data)
	}
	for _, w := range want {
		if !strings.Contains(env.Error.Message, w) {
			t.Fatalf("error %q does not name %q", env.Error.Message, w)
		}
	}
}

func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(jsonx.Normalize(got), jsonx.Normalize(want)) {
		gb, _ := json.Marshal(got)
		wb, _ := json.Marshal(want)
		t.Fatalf("%s = %s, want %s", what, gb, wb)
	}
}

// TestDuckDBStatements runs NoETL's duckdb_test statements against a DuckDB
// file: one entry per statement (command_0, …) and the last one's rows at the
// top, as the postgres tool returns them; the file keeps the table for the
// execution's next step, and another execution gets a file of its own.
func TestDuckDBStatements(t *testing.T) {
	r := registry(t)
	data := ok(t, run(t, r, "101", map[string]any{"kind": "duckdb", "query": `CREATE TABLE users (id INTEGER, name VARCHAR, age INTEGER);
INSERT INTO users VALUES (1, 'Alice', 30), (2, 'Bob', 25), (3, 'Charlie', 35);
SELECT name, age FROM users WHERE age >= 30 ORDER BY age;`}))
	same(t, "command_1", data["command_1"], map[string]any{"status": "success", "row_count": 3, "affected_rows": 3, "message": "Command executed. 3 rows affected."})
	same(t, "rows", data["rows"], []any{map[string]any{"name": "Alice", "age": 30}, map[string]any{"name": "Charlie", "age": 35}})
	same(t, "command_2.columns", data["command_2"].(map[string]any)["columns"], []any{"name", "age"})
	if data["statement_count"] != int64(3) || data["row_count"] != int64(2) || !strings.HasSuffix(data["database"].(string), "duckdb_101.duckdb") {
		t.Fatalf("data %v", data)
	}
	again := ok(t, run(t, r, "101", map[string]any{"kind": "duckdb", "command": "SELECT count(*) AS n FROM users"}))
	same(t, "the execution's file", again["rows"], []any{map[string]any{"n": 3}})
	failed(t, run(t, r, "102", map[string]any{"kind": "duckdb", "command": "SELECT count(*) FROM users"}), "statement 1", "users")
	// An explicit file, statements as a list (NoETL joins them), params.
	file := filepath.Join(t.TempDir(), "x", "shared.duckdb")
	ok(t, run(t, r, "103", map[string]any{"kind": "duckdb", "database": file, "commands": []any{"CREATE TABLE kv (k VARCHAR, v JSON);", "INSERT INTO kv VALUES ('a', '{\"n\": 1}');"}}))
	got := ok(t, run(t, r, "104", map[string]any{"kind": "duckdb", "db_path": file, "query": "SELECT k, v FROM kv WHERE k = $1", "params": []any{"a"}}))
	same(t, "params", got["rows"], []any{map[string]any{"k": "a", "v": map[string]any{"n": 1}}})
	failed(t, run(t, r, "104", map[string]any{"kind": "duckdb", "database": file, "query": "SELECT 1; SELECT $1", "params": []any{1}}), "params need exactly one statement")
	mem := ok(t, run(t, r, "105", map[string]any{"kind": "duckdb", "database": ":memory:", "query": "SELECT 42 AS answer, 'success' AS status"}))
	same(t, "in memory", mem["rows"], []any{map[string]any{"answer": 42, "status": "success"}})
}

// TestDuckDBValues: DuckDB's types as the postgres tool writes PostgreSQL's.
func TestDuckDBValues(t *testing.T) {
	data := ok(t, run(t, registry(t), "1", map[string]any{"kind": "duckdb", "database": ":memory:", "query": `SELECT
		1::TINYINT AS i1, 9007199254740993::BIGINT AS i8, 170141183460469231731687303715884105727::HUGEINT AS huge,
		1.5::FLOAT AS f4, 'inf'::DOUBLE AS f_inf, 10.00::DECIMAL(10,2) AS dec_int, 1.25::DECIMAL(10,2) AS dec_frac,
		DATE '2024-01-02' AS d, TIMESTAMP '2024-01-02 03:04:05.123456' AS ts, TIMESTAMPTZ '2024-01-02 03:04:05+02' AS tstz,
		'{"a": [1, "x", null]}'::JSON AS js, [1, 2, 3] AS l, {'k': 'v', 'n': 1} AS st, MAP {'a': 1} AS m,
		'00000000-0000-0000-0000-000000000001'::UUID AS id, 'ab'::BLOB AS b, NULL AS n, true AS yes, INTERVAL 1 DAY AS iv`}))
	row := data["rows"].([]any)[0].(map[string]any)
	same(t, "values", row, map[string]any{"i1": 1, "i8": int64(9007199254740993), "huge": "170141183460469231731687303715884105727",
		"f4": 1.5, "f_inf": "+Inf", "dec_int": 10, "dec_frac": 1.25, "d": "2024-01-02", "ts": "2024-01-02T03:04:05.123456Z",
		"tstz": "2024-01-02T01:04:05Z", "js": map[string]any{"a": []any{1, "x", nil}}, "l": []any{1, 2, 3},
		"st": map[string]any{"k": "v", "n": 1}, "m": map[string]any{"a": 1}, "id": "00000000-0000-0000-0000-000000000001",
		"b": "YWI=", "n": nil, "yes": true, "iv": "0 months 1 days 0 microseconds"})
}

// TestDuckDBOffline: nothing is fetched at run time; a statement needing an
// extension the engine does not bundle fails naming it, before any network.
func TestDuckDBOffline(t *testing.T) {
	r := registry(t)
	for _, c := range []struct{ query, ext string }{
		{"INSTALL httpfs", "httpfs"},
		{"FORCE INSTALL spatial", "spatial"},
		{"LOAD ducklake", "ducklake"},
		{"ATTACH 'dbname=x' AS pg (TYPE postgres)", "postgres"},
		{"SELECT * FROM read_parquet('s3://bucket/x.parquet')", "httpfs"},
	} {
		t.Run(c.ext, func(t *testing.T) {
			start := time.Now()
			failed(t, run(t, r, "1", map[string]any{"kind": "duckdb", "database": ":memory:", "query": c.query}),
				"needs DuckDB's "+c.ext+" extension", "never do (R-P3)", "Bundled: ")
			if d := time.Since(start); d > 20*time.Second {
				t.Fatalf("took %s: something waited on the network", d)
			}
		})
	}
	// Bundled ones load.
	ok(t, run(t, r, "1", map[string]any{"kind": "duckdb", "database": ":memory:", "query": "LOAD json; SELECT json_extract('{\"a\": 1}', '$.a') AS a"}))
	failed(t, run(t, r, "1", map[string]any{"kind": "duckdb", "query": "SELECT 1", "auth": "pg_local"}), "auth", "R-P3")
}

// TestDuckDBSettingsLocked (security review): a step cannot change DuckDB's
// settings, so it cannot turn extension downloads back on; and INSTALL in
// any form, the ones the tool's own check misses included, fails before
// downloading: a local server stands for the extension repository and is
// never asked. The streaming path (transfer's source) too.
func TestDuckDBSettingsLocked(t *testing.T) {
	var asked atomic.Int64
	repo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.NotFound(w, r)
	}))
	defer repo.Close()
	r := registry(t)
	for _, database := range []string{":memory:", ""} { // "": the execution's file
		step := func(q string) map[string]any {
			cfg := map[string]any{"kind": "duckdb", "query": q}
			if database != "" {
				cfg["database"] = database
			}
			return cfg
		}
		for _, q := range []string{
			"SET autoinstall_known_extensions = true",
			"SET GLOBAL autoinstall_known_extensions TO true",
			"RESET autoinstall_known_extensions",
			"PRAGMA autoinstall_known_extensions = true",
			"SET allow_community_extensions = true",
			"SET custom_extension_repository = '" + repo.URL + "'",
			"SET extension_directory = '" + t.TempDir() + "'",
			"SET lock_configuration = false",
		} {
			failed(t, run(t, r, "1", step(q)), "the configuration has been locked", "R-P3")
		}
		for _, q := range []string{
			"INSTALL json FROM '" + repo.URL + "'",
			"FORCE INSTALL json FROM '" + repo.URL + "'",
			"/* not at the start */ INSTALL httpfs FROM '" + repo.URL + "'",
			"INSTALL 'httpfs' FROM '" + repo.URL + "'",
			"UPDATE EXTENSIONS",
		} {
			failed(t, run(t, r, "1", step(q)), "installing DuckDB extensions (INSTALL, UPDATE EXTENSIONS) is refused", "R-P3")
		}
		same(t, "autoinstall after the attempts", ok(t, run(t, r, "1",
			step("SELECT current_setting('autoinstall_known_extensions') AS v")))["rows"], []any{map[string]any{"v": false}})
	}

	db, err := duckdb.New().Open(context.Background(), ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Query(context.Background(), "INSTALL json FROM '"+repo.URL+"'; SELECT 1", 10, func([]string, [][]any) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "is refused") {
		t.Fatalf("INSTALL through Query: %v", err)
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the extension repository was asked %d times", n)
	}
}

// TestDuckDBConcurrentFile: steps of one execution running at once share the
// file (DuckDB locks it to one process, which holds one handle).
func TestDuckDBConcurrentFile(t *testing.T) {
	r := registry(t)
	ok(t, run(t, r, "7", map[string]any{"kind": "duckdb", "query": "CREATE TABLE n (i INTEGER)"}))
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if env := run(t, r, "7", map[string]any{"kind": "duckdb", "query": fmt.Sprintf("INSERT INTO n VALUES (%d)", i)}); env.Status != toolresult.StatusSuccess {
				errs <- env.Error.Message
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	same(t, "rows", ok(t, run(t, r, "7", map[string]any{"kind": "duckdb", "query": "SELECT count(*) AS n FROM n"}))["rows"], []any{map[string]any{"n": 20}})
}

// TestTransfer copies 25,000 rows postgres → duckdb → postgres in chunks of
// 1,000 (memory bounded by the chunk), then an http array into duckdb with a
// mapping; each result counts the rows in NoETL's shape.
func TestTransfer(t *testing.T) {
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	r := registry(t)
	pg := func(q string) map[string]any {
		return ok(t, run(t, r, "9", map[string]any{"kind": "postgres", "connection": dsn, "query": q}))
	}
	pg(`CREATE TABLE src (id int PRIMARY KEY, name text, payload jsonb, ts timestamptz);
		INSERT INTO src SELECT g, 'n' || g, jsonb_build_object('g', g), '2024-01-01'::timestamptz + g * interval '1 minute' FROM generate_series(1, 25000) g;
		CREATE TABLE back (id int PRIMARY KEY, name text, payload jsonb, ts timestamptz)`)
	ok(t, run(t, r, "9", map[string]any{"kind": "duckdb", "query": "CREATE TABLE dst (id INTEGER PRIMARY KEY, name VARCHAR, payload JSON, ts TIMESTAMPTZ)"}))
	out := ok(t, run(t, r, "9", map[string]any{"kind": "transfer", "chunk_size": 1000,
		"source": map[string]any{"type": "postgres", "connection": dsn, "query": "SELECT id, name, payload, ts FROM src ORDER BY id"},
		"target": map[string]any{"type": "duckdb", "table": "dst"}}))
	same(t, "pg → duckdb", map[string]any{"rows": out["rows_transferred"], "chunks": out["chunks_processed"], "direction": out["direction"]},
		map[string]any{"rows": 25000, "chunks": 25, "direction": "postgres_to_duckdb"})
	same(t, "duckdb rows", ok(t, run(t, r, "9", map[string]any{"kind": "duckdb", "query": "SELECT count(*) AS n, sum(id) AS s, max(payload->>'g') AS g FROM dst"}))["rows"],
		[]any{map[string]any{"n": 25000, "s": 312512500, "g": "9999"}})
	out = ok(t, run(t, r, "9", map[string]any{"kind": "transfer", "chunk_size": 4000, "mode": "upsert",
		"source": map[string]any{"type": "duckdb", "query": "SELECT id, name, payload, ts FROM dst"},
		"target": map[string]any{"type": "postgres", "connection": dsn, "table": "back"}}))
	if out["rows_transferred"] != int64(25000) || out["chunks_processed"] != int64(7) {
		t.Fatalf("duckdb → postgres: %v", out)
	}
	same(t, "postgres copy", pg("SELECT count(*) AS n FROM back b JOIN src s USING (id) WHERE b.name = s.name AND b.payload = s.payload AND b.ts = s.ts")["rows"],
		[]any{map[string]any{"n": 25000}})
	// A failing chunk leaves the target as it was (one transaction).
	failed(t, run(t, r, "9", map[string]any{"kind": "transfer", "chunk_size": 1000,
		"source": map[string]any{"type": "postgres", "connection": dsn, "query": "SELECT id, name, payload, ts FROM src"},
		"target": map[string]any{"type": "postgres", "connection": dsn, "table": "back"}}), "duplicate key")
	same(t, "unchanged", pg("SELECT count(*) AS n FROM back")["rows"], []any{map[string]any{"n": 25000}})

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"meta": {"skip": [1, 2, {"deep": true}]}, "data": {"items": [`)
		for i := 1; i <= 2500; i++ {
			if i > 1 {
				fmt.Fprint(w, ",")
			}
			fmt.Fprintf(w, `{"userId": %d, "id": %d, "title": "t%d", "body": {"text": "b%d"}}`, i%7, i, i, i)
		}
		fmt.Fprint(w, `]}}`)
	}))
	defer api.Close()
	ok(t, run(t, r, "9", map[string]any{"kind": "duckdb", "query": "CREATE TABLE posts (post_id INTEGER, user_id INTEGER, title VARCHAR, body VARCHAR)"}))
	out = ok(t, run(t, r, "9", map[string]any{"kind": "transfer", "chunk_size": 1000,
		"source": map[string]any{"type": "http", "url": api.URL, "data_path": "data.items"},
		"target": map[string]any{"type": "duckdb", "table": "posts", "mapping": map[string]any{"post_id": "id", "user_id": "userId", "title": "title", "body": "body.text"}}}))
	if out["rows_transferred"] != int64(2500) || out["records_fetched"] != int64(2500) || out["chunks_processed"] != int64(3) {
		t.Fatalf("http → duckdb: %v", out)
	}
	same(t, "posts", ok(t, run(t, r, "9", map[string]any{"kind": "duckdb", "query": "SELECT count(*) AS n, max(body) AS b, sum(user_id) AS u FROM posts"}))["rows"],
		[]any{map[string]any{"n": 2500, "b": "b999", "u": 7498}})
}
