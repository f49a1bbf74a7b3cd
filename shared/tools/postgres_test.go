package tools

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolresult"
)

func pgCfg(dsn, query string, extra ...any) map[string]any {
	cfg := map[string]any{"kind": "postgres", "connection": dsn, "query": query}
	for i := 0; i+1 < len(extra); i += 2 {
		cfg[extra[i].(string)] = extra[i+1]
	}
	return cfg
}

func TestPostgresValues(t *testing.T) {
	t.Parallel()
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	r := New(Options{})
	q := `SELECT
		1::smallint AS i2, 2::int AS i4, 9007199254740993::bigint AS i8,
		12345::numeric AS num_int, 10.00::numeric(10,2) AS num_scaled, 1.25::numeric AS num_frac,
		123456789012345678901234567890::numeric AS num_big, 'NaN'::numeric AS num_nan,
		1.5::real AS f4, 2.25::float8 AS f8, 'Infinity'::float8 AS f_inf,
		'{"a": 9007199254740993, "b": [1, "x", null]}'::json AS js,
		'{"a": 9007199254740993, "b": [1, "x", null]}'::jsonb AS jsb,
		'2024-01-02 03:04:05.123456'::timestamp AS ts,
		'2024-01-02 03:04:05+02'::timestamptz AS tstz,
		'2024-01-02'::date AS d,
		'infinity'::timestamptz AS ts_inf,
		'\xdeadbeef'::bytea AS b,
		NULL::text AS n, NULL::int AS n_int, NULL::jsonb AS n_json,
		'text'::text AS t, 'v'::varchar AS vc, true AS yes, false AS no,
		'00000000-0000-0000-0000-000000000001'::uuid AS id,
		ARRAY[1, 2, 3] AS int_arr, ARRAY['a', NULL, 'c'] AS text_arr, ARRAY[1.5, 2]::numeric[] AS num_arr,
		ARRAY['2024-01-02'::date] AS date_arr,
		'1 day'::interval AS iv`
	env := execTool(t, r, pgCfg(dsn, q), nil)
	mustSucceed(t, env)
	d := dataMap(t, env)
	if d["row_count"] != int64(1) {
		t.Fatalf("row_count = %#v", d["row_count"])
	}
	same(t, "columns", d["columns"], []any{"i2", "i4", "i8", "num_int", "num_scaled", "num_frac", "num_big", "num_nan",
		"f4", "f8", "f_inf", "js", "jsb", "ts", "tstz", "d", "ts_inf", "b", "n", "n_int", "n_json", "t", "vc", "yes", "no", "id",
		"int_arr", "text_arr", "num_arr", "date_arr", "iv"})
	row := d["rows"].([]any)[0].(map[string]any)
	want := map[string]any{
		"i2": int64(1), "i4": int64(2), "i8": int64(9007199254740993),
		"num_int": int64(12345), "num_scaled": int64(10), "num_frac": 1.25,
		"num_big": "123456789012345678901234567890", "num_nan": "NaN",
		"f4": 1.5, "f8": 2.25, "f_inf": "Infinity",
		"ts": "2024-01-02T03:04:05.123456Z", "tstz": "2024-01-02T01:04:05Z", "d": "2024-01-02", "ts_inf": "infinity",
		"b": "3q2+7w==", "n": nil, "n_int": nil, "n_json": nil,
		"t": "text", "vc": "v", "yes": true, "no": false, "id": "00000000-0000-0000-0000-000000000001",
		"iv": "1 day",
	}
	for k, w := range want {
		if got, ok := row[k]; !ok || got != w {
			t.Errorf("%s = %#v (%T), want %#v (%T)", k, got, got, w, w)
		}
	}
	for _, k := range []string{"js", "jsb"} {
		m, ok := row[k].(map[string]any)
		if !ok || m["a"] != int64(9007199254740993) {
			t.Errorf("%s = %#v, want an object with an exact int64", k, row[k])
		}
		same(t, k+".b", m["b"], []any{1, "x", nil})
	}
	same(t, "int_arr", row["int_arr"], []any{1, 2, 3})
	same(t, "text_arr", row["text_arr"], []any{"a", nil, "c"})
	same(t, "num_arr", row["num_arr"], []any{1.5, 2})
	same(t, "date_arr", row["date_arr"], []any{"2024-01-02"})
	if v, ok := row["num_arr"].([]any)[1].(int64); !ok || v != 2 {
		t.Errorf("num_arr[1] = %#v, want int64 2", row["num_arr"].([]any)[1])
	}
}

