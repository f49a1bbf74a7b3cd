package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/jsonx"
)

func TestMain(m *testing.M) { devstacktest.Main(m, startExample) }

// call is one request through the API layer (transport-free).
type call struct {
	method, target, token string
	body                  any // string or []byte: raw; anything else: JSON-encoded
	header                http.Header
	source                string // the peer's address (Request.SourceIP)
	// noContentType sends a body without the Content-Type the helper
	// otherwise adds.
	noContentType bool
}

// result is the answer, with the JSON body decoded (jsonx: ints stay int64).
type result struct {
	*api.Response
	json map[string]any
	list []any // the body when it is an array (GET /api/executions)
}

func (r result) str(k string) string { s, _ := r.json[k].(string); return s }

func serve(t testing.TB, a interface {
	Serve(context.Context, *api.Request) *api.Response
}, c call) result {
	t.Helper()
	path, rawQuery, _ := strings.Cut(c.target, "?")
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		t.Fatal(err)
	}
	req := &api.Request{Method: c.method, Path: path, Query: q, Header: http.Header{}, SourceIP: c.source}
	for k, vs := range c.header {
		req.Header[k] = vs
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	switch b := c.body.(type) {
	case nil:
	case string:
		req.Body = []byte(b)
	case []byte:
		req.Body = b
	default:
		if req.Body, err = jsonx.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	if len(req.Body) > 0 && req.Header.Get("Content-Type") == "" && !c.noContentType {
		req.Header.Set("Content-Type", "application/json") // what every client sends (guard.go)
	}
	resp := a.Serve(context.Background(), req)
	out := result{Response: resp}
	// Every answer is JSON except the dashboard's files (dashboard.go); its
	// errors (a 404 for an unknown file) are JSON too.
	dashboardFile := resp.Status == http.StatusOK && (c.target == "/" || strings.HasPrefix(c.target, "/ui/"))
	if len(resp.Body) > 0 && !dashboardFile {
		v, err := jsonx.Decode(resp.Body)
		if err != nil {
			t.Fatalf("%s %s: the answer is not JSON: %v: %s", c.method, c.target, err, resp.Body)
		}
		out.json, _ = v.(map[string]any)
		out.list, _ = v.([]any)
		// Every answer any test sees must match the OpenAPI document, so the
		// document cannot drift from what the handlers answer.
		if err := checkAnswer(c.method, path, resp, v); err != nil {
			t.Errorf("%s %s (%d): %v", c.method, c.target, resp.Status, err)
		}
		if resp.Status == http.StatusOK {
			if err := checkRequest(c.method, path, q, req.Body); err != nil {
				t.Errorf("%s %s (%d): %v", c.method, c.target, resp.Status, err)
			}
		}
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("%s %s: no X-Request-Id", c.method, c.target)
	}
	if resp.Status != http.StatusNoContent && !dashboardFile && resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s %s: Content-Type %q", c.method, c.target, resp.Header.Get("Content-Type"))
	}
	if resp.Status >= 400 {
		if msg, _ := out.json["error"].(string); msg == "" || out.json["status"] != int64(resp.Status) {
			t.Errorf("%s %s: error body %s is not {error, status: %d}", c.method, c.target, resp.Body, resp.Status)
		}
	}
	return out
}

// must serves c and fails unless the status is want.
func must(t testing.TB, a interface {
	Serve(context.Context, *api.Request) *api.Response
}, want int, c call) result {
	t.Helper()
	r := serve(t, a, c)
	if r.Status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", c.method, c.target, r.Status, want, r.Body)
	}
	return r
}

// fixture is a stack with a registered playbook and one started execution.
type fixture struct {
	s       *apitest.Stack
	exec    int64 // a RUNNING execution of ThreeSteps
	command int64 // its pending command's issued event id
	catalog int64
	sched   int64  // an hourly schedule of ThreeSteps
	ref     string // a value in the result store, query-escaped
}

// matrixCredential is the credential a fixture stores.
const matrixCredential = "matrix_cred"

func newFixture(t *testing.T, opts apitest.Options) *fixture {
	t.Helper()
	s := apitest.New(t, opts)
	reg := must(t, s.API, 200, call{method: "POST", target: "/api/catalog/register", token: apitest.APIToken,
		body: map[string]any{"content": apitest.ThreeSteps}})
	ex := must(t, s.API, 200, call{method: "POST", target: "/api/execute", token: apitest.APIToken,
		body: map[string]any{"path": "tests/three"}})
	f := &fixture{s: s, exec: id(t, ex.json["execution_id"]), catalog: id(t, reg.json["catalog_id"])}
	p := s.Pending(t, f.exec)
	if len(p) != 1 {
		t.Fatalf("%d pending commands, want 1", len(p))
	}
	f.command = p[0].IssuedEventID
	sc := must(t, s.API, 200, call{method: "POST", target: "/api/schedules", token: apitest.APIToken,
		body: map[string]any{"playbook_path": "tests/three", "interval_seconds": int64(3600)}})
	f.sched = id(t, sc.json["schedule_id"])
	must(t, s.API, 200, call{method: "POST", target: "/api/credentials", token: apitest.APIToken,
		body: map[string]any{"name": matrixCredential, "type": "bearer", "data": map[string]any{"token": "matrix-secret-token"}}})
	uri, err := s.Results.Put(s.Ctx, "matrix/known.json", []byte(`{"n": 1}`))
	if err != nil {
		t.Fatal(err)
	}
	f.ref = url.QueryEscape(uri)
	return f
}

func id(t testing.TB, v any) int64 {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("id %v (%T) is not a string (R-I2)", v, v)
	}
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("id %q is not decimal", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
