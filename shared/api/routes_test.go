package api_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/config"
)

var update = flag.Bool("update", false, "rewrite routes.json, openapi.json and template.yaml's route events at the module root from api.Routes() (make generate does the same)")

// TestRoutesJSON keeps routes.json (read by infra/, template checks and
// scripts/sam_transform.py) equal to api.Routes(), the source of truth.
func TestRoutesJSON(t *testing.T) {
	generated(t, "routes.json", api.RoutesJSON(), regenerate)
}

// regenerate is the command that rewrites every file derived from Routes.
const regenerate = "  make generate\n(go run ./cmd/noetl routes --write .)"

// TestSAMTemplate keeps template.yaml's HttpApi events (the marked regions
// under each function's Events:) equal to what the generator writes from
// api.Routes(): a route is declared only in routes.go. That the template
// transforms and routes every path to its function is checked on the
// translated CloudFormation by scripts/sam_transform.py (make test-serverless).
func TestSAMTemplate(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := api.SAMTemplate(src)
	if err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	generated(t, "template.yaml", want, regenerate)
}

// generated keeps a file at the module root that is generated from Routes
// equal to want; -update rewrites it.
func generated(t *testing.T, name string, want []byte, regenerate string) {
	t.Helper()
	path := filepath.Join("..", "..", name)
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: it differs from api.Routes() (%s).\nRegenerate it with:\n%s", name, firstDiff(got, want), regenerate)
	}
}

// firstDiff names the first line where got and want differ.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := range max(len(g), len(w)) {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl || i >= len(g) || i >= len(w) {
			return fmt.Sprintf("line %d is %q, want %q", i+1, gl, wl)
		}
	}
	return "same lines"
}

// TestRoutesShape: exactly one function per route (R-A1), scopes per R-A3,
// health open and on the status function.
func TestRoutesShape(t *testing.T) {
	seen := map[string]bool{}
	fns := map[string]bool{}
	for _, f := range api.Functions() {
		fns[f] = true
	}
	ids := map[string]bool{}
	for _, r := range api.Routes() {
		if r.ID == "" || r.Summary == "" || ids[r.ID] {
			t.Errorf("route %s: operation id %q (unique, required) or summary %q missing", r.Key(), r.ID, r.Summary)
		}
		ids[r.ID] = true
		if seen[r.Key()] {
			t.Errorf("route %s listed twice", r.Key())
		}
		seen[r.Key()] = true
		if !fns[r.Function] {
			t.Errorf("route %s: unknown function %q", r.Key(), r.Function)
		}
		var want config.Scope
		switch {
		case r.Path == "/api/health":
			if r.Function != api.FnStatus {
				t.Errorf("health is on %s, want status (R-A1)", r.Function)
			}
		case r.Path == "/api/openapi.json":
			// The API's description: open like health, it holds no data.
			if r.Function != api.FnStatus {
				t.Errorf("the OpenAPI document is on %s, want status", r.Function)
			}
		case r.Path == "/" || strings.HasPrefix(r.Path, "/ui/"):
			// The dashboard's files: open, on the status function.
			if r.Function != api.FnStatus {
				t.Errorf("dashboard route %s is on %s, want status", r.Key(), r.Function)
			}
		case strings.HasPrefix(r.Path, "/api/internal/"):
			want = config.ScopeInternal
		case r.Path == "/api/worker/pools", r.Path == "/api/pool/status":
			// The worker registry is read by users and by NoETL's workers.
			want = config.ScopeAPI | config.ScopeWorker
		case strings.HasPrefix(r.Path, "/api/events"), strings.HasPrefix(r.Path, "/api/commands/"),
			strings.HasPrefix(r.Path, "/api/worker/"):
			want = config.ScopeWorker
		case r.Path == "/api/executions/{id}/cancellation-check":
			want = config.ScopeAPI | config.ScopeWorker // NoETL's workers ask it before running a command
		case r.Key() == "GET /api/credentials/{identifier}":
			want = config.ScopeAPI | config.ScopeWorker // workers read a credential's data (for a running execution)
		case strings.HasPrefix(r.Path, "/api/vars/"), r.Key() == "GET /api/result/resolve":
			want = config.ScopeAPI | config.ScopeWorker // NoETL's workers, and users inspecting an execution
		case r.Key() == "POST /api/db/init", r.Key() == "POST /api/postgres/execute":
			want = config.ScopeAdmin // the database routes that could change a database (docs/security.md)
		case r.Key() == "PUT /api/result/{execution_id}":
			want = config.ScopeWorker // NoETL's Rust worker stages large results
		default:
			want = config.ScopeAPI
		}
		if r.Scope != want {
			t.Errorf("route %s has scope %d, want %d (R-A3)", r.Key(), r.Scope, want)
		}
	}
	if len(seen) != 30+8+5+6+11+1+3+4 {
		t.Errorf("%d routes, want the 25 of api.md §2 (without /metrics), our worker's report, NoETL's cancellation-check, the dashboard's 2, the OpenAPI document, the 8 schedule routes, the 5 NoETL's GUI calls (ui_schema, playbook content, validate, stop, rerun), "+
			"NoETL's 6 of the worker registry (register, heartbeat, deregister by POST and DELETE, the pools, the pool status), NoETL's worker services: 6 keychain, 3 vars, 2 result routes, the liveness check (GET /api/doctor), the what-if (POST /api/whatif) and redrive (one execution, and in bulk), issue 31, and NoETL's CLI's 4 (cleanup, db validate, db init, postgres execute)", len(seen))
	}
	gateway := map[string]string{}
	for _, r := range api.Routes() {
		if other, ok := gateway[r.GatewayKey()]; ok {
			t.Errorf("routes %s and %s share API Gateway's route %s", other, r.Key(), r.GatewayKey())
		}
		gateway[r.GatewayKey()] = r.Key()
	}
}

