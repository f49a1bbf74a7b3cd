package tools

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// TestArtifactGet reads a result the worker stored by reference, given as a
// URI or as NoETL's {kind: result_ref, ref}, in the input (NoETL's playbooks)
// or the config, in NoETL's {status, data, uri, source} shape; another
// execution's result, a URI outside the store and action put are refused.
// NoETL's noetl:// references read through the result store's one parser.
func TestArtifactGet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := resultstore.Open(ctx, "file://"+t.TempDir(), resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	uri, err := st.Put(ctx, "42/42:start:7/attempt-1.json", []byte(`{"status": "success", "count": 2, "items": [{"id": 0}, {"id": 1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := st.Put(ctx, "43/43:start:9/attempt-1.json", []byte(`{"secret": 1}`))
	// 66 MB of text, 1.6 GiB once decoded: refused before it is built.
	tiny, _ := st.Put(ctx, "42/42:start:8/attempt-1.json", []byte("["+strings.Repeat("{},", 21<<20)+"{}]"))
	// NoETL's noetl:// references (PUT /api/result) resolve through the same store.
	staged := resultstore.NoETLRef{ExecutionID: 42, Name: "fetch", ID: "00c0ffee"}
	if _, err := st.Put(ctx, staged.Object(), []byte(`{"rows": [1, 2]}`)); err != nil {
		t.Fatal(err)
	}
	foreign := resultstore.NoETLRef{ExecutionID: 43, Name: "fetch", ID: "00c0ffee"}
	if _, err := st.Put(ctx, foreign.Object(), []byte(`{"secret": 1}`)); err != nil {
		t.Fatal(err)
	}
	r := New(Options{Results: st})
	get := func(cfg, input map[string]any) toolresult.Envelope {
		cfg["kind"] = "artifact"
		ctx, cancel := context.WithTimeout(WithCall(context.Background(), Call{ExecutionID: "42", Step: "load"}), time.Minute)
		defer cancel()
		return execCtx(ctx, r, cfg, input)
	}
	for _, c := range []struct {
		name       string
		cfg, input map[string]any
	}{
		{"input ref object", map[string]any{"action": "get"}, map[string]any{"result_ref": map[string]any{"kind": "result_ref", "ref": uri, "store": "disk"}}},
		{"config uri", map[string]any{"uri": uri}, nil},
		{"config result_ref", map[string]any{"result_ref": uri}, nil},
	} {
		env := get(c.cfg, c.input)
		mustSucceed(t, env)
		d := dataMap(t, env)
		same(t, c.name, d["data"], map[string]any{"status": "success", "count": 2, "items": []any{map[string]any{"id": 0}, map[string]any{"id": 1}}})
		if d["status"] != "success" || d["uri"] != uri || d["source"] != "result_store" || d["size_bytes"] != int64(66) {
			t.Fatalf("%s: %v", c.name, d)
		}
	}
	env := get(map[string]any{"result_ref": staged.String()}, nil)
	mustSucceed(t, env)
	if d := dataMap(t, env); d["uri"] != staged.String() {
		t.Fatalf("noetl:// reference: %v", d)
	} else {
		same(t, "noetl:// reference", d["data"], map[string]any{"rows": []any{1, 2}})
	}
	// Text that is not JSON is text, even past the bound by the estimate:
	// 44 MB of NDJSON (1.5 GiB were it one JSON value).
	ndjson := strings.Repeat(`{"a":0,"b":0}`+"\n", 3<<20)
	nd, _ := st.Put(ctx, "42/42:start:10/attempt-1.json", []byte(ndjson))
	env = get(map[string]any{"uri": nd}, nil)
	mustSucceed(t, env)
	if s, _ := dataMap(t, env)["data"].(string); s != ndjson {
		t.Fatalf("NDJSON read back: %d bytes of text (%T), want it whole as text", len(s), dataMap(t, env)["data"])
	}
	for _, c := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"uri": other}, "not a result of execution 42"},
		{map[string]any{"uri": foreign.String()}, "not of execution 42"},
		{map[string]any{"uri": "noetl://execution/42/result/fetch"}, "is not a result reference"},
		{map[string]any{"uri": "file:///etc/passwd"}, "is not inside the result store"},
		{map[string]any{"action": "put", "uri": uri}, "action put is not supported"},
		{map[string]any{"result_ref": ""}, "renders empty"},
		{map[string]any{"uri": strings.Replace(uri, "attempt-1", "attempt-9", 1)}, "nothing is stored"},
		{map[string]any{"uri": tiny}, "the limit is resultstore.WorkerMaxDecodedBytes, a worker's (1073741824 bytes, 1024 MiB)"},
	} {
		env := get(c.cfg, nil)
		if env.Status != toolresult.StatusError || !strings.Contains(env.Error.Message, c.want) {
			t.Errorf("%v: %+v, want an error naming %q", c.cfg, env.Error, c.want)
		}
	}
}

// TestTransferPostgres copies rows postgres → postgres (replace empties the
// target first, upsert updates) and an http array → postgres with a mapping,
// counting rows and chunks in NoETL's shape; duckdb endpoints without the
// engine say so.
func TestTransferPostgres(t *testing.T) {
	t.Parallel()
	dsn := devstacktest.Postgres(t, 0).ClusterDSN
	r := New(Options{})
	pg := func(q string) map[string]any {
		env := execTool(t, r, pgCfg(dsn, q), nil)
		mustSucceed(t, env)
		return dataMap(t, env)
	}
	pg(`CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT g, 'v' || g FROM generate_series(1, 2500) g;
		CREATE TABLE b (id int PRIMARY KEY, v text); INSERT INTO b VALUES (1, 'old'), (99999, 'gone');
		CREATE TABLE posts (post_id int, user_id int, title text)`)
	transfer := func(cfg map[string]any) map[string]any {
		t.Helper()
		cfg["kind"] = "transfer"
		env := execTool(t, r, cfg, nil)
		mustSucceed(t, env)
		return dataMap(t, env)
	}
	out := transfer(map[string]any{"mode": "replace", "chunk_size": 1000,
		"source": map[string]any{"type": "postgres", "connection": dsn, "query": "SELECT id, v FROM a ORDER BY id"},
		"target": map[string]any{"type": "postgres", "connection": dsn, "table": "b"}})
	same(t, "replace", out, map[string]any{"status": "success", "direction": "postgres_to_postgres", "source_type": "postgres", "target_type": "postgres",
		"mode": "replace", "target_table": "b", "rows_transferred": 2500, "chunks_processed": 3, "columns": []any{"id", "v"}})
	same(t, "b", pg("SELECT count(*) AS n, min(v) AS v FROM b")["rows"], []any{map[string]any{"n": 2500, "v": "v1"}})
	pg("UPDATE a SET v = 'new' WHERE id <= 10")
	transfer(map[string]any{"mode": "upsert", "source": map[string]any{"kind": "postgres", "connection": dsn, "query": "SELECT id, v FROM a WHERE id <= 10"},
		"target": map[string]any{"type": "postgres", "connection": dsn, "table": "b"}})
	same(t, "upserted", pg("SELECT count(*) FILTER (WHERE v = 'new') AS n FROM b")["rows"], []any{map[string]any{"n": 10}})

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `[{"userId": 1, "id": 1, "title": "a"}, {"userId": 2, "id": 2, "title": "b"}, {"userId": 2, "id": 3}]`)
	}))
	defer api.Close()
	out = transfer(map[string]any{"source": map[string]any{"type": "http", "url": api.URL},
		"target": map[string]any{"type": "postgres", "connection": dsn, "table": "posts", "mapping": map[string]any{"post_id": "id", "user_id": "userId", "title": "title"}}})
	if out["rows_transferred"] != int64(3) || out["records_fetched"] != int64(3) {
		t.Fatalf("http → postgres %v", out)
	}
	same(t, "posts", pg("SELECT post_id, user_id, title FROM posts ORDER BY post_id")["rows"], []any{
		map[string]any{"post_id": 1, "user_id": 1, "title": "a"}, map[string]any{"post_id": 2, "user_id": 2, "title": "b"},
		map[string]any{"post_id": 3, "user_id": 2, "title": nil}})
	env := execTool(t, r, map[string]any{"kind": "transfer", "source": map[string]any{"type": "duckdb", "query": "SELECT 1"},
		"target": map[string]any{"type": "postgres", "connection": dsn, "table": "b"}}, nil)
	if env.Status != toolresult.StatusError || !strings.Contains(env.Error.Message, "no DuckDB engine") {
		t.Fatalf("duckdb without the engine: %+v", env.Error)
	}
	env = execTool(t, r, map[string]any{"kind": "transfer", "source": map[string]any{"type": "snowflake", "query": "SELECT 1"},
		"target": map[string]any{"type": "postgres", "table": "b"}}, nil)
	if env.Status != toolresult.StatusError || !strings.Contains(env.Error.Message, "source.type: expected postgres, duckdb, http") {
		t.Fatalf("snowflake: %+v", env.Error)
	}
}

// TestArtifactDotDot (issue 33, finding 7): a reference that climbs out of
// the step's execution with `..` (…/42/../43/…, also percent-encoded) is
// refused, not read: the store's one parser (resultstore.Resolve) refuses
// . and .. segments, so the execution check compares the path that is read.
func TestArtifactDotDot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := resultstore.Open(ctx, "file://"+t.TempDir(), resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "43/43:start:9/attempt-1.json", []byte(`{"secret": "of execution 43"}`)); err != nil {
		t.Fatal(err)
	}
	r := New(Options{Results: st})
	base := strings.TrimRight(st.URL(), "/")
	for _, uri := range []string{
		base + "/42/../43/43:start:9/attempt-1.json",
		base + "/42/%2e%2e/43/43:start:9/attempt-1.json",
		base + "/42/./../43/43:start:9/attempt-1.json",
	} {
		ctx, cancel := context.WithTimeout(WithCall(context.Background(), Call{ExecutionID: "42", Step: "load"}), time.Minute)
		env := execCtx(ctx, r, map[string]any{"kind": "artifact", "uri": uri}, nil)
		cancel()
		if env.Status != toolresult.StatusError || !strings.Contains(env.Error.Message, "may not hold . or .. segments") {
			t.Errorf("%s: %+v (data %v), want it refused for its .. segment", uri, env.Error, env.Data)
		}
		if strings.Contains(fmt.Sprint(env.Data), "of execution 43") {
			t.Errorf("%s: read another execution's result: %v", uri, env.Data)
		}
	}
}
