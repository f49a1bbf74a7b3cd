package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api/apitest"
)

// What NoETL's CLI (noetl/cli 2.13.0) sends and reads, route by route, at
// the API layer; the CLI's journeys against noetl dev are e2e's
// TestNoETLCLIDouble.

// TestSessionTokenHeader: NoETL's clients send their token as X-Session-Token
// too; it is judged as Authorization: Bearer is, and Authorization wins.
func TestSessionTokenHeader(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	target := fmt.Sprintf("/api/executions/%d/status", f.exec)
	session := func(tok string) http.Header { return http.Header{"X-Session-Token": {tok}} }
	must(t, a, 200, call{method: "GET", target: target, header: session(tAPI)})
	must(t, a, 403, call{method: "GET", target: target, header: session(tWorker)})
	must(t, a, 401, call{method: "GET", target: target, header: session("nope")})
	must(t, a, 401, call{method: "GET", target: target})
	// Both sent: Authorization decides.
	must(t, a, 403, call{method: "GET", target: target, token: tWorker, header: session(tAPI)})
}

// TestStatusForNoETLCLI: the status answer carries NoETL's Python server's
// fields beside ours; a run that ended otherwise than COMPLETED is completed
// and failed, so NoETL's CLI prints FAILED.
func TestStatusForNoETLCLI(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	target := fmt.Sprintf("/api/executions/%d/status", f.exec)
	r := must(t, a, 200, call{method: "GET", target: target, token: tAPI})
	if r.json["completed"] != false || r.json["failed"] != false || r.json["end_time"] != nil || r.json["error"] != nil ||
		r.str("start_time") == "" || r.str("duration_human") == "" || len(r.json["completed_steps"].([]any)) != 0 {
		t.Errorf("running: %s", r.Body)
	}
	must(t, a, 200, call{method: "POST", target: fmt.Sprintf("/api/executions/%d/finalize", f.exec), token: tAPI,
		body: map[string]any{"status": "FAILED", "error": "operator stop"}})
	r = must(t, a, 200, call{method: "GET", target: target, token: tAPI})
	if r.json["completed"] != true || r.json["failed"] != true || r.str("error") != "operator stop" || r.str("end_time") == "" ||
		r.json["duration_seconds"] == nil {
		t.Errorf("failed: %s", r.Body)
	}
}

// TestCleanupStuckExecutions: POST /api/executions/cleanup lists (dry run),
// then cancels, the running executions nothing moved for N minutes, in
// NoETL's shape and words; a moving one is left alone.
func TestCleanupStuckExecutions(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	fresh := id(t, must(t, a, 200, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{"path": "tests/three"}}).json["execution_id"])
	// Nothing moved f.exec for ten minutes: no event, its command pending
	// (announced again or not, nobody claims it).
	age := func(id int64) {
		sh, err := f.s.Store.ShardFor(id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sh.Pool().Exec(f.s.Ctx, `UPDATE execution SET updated_at = now() - interval '10 minutes' WHERE execution_id = $1`, id); err != nil {
			t.Fatal(err)
		}
	}
	age(f.exec)
	// Nor fresh's; but a worker holds its command, under a live lease.
	must(t, a, 200, call{method: "POST", target: fmt.Sprintf("/api/commands/%d/claim", f.s.Pending(t, fresh)[0].IssuedEventID), token: tWorker,
		body: map[string]any{"worker_id": "w-cleanup"}})
	age(fresh)
	before := f.s.Counts(t)
	dry := must(t, a, 200, call{method: "POST", target: "/api/executions/cleanup", token: tAPI, body: map[string]any{"older_than_minutes": int64(5), "dry_run": true}})
	if dry.json["cancelled_count"] != int64(1) || fmt.Sprint(dry.json["execution_ids"]) != fmt.Sprintf("[%d]", f.exec) ||
		dry.str("message") != "[DRY RUN] Would cancel 1 stuck executions older than 5 minutes" {
		t.Fatalf("dry run: %s", dry.Body)
	}
	if after := f.s.Counts(t); after != before {
		t.Errorf("the dry run changed rows: %+v → %+v", before, after)
	}
	real := must(t, a, 200, call{method: "POST", target: "/api/executions/cleanup", token: tAPI, body: map[string]any{"older_than_minutes": int64(5)}})
	if real.json["cancelled_count"] != int64(1) || real.str("message") != "Successfully cancelled 1 stuck executions older than 5 minutes" {
		t.Fatalf("cleanup: %s", real.Body)
	}
	for id, want := range map[int64]string{f.exec: "CANCELLED", fresh: "RUNNING"} {
		st := must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d/status", id), token: tAPI})
		if st.str("status") != want {
			t.Errorf("execution %d is %s after the cleanup, want %s", id, st.str("status"), want)
		}
	}
	none := must(t, a, 200, call{method: "POST", target: "/api/executions/cleanup", token: tAPI, body: map[string]any{"older_than_minutes": int64(5)}})
	if none.json["cancelled_count"] != int64(0) || none.str("message") != "No stuck executions found older than 5 minutes" {
		t.Errorf("nothing left: %s", none.Body)
	}
	must(t, a, 422, call{method: "POST", target: "/api/executions/cleanup", token: tAPI, body: map[string]any{"older_than_minutes": int64(0)}})
}

