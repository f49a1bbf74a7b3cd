package api_test

import (
	"context"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/dashboard"
)

// TestDashboardFiles: the page and its files are served without a token
// even when tokens are configured (they hold no data; every data call the
// page makes needs the token, TestDashboardTokens in e2e), with a CSP that
// allows nothing from another origin; data routes still refuse.
func TestDashboardFiles(t *testing.T) {
	a := api.New(nil, api.Options{Tokens: apitest.Tokens(), Dashboard: dashboard.Files{}}) // static routes never reach the service
	ctx := context.Background()
	get := func(path string) *api.Response {
		return a.Serve(ctx, &api.Request{Method: "GET", Path: path})
	}
	page := get("/")
	if page.Status != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET / answered %d %q", page.Status, page.Header.Get("Content-Type"))
	}
	if !strings.Contains(string(page.Body), `<script type="module" src="/ui/app.js">`) {
		t.Fatalf("the page does not load its app:\n%s", page.Body)
	}
	csp := page.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "http") {
		t.Fatalf("CSP %q must allow the page's own origin only", csp)
	}
	for _, f := range []string{"app.js", "api.js", "graph.js", "app.css"} {
		r := get("/ui/" + f)
		if r.Status != 200 || len(r.Body) == 0 {
			t.Errorf("GET /ui/%s answered %d", f, r.Status)
		}
	}
	if ct := get("/ui/app.js").Header.Get("Content-Type"); ct != "text/javascript; charset=utf-8" {
		t.Errorf("app.js is served as %q", ct)
	}
	for _, bad := range []string{"/ui/nope.js", "/ui/index.html", "/ui/..", "/ui/.hidden"} {
		if r := get(bad); r.Status != 404 {
			t.Errorf("GET %s answered %d, want 404", bad, r.Status)
		}
	}
	if r := get("/api/executions"); r.Status != 401 {
		t.Errorf("GET /api/executions without a token answered %d, want 401", r.Status)
	}
}

// TestDashboardOnlyWhereGiven: a function built without the dashboard (every
// one but status, so their bootstraps do not link its files) answers its
// routes 404 naming the function that serves them.
func TestDashboardOnlyWhereGiven(t *testing.T) {
	a := api.New(nil, api.Options{})
	for _, path := range []string{"/", "/ui/app.js"} {
		r := a.Serve(context.Background(), &api.Request{Method: "GET", Path: path})
		if r.Status != 404 || !strings.Contains(string(r.Body), "the status function does") {
			t.Errorf("GET %s without the dashboard answered %d %s", path, r.Status, r.Body)
		}
	}
}