func TestPostgresScripts(t *testing.T) {
	t.Parallel()
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	r := New(Options{})
	run := func(q string, extra ...any) toolresult.Envelope {
		t.Helper()
		return execTool(t, r, pgCfg(dsn, q, extra...), nil)
	}

	// DDL and DO report 0 affected rows; every statement is command_N, and the last
	// one's entry is repeated at the top (NoETL's shapes, docs/noetl-playbooks.md).
	noRows := func(n int) map[string]any {
		return map[string]any{"status": "success", "row_count": n, "affected_rows": n, "message": fmt.Sprintf("Command executed. %d rows affected.", n)}
	}
	withStatements := func(stmts ...map[string]any) map[string]any {
		out := map[string]any{"statement_count": len(stmts)}
		for i, st := range stmts {
			out[fmt.Sprintf("command_%d", i)] = st
		}
		for k, v := range stmts[len(stmts)-1] {
			out[k] = v
		}
		return out
	}
	env := run("CREATE TABLE items (id int PRIMARY KEY, tag text)")
	mustSucceed(t, env)
	same(t, "create", env.Data, withStatements(noRows(0)))
	env = run("DO $$ BEGIN PERFORM 1; END $$;")
	mustSucceed(t, env)
	same(t, "do", env.Data, withStatements(noRows(0)))

	// Several statements: each is reported, the last one's rows at the top too.
	env = run("INSERT INTO items VALUES (1, 'a'); INSERT INTO items VALUES (2, 'b');\nSELECT id, tag FROM items ORDER BY id;")
	mustSucceed(t, env)
	same(t, "multi select", env.Data, withStatements(noRows(1), noRows(1), map[string]any{"status": "success",
		"columns": []any{"id", "tag"}, "rows": []any{map[string]any{"id": 1, "tag": "a"}, map[string]any{"id": 2, "tag": "b"}}, "row_count": 2,
	}))

	// ... or the last one's count.
	env = run("UPDATE items SET tag = 'z'; DELETE FROM items WHERE id = 2")
	mustSucceed(t, env)
	same(t, "last count", env.Data, withStatements(noRows(2), noRows(1)))

	// INSERT … RETURNING returns its rows (NoETL drops them).
	env = run("INSERT INTO items VALUES (3, 'c'), (4, 'd') RETURNING id, upper(tag) AS tag")
	mustSucceed(t, env)
	same(t, "returning", env.Data, withStatements(map[string]any{"status": "success",
		"columns": []any{"id", "tag"}, "rows": []any{map[string]any{"id": 3, "tag": "C"}, map[string]any{"id": 4, "tag": "D"}}, "row_count": 2,
	}))

	// An empty result still has columns.
	env = run("SELECT id FROM items WHERE id < 0")
	mustSucceed(t, env)
	same(t, "empty", env.Data, withStatements(map[string]any{"status": "success", "columns": []any{"id"}, "rows": []any{}, "row_count": 0}))

	// Only comments: no statement.
	env = run("-- nothing to run\n/* at all */")
	mustSucceed(t, env)
	same(t, "no statement", env.Data, map[string]any{"status": "success", "statement_count": 0, "affected_rows": 0, "row_count": 0})

	// One transaction: a failing statement rolls back the earlier ones.
	env = run("INSERT INTO items VALUES (10, 'x'); INSERT INTO items VALUES (11, 'y'); INSERT INTO items VALUES (1, 'dup');")
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "(SQLSTATE 23505)")
	env = run("SELECT count(*) AS n FROM items WHERE id IN (10, 11)")
	mustSucceed(t, env)
	if n := dataMap(t, env)["rows"].([]any)[0].(map[string]any)["n"]; n != int64(0) {
		t.Fatalf("rows of the failed script were kept: %v", n)
	}

	// `command` is an alias of `query`.
	env = execTool(t, r, map[string]any{"kind": "postgres", "connection": dsn, "command": "SELECT 1 AS one"}, nil)
	mustSucceed(t, env)
	same(t, "command alias", dataMap(t, env)["rows"], []any{map[string]any{"one": 1}})
}

func TestPostgresParams(t *testing.T) {
	t.Parallel()
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	r := New(Options{})
	env := execTool(t, r, pgCfg(dsn, "SELECT $1::int + $2::int AS s, $3::text AS n, $4::jsonb AS j, $5::bigint AS big, ';' || $6 AS semi -- ; not a statement",
		"params", []any{1, 2, nil, map[string]any{"a": []any{1}}, int64(9007199254740993), "x"}), nil)
	mustSucceed(t, env)
	same(t, "params", dataMap(t, env)["rows"], []any{map[string]any{"s": 3, "n": nil, "j": map[string]any{"a": []any{1}}, "big": int64(9007199254740993), "semi": ";x"}})

	env = execTool(t, r, pgCfg(dsn, "CREATE TEMP TABLE p (x int); INSERT INTO p VALUES ($1)", "params", []any{1}), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "params need exactly one statement, the query has 2")

	env = execTool(t, r, pgCfg(dsn, "SELECT 1", "params", map[string]any{"a": 1}), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "params: expected a list")
}