// TestCatalogListCredentials: `noetl catalog list Credential` lists the
// keychain's credentials, names and metadata, never their data.
func TestCatalogListCredentials(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	for _, kind := range []string{"Credential", "credentials", "Secret"} {
		r := must(t, a, 200, call{method: "POST", target: "/api/catalog/list", token: tAPI, body: map[string]any{"resource_type": kind}})
		entries, _ := r.json["entries"].([]any)
		if len(entries) != 1 {
			t.Fatalf("%s: %s", kind, r.Body)
		}
		e := entries[0].(map[string]any)
		cred, _ := e["credential"].(map[string]any)
		if e["path"] != matrixCredential || e["kind"] != "Credential" || cred["type"] != "bearer" || cred["data"] != nil {
			t.Errorf("%s: %s", kind, r.Body)
		}
		if strings.Contains(string(r.Body), "matrix-secret-token") {
			t.Errorf("%s: the list shows the credential's data: %s", kind, r.Body)
		}
	}
	// Playbooks are listed as before; an unknown kind names both.
	r := must(t, a, 200, call{method: "POST", target: "/api/catalog/list", token: tAPI, body: map[string]any{"resource_type": "Playbook"}})
	if entries, _ := r.json["entries"].([]any); len(entries) != 1 || entries[0].(map[string]any)["kind"] != "Playbook" {
		t.Errorf("Playbook: %s", r.Body)
	}
	r = must(t, a, 422, call{method: "POST", target: "/api/catalog/list", token: tAPI, body: map[string]any{"resource_type": "Agent"}})
	if !strings.Contains(r.str("error"), "Playbook or Credential") {
		t.Errorf("Agent: %s", r.Body)
	}
}

// TestDatabaseRoutes: db validate reads the schema with the api scope; db
// init and postgres execute need the admin scope (off unless an admin token
// is configured; never the worker's), and execute only reads.
func TestDatabaseRoutes(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	v := must(t, a, 200, call{method: "GET", target: "/api/db/validate", token: tAPI})
	dbs, _ := v.json["databases"].([]any)
	if v.json["valid"] != true || v.str("status") != "ok" || len(dbs) != 3 || len(v.json["missing"].([]any)) != 0 ||
		!strings.Contains(fmt.Sprint(v.json["tables"]), "execution") {
		t.Errorf("validate: %s", v.Body)
	}
	for _, tok := range []string{tAPI, tWorker, apitest.InternalToken} {
		for _, c := range []call{{method: "POST", target: "/api/db/init"}, {method: "POST", target: "/api/postgres/execute", body: map[string]any{"query": "SELECT 1"}}} {
			c.token = tok
			r := must(t, a, 403, c)
			if !strings.Contains(r.str("error"), "NOETL_ADMIN_TOKEN") {
				t.Errorf("%s %s with %s: %s", c.method, c.target, tok, r.Body)
			}
		}
	}
	admin := apitest.AdminToken
	if r := must(t, a, 200, call{method: "POST", target: "/api/db/init", token: admin}); r.json["valid"] != true || r.str("message") != "Database schema ready" {
		t.Errorf("init: %s", r.Body)
	}
	// The admin token holds the api scope too (NoETL's CLI sends one token).
	must(t, a, 200, call{method: "GET", target: "/api/db/validate", token: admin})

	r := must(t, a, 200, call{method: "POST", target: "/api/postgres/execute", token: admin,
		body: map[string]any{"query": fmt.Sprintf("-- NoETL's CLI\nSELECT execution_id, status, NULL AS n FROM execution WHERE execution_id = %d", f.exec), "schema": "noetl", "shard": int64(0)}})
	if r.str("status") != "ok" || fmt.Sprint(r.json["columns"]) != "[execution_id status n]" ||
		fmt.Sprint(r.json["result"]) != fmt.Sprintf("[[%d RUNNING <nil>]]", f.exec) {
		t.Errorf("select: %s", r.Body)
	}
	before := f.s.Counts(t)
	// Postgres refuses a write inside a read; NoETL answers a refused statement 200, status error.
	r = must(t, a, 200, call{method: "POST", target: "/api/postgres/execute", token: admin,
		body: map[string]any{"query": "WITH d AS (DELETE FROM catalog RETURNING 1) SELECT count(*) FROM d"}})
	if r.str("status") != "error" || !strings.Contains(r.str("error"), "read-only transaction") {
		t.Errorf("a write: %s", r.Body)
	}
	// Postgres nests block comments: the COPY after this one is what runs
	// (the security review of 2026-11-29, finding 6). pg_read_file runs in a
	// read-only transaction for a superuser, as the test cluster's role is.
	for _, q := range []string{"DELETE FROM catalog", "COPY (SELECT 1) TO PROGRAM 'true'", "SELECT 1; DELETE FROM catalog", "EXPLAIN ANALYZE DELETE FROM catalog",
		"/* /* */ SELECT 1 */ COPY (SELECT 1) TO PROGRAM 'true'", "SELECT pg_read_file('PG_VERSION')"} {
		r := serve(t, a, call{method: "POST", target: "/api/postgres/execute", token: admin, body: map[string]any{"query": q}})
		if r.Status == 200 && r.str("status") == "ok" {
			t.Errorf("%q ran: %s", q, r.Body)
		}
	}
	if after := f.s.Counts(t); after != before {
		t.Errorf("rows changed: %+v → %+v", before, after)
	}

	// Without an admin token the routes are off, even on an open server.
	open := apitest.New(t, apitest.Options{Open: true})
	r = must(t, open.API, 403, call{method: "POST", target: "/api/postgres/execute", body: map[string]any{"query": "SELECT 1"}})
	if !strings.Contains(r.str("error"), "no admin token") {
		t.Errorf("open server: %s", r.Body)
	}
	must(t, open.API, 200, call{method: "GET", target: "/api/db/validate"})
}