func TestRouterPrefersLiterals(t *testing.T) {
	r := api.NewRouter(api.Routes())
	cases := []struct {
		method, path, key string
		params            map[string]string
		allow             string
	}{
		{"POST", "/api/catalog/list", "POST /api/catalog/list", nil, ""},
		{"GET", "/api/catalog/list", "GET /api/catalog/{catalog_id}", map[string]string{"catalog_id": "list"}, ""},
		{"GET", "/api/catalog/42", "GET /api/catalog/{catalog_id}", map[string]string{"catalog_id": "42"}, ""},
		{"POST", "/api/commands/7/claim", "POST /api/commands/{event_id}/claim", map[string]string{"event_id": "7"}, ""},
		{"DELETE", "/api/executions/1", "", nil, "GET"},
		{"GET", "/api/executions/1/cancel", "", nil, "POST"},
		{"GET", "/api/nope", "", nil, ""},
		{"GET", "/api/executions/", "", nil, ""},
		{"GET", "/api/health/", "", nil, ""},
		// A greedy parameter takes the segments between its neighbours, and
		// loses to a plain parameter and to literals.
		{"GET", "/api/catalog/a/b/ui_schema", "GET /api/catalog/{path+}/ui_schema", map[string]string{"path": "a/b"}, ""},
		{"GET", "/api/catalog/a/ui_schema", "GET /api/catalog/{path+}/ui_schema", map[string]string{"path": "a"}, ""},
		{"GET", "/api/catalog/ui_schema", "GET /api/catalog/{catalog_id}", map[string]string{"catalog_id": "ui_schema"}, ""},
		{"GET", "/api/catalog/playbook/content", "GET /api/catalog/playbook/content", nil, ""},
		{"GET", "/api/catalog/a/b", "", nil, ""},
		{"GET", "/api/catalog/a//ui_schema", "", nil, ""},
		{"POST", "/api/catalog/a/ui_schema", "", nil, "GET"},
	}
	for _, c := range cases {
		rt, params, allow, ok := r.Find(c.method, c.path)
		if c.key == "" {
			if ok || strings.Join(allow, ",") != c.allow {
				t.Errorf("%s %s: got %s ok=%v allow %v, want allow %q", c.method, c.path, rt.Key(), ok, allow, c.allow)
			}
			continue
		}
		if !ok || rt.Key() != c.key {
			t.Errorf("%s %s: got %q ok=%v, want %q", c.method, c.path, rt.Key(), ok, c.key)
			continue
		}
		for k, v := range c.params {
			if params[k] != v {
				t.Errorf("%s %s: param %s = %q, want %q", c.method, c.path, k, params[k], v)
			}
		}
	}
}