func TestPostgresErrors(t *testing.T) {
	t.Parallel()
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	r := New(Options{})
	// The broken_sql fixture's shape.
	env := execTool(t, r, pgCfg(dsn, "SELECT COUNT(*) as row_count, FROM patient_info;"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, `ERROR: syntax error at or near "FROM" (SQLSTATE 42601)`)

	env = execTool(t, r, pgCfg(dsn, "SELECT * FROM no_such_table"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "(SQLSTATE 42P01)")

	// An unknown alias is a different, clear error.
	env = execTool(t, r, map[string]any{"kind": "postgres", "auth": "x", "query": "SELECT 1"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, `credential alias "x" is not configured`)

	// No connection at all.
	env = execTool(t, r, map[string]any{"kind": "postgres", "query": "SELECT 1"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "no connection")

	// Nobody listening: a connection error, retryable.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	env = execTool(t, r, pgCfg("postgres://u:secretpw@127.0.0.1:"+strconv.Itoa(port)+"/db?sslmode=disable&connect_timeout=5", "SELECT 1"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindConnection, "connect")
	if strings.Contains(env.Error.Message, "secretpw") {
		t.Fatalf("password in the message: %s", env.Error.Message)
	}
}

func TestPostgresConnectionSources(t *testing.T) {
	t.Parallel()
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	creds := CredentialMap{
		"by_dsn":    {Kind: "postgres", DSN: dsn},
		"by_fields": {Kind: "postgres", Host: pc.Host, Port: int(pc.Port), User: pc.User, Password: pc.Password, Database: pc.Database},
		"wrong_db":  {Kind: "postgres", Host: pc.Host, Port: int(pc.Port), User: pc.User, Password: pc.Password, Database: "no_such_db"},
	}
	r := New(Options{Credentials: creds})
	for _, cfg := range []map[string]any{
		{"auth": "by_dsn"},
		{"auth": "by_fields"},
		{"credential": "by_fields"},
		{"auth": map[string]any{"credential": "by_fields"}},
		{"auth": "wrong_db", "database": pc.Database}, // config fields override the credential's
		{"host": pc.Host, "port": int64(pc.Port), "user": pc.User, "password": pc.Password, "database": pc.Database},
		{"connection_string": dsn},
	} {
		cfg["kind"] = "postgres"
		cfg["query"] = "SELECT current_database() AS db"
		env := execTool(t, r, cfg, nil)
		mustSucceed(t, env)
		if got := dataMap(t, env)["rows"].([]any)[0].(map[string]any)["db"]; got != pc.Database {
			t.Fatalf("%v: connected to %v, want %s", cfg, got, pc.Database)
		}
	}
	env := execTool(t, r, map[string]any{"kind": "postgres", "auth": "wrong_db", "query": "SELECT 1"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "(SQLSTATE 3D000)")
}

func TestPostgresTimeoutCancelsTheQuery(t *testing.T) {
	t.Parallel()
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	r := New(Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	env := execCtx(ctx, r, pgCfg(dsn, "SELECT pg_sleep(60) /* noetl-timeout-test */"), nil)
	mustFail(t, env, toolresult.StatusTimeout, toolresult.KindTimeout, "step deadline exceeded")

	// The server-side statement was cancelled, not left running.
	awaitNoRows(t, r, dsn, "pg_stat_activity WHERE state = 'active' AND query LIKE '%noetl-timeout-test */'",
		"pg_sleep still running server-side after the tool stopped")

	env = execTool(t, r, pgCfg(dsn, "SELECT pg_sleep(60)", "timeout", 0.5), nil)
	mustFail(t, env, toolresult.StatusTimeout, toolresult.KindTimeout, "tool timeout")
}

// awaitNoRows waits until `SELECT count(*) FROM <from>` is 0 (a backend's
// end is asynchronous), failing with why after 20 s.
func awaitNoRows(t *testing.T, r *Registry, dsn, from, why string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		env := execTool(t, r, pgCfg(dsn, "SELECT count(*) AS n FROM "+from), nil)
		mustSucceed(t, env)
		if dataMap(t, env)["rows"].([]any)[0].(map[string]any)["n"] == int64(0) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestCountStatements(t *testing.T) {
	t.Parallel()
	cases := map[string]int{
		"":                                  0,
		"  ;; -- only a comment\n":          0,
		"SELECT 1":                          1,
		"SELECT 1;":                         1,
		"SELECT 1; SELECT 2":                2,
		"SELECT ';' AS x":                   1,
		"SELECT 'it''s; ok'":                1,
		`SELECT E'\'; still'`:               1,
		`SELECT "a;b" FROM t`:               1,
		"SELECT 1 -- ; no\n":                1,
		"SELECT /* ; /* nested ; */ ; */ 1": 1,
		"DO $$ BEGIN PERFORM 1; END $$; SELECT 2":                             2,
		"CREATE FUNCTION f() RETURNS int AS $fn$ SELECT 1; $fn$ LANGUAGE sql": 1,
		"SELECT $1::int; SELECT $2":                                           2,
		"SELECT a$b FROM t":                                                   1,
	}
	for sql, want := range cases {
		if got := countStatements(sql); got != want {
			t.Errorf("countStatements(%q) = %d, want %d", sql, got, want)
		}
	}
}

// TestPostgresScriptSource: `script` reads the SQL from a file (NoETL's {uri,
// source: {type: file}}) and runs it like a query; giving both is an error.
func TestPostgresScriptSource(t *testing.T) {
	t.Parallel()
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	path := filepath.Join(t.TempDir(), "s.sql")
	if err := os.WriteFile(path, []byte("-- a file\nCREATE TEMP TABLE s (id int);\nINSERT INTO s VALUES (1), (2);\nSELECT count(*) AS n FROM s;\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := New(Options{})
	env := execTool(t, r, map[string]any{"kind": "postgres", "connection": dsn, "script": map[string]any{"uri": path, "source": map[string]any{"type": "file"}}}, nil)
	mustSucceed(t, env)
	if d := dataMap(t, env); d["statement_count"] != int64(3) || d["rows"].([]any)[0].(map[string]any)["n"] != int64(2) {
		t.Fatalf("data %v", d)
	}
	env = execTool(t, r, map[string]any{"kind": "postgres", "connection": dsn, "query": "SELECT 1", "script": path}, nil)
	if env.Status != toolresult.StatusError || !strings.Contains(env.Error.Message, "give the SQL once: query and script") {
		t.Fatalf("both given: %+v", env.Error)
	}
}

// TestPostgresClaimHeldUntilSettled: a cursor claim's rows stay claimed only if
// its report was taken (settle true); otherwise, and when the worker's
// connection dies, PostgreSQL rolls the claim back and the rows are pending
// again for the next claim.
func TestPostgresClaimHeldUntilSettled(t *testing.T) {
	t.Parallel()
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	r := New(Options{})
	setup := execTool(t, r, pgCfg(dsn, "DROP TABLE IF EXISTS claimq; CREATE TABLE claimq (id int PRIMARY KEY, status text NOT NULL DEFAULT 'pending'); INSERT INTO claimq SELECT g FROM generate_series(1, 6) g"), nil)
	mustSucceed(t, setup)
	claim := pgCfg(dsn, `UPDATE claimq SET status = 'claimed' WHERE id IN (
		SELECT id FROM claimq WHERE status = 'pending' ORDER BY id LIMIT 2 FOR UPDATE SKIP LOCKED) RETURNING id`)
	pending := func() int64 {
		env := execTool(t, r, pgCfg(dsn, "SELECT count(*) AS n FROM claimq WHERE status = 'pending'"), nil)
		mustSucceed(t, env)
		return dataMap(t, env)["rows"].([]any)[0].(map[string]any)["n"].(int64)
	}
	ids := func(env toolresult.Envelope) string {
		var out []string
		for _, row := range dataMap(t, env)["rows"].([]any) {
			out = append(out, fmt.Sprint(row.(map[string]any)["id"]))
		}
		return strings.Join(out, ",")
	}
	ctx := context.Background()
	env, settle := r.Claim(ctx, pipeline.Item{Kind: "postgres", Config: norm(claim).(map[string]any)})
	mustSucceed(t, env)
	// While held, another claim skips the locked rows.
	env2, settle2 := r.Claim(ctx, pipeline.Item{Kind: "postgres", Config: norm(claim).(map[string]any)})
	mustSucceed(t, env2)
	if ids(env) != "1,2" || ids(env2) != "3,4" || pending() != 6 {
		t.Fatalf("claims %s and %s, %d pending (uncommitted claims are invisible)", ids(env), ids(env2), pending())
	}
	// An iteration of the held rows waits for the claim's transaction to end.
	tx, _ := dataMap(t, env)[toolresult.ClaimTxidKey].(string)
	if tx == "" {
		t.Fatalf("the claim's data has no %s: %v", toolresult.ClaimTxidKey, dataMap(t, env))
	}
	waiter := New(Options{Credentials: CredentialMap{"queue": {Kind: "postgres", DSN: dsn}}})
	awaited := make(chan error, 1)
	go func() { awaited <- waiter.AwaitClaim(ctx, map[string]any{"after_txid": tx, "auth": "queue"}) }()
	select {
	case err := <-awaited:
		t.Fatalf("AwaitClaim returned while the claim was held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	settle(true)
	if err := <-awaited; err != nil {
		t.Fatal(err)
	}
	settle2(false)
	if pending() != 4 {
		t.Fatalf("%d pending after one claim committed and one rolled back, want 4", pending())
	}
	env3, settle3 := r.Claim(ctx, pipeline.Item{Kind: "postgres", Config: norm(claim).(map[string]any)})
	mustSucceed(t, env3)
	settle3(true)
	settle3(true) // once
	if ids(env3) != "3,4" || pending() != 2 {
		t.Fatalf("the rolled back rows are claimed again: got %s, %d pending", ids(env3), pending())
	}
}

// TestPostgresConnectionsKeptBetweenSteps: a step's connection is kept for
// the next step to the same target (pgIdle), reset so that nothing of the
// first step reaches the second (settings, temporary tables, advisory
// locks); a target differing by so much as the password gets a connection of
// its own; a connection left inside a transaction is never kept (the
// transaction rolls back); and Close ends the kept connections.
func TestPostgresConnectionsKeptBetweenSteps(t *testing.T) {
	t.Parallel()
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	r := New(Options{})
	row := func(cfg map[string]any) map[string]any {
		t.Helper()
		env := execTool(t, r, cfg, nil)
		mustSucceed(t, env)
		return dataMap(t, env)["rows"].([]any)[0].(map[string]any)
	}
	table := fmt.Sprintf("kept_%d", os.Getpid())
	first := row(pgCfg(dsn, "CREATE TABLE "+table+" (x int); SET search_path TO pg_catalog; CREATE TEMP TABLE leak (x int); "+
		"SELECT pg_backend_pid() AS pid, pg_advisory_lock(42)::text AS locked"))
	second := row(pgCfg(dsn, "SELECT pg_backend_pid() AS pid, current_setting('search_path') AS search_path, "+
		"to_regclass('pg_temp.leak') IS NULL AS no_temp, (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS locks"))
	if second["pid"] != first["pid"] {
		t.Fatalf("the second step ran on backend %v, the first on %v: the connection was not kept", second["pid"], first["pid"])
	}
	if second["search_path"] != `"$user", public` || second["no_temp"] != true || second["locks"] != int64(0) {
		t.Fatalf("the first step's session reached the second: %v", second)
	}
	// The server checks passwords: a role of the test's whose password
	// changes between two steps, so that they differ by the password alone
	// (the first one's connection, still open, would serve the second).
	role := fmt.Sprintf("kept_role_%d", os.Getpid())
	admin := func(sql string) {
		t.Helper()
		conn, err := pgconn.Connect(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), sql).ReadAll(); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	admin("CREATE ROLE " + role + " LOGIN PASSWORD 'one'")
	defer admin("DROP ROLE " + role)
	one := row(pgCfg(dsn, "SELECT pg_backend_pid() AS pid", "user", role, "password", "one"))
	admin("ALTER ROLE " + role + " PASSWORD 'two'")
	two := row(pgCfg(dsn, "SELECT pg_backend_pid() AS pid", "user", role, "password", "two"))
	if one["pid"] == first["pid"] || two["pid"] == one["pid"] {
		t.Fatalf("steps with other passwords were given another's connection (backends %v, %v, %v)", first["pid"], one["pid"], two["pid"])
	}
	open := row(pgCfg(dsn, "BEGIN; INSERT INTO "+table+" VALUES (1); SELECT pg_backend_pid() AS pid"))
	after := row(pgCfg(dsn, "SELECT pg_backend_pid() AS pid, (SELECT count(*) FROM "+table+") AS n"))
	if after["pid"] == open["pid"] || after["n"] != int64(0) {
		t.Fatalf("a connection left in a transaction was kept (%v, then %v)", open, after)
	}
	kept := after["pid"]
	r.Close()
	check := New(Options{})
	defer check.Close()
	awaitNoRows(t, check, dsn, fmt.Sprintf("pg_stat_activity WHERE pid = %v", kept), "a kept connection's backend is still there after Close")
	_ = execTool(t, check, pgCfg(dsn, "DROP TABLE "+table), nil)
}
