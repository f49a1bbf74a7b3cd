package api_test

import (
	"bytes"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// openAPIDoc is the served document, decoded once for the answer checks in
// serve (main_test.go).
var openAPIDoc = sync.OnceValue(func() map[string]any {
	v, err := jsonx.Decode(api.OpenAPI())
	if err != nil {
		panic(fmt.Sprintf("the OpenAPI document is not JSON: %v", err))
	}
	return v.(map[string]any)
})

// router finds the route of a request the tests make.
var router = sync.OnceValue(func() *api.Router { return api.NewRouter(api.Routes()) })

// TestOpenAPIJSON keeps openapi.json at the module root (what make test
// validates with an OpenAPI validator, and what users generate clients from)
// byte-equal to what GET /api/openapi.json serves.
func TestOpenAPIJSON(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	r := must(t, s.API, 200, call{method: "GET", target: "/api/openapi.json"}) // open: no token
	if !bytes.Equal(r.Body, api.OpenAPI()) {
		t.Fatal("GET /api/openapi.json differs from api.OpenAPI()")
	}
	generated(t, "openapi.json", r.Body, regenerate)
}

// routeRecorder keeps the route key of every request the API matched.
type routeRecorder struct {
	mu     sync.Mutex
	routes map[string]int // route key -> last status
}

func (r *routeRecorder) Request(route string, status int, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if route != "" {
		r.routes[route] = status
	}
}
func (r *routeRecorder) Ingest([]string, int, time.Duration) {}
func (r *routeRecorder) Claim(int)                           {}

// TestOpenAPIMatchesServedRoutes: every operation the document describes is
// a route the API serves, and every route the API serves is described: each
// one is requested (the error matrix's well-formed request with its scope's
// token), must reach its handler and answer 200 (its answer checked against
// the document by serve), and the set of routes reached must equal the set
// described.
func TestOpenAPIMatchesServedRoutes(t *testing.T) {
	doc := openAPIDoc()
	described := map[string]bool{}
	for path, item := range doc["paths"].(map[string]any) {
		for method, op := range item.(map[string]any) {
			described[strings.ToUpper(method)+" "+path] = true
			o := op.(map[string]any)
			if o["operationId"] == "" || o["summary"] == "" {
				t.Errorf("%s %s: no operationId or summary", method, path)
			}
		}
	}
	declared := map[string]bool{}
	for _, r := range api.Routes() {
		declared[r.Method+" "+r.DocPath()] = true
	}
	if !maps.Equal(described, declared) {
		t.Errorf("described %v\ndeclared %v", slices.Sorted(maps.Keys(described)), slices.Sorted(maps.Keys(declared)))
	}

	rec := &routeRecorder{routes: map[string]int{}}
	f := newFixture(t, apitest.Options{Recorder: rec})
	for _, c := range matrixCases() {
		token := c.token
		if strings.HasSuffix(c.target, "/cancellation-check") {
			token = apitest.APIToken // it admits both scopes; the matrix uses worker's
		}
		body := f.fill(c.body)
		if c.target == "/api/internal/outbox/mark-failed" {
			// The matrix's body names an unknown row (its 404): mark a real one.
			body = map[string]any{"outbox_id": claimOutboxRow(t, f), "error": "nats down"}
		}
		target := f.fill(c.target).(string)
		switch c.target {
		case "/api/catalog/register":
			body = map[string]any{"content": apitest.ThreeSteps} // the matrix's is an invalid playbook (its 422)
		case "/api/executions/{exec}/finalize":
			// The cancel case before it ended the fixture's execution (finalize: 409).
			ex := must(t, f.s.API, 200, call{method: "POST", target: "/api/execute", token: apitest.APIToken,
				body: map[string]any{"path": "tests/three"}})
			target = "/api/executions/" + ex.str("execution_id") + "/finalize"
		}
		if c.method == "POST" && body == nil {
			body = map[string]any{}
		}
		serve(t, f.s.API, call{method: c.method, target: target, token: token, body: body})
	}
	served := map[string]bool{}
	for key, status := range rec.routes {
		key = strings.ReplaceAll(key, "+}", "}") // the document's path of a greedy route (Route.DocPath)
		served[key] = true
		if status != http.StatusOK {
			t.Errorf("%s answered %d, want 200", key, status)
		}
	}
	for key := range described {
		if !served[key] {
			t.Errorf("%s is described but was not served", key)
		}
	}
	for key := range served {
		if !described[key] {
			t.Errorf("%s is served but not described", key)
		}
	}
}

// claimOutboxRow leaves one outbox row unpublished (NATS down at commit, as
// TestInternalOutboxRoutes does), claims it and returns its id.
func claimOutboxRow(t *testing.T, f *fixture) string {
	t.Helper()
	f.s.NATS.Down()
	must(t, f.s.API, 200, call{method: "POST", target: "/api/execute", token: apitest.APIToken, body: map[string]any{"path": "tests/three"}})
	f.s.NATS.Up() //nolint:errcheck
	// The claim takes rows older than 5 s (R-A6); age them instead of waiting.
	for i := range f.s.Store.NumShards() {
		if _, err := f.s.Store.Shard(i).Pool().Exec(f.s.Ctx, `UPDATE outbox SET created_at = now() - interval '1 minute'`); err != nil {
			t.Fatal(err)
		}
	}
	r := must(t, f.s.API, 200, call{method: "POST", target: "/api/internal/outbox/claim", token: apitest.InternalToken,
		body: map[string]any{"limit": int64(1)}})
	rows, _ := r.json["rows"].([]any)
	if len(rows) != 1 {
		t.Fatalf("claimed %d outbox rows, want 1: %s", len(rows), r.Body)
	}
	return rows[0].(map[string]any)["outbox_id"].(string)
}

// checkAnswer checks an answer of the API against the document: an error
// against the Error schema, a 200 (or health's 503) against the route's.
// Called by serve for every request the package's tests make.
func checkAnswer(method, path string, resp *api.Response, body any) error {
	if body == nil && resp.Status != http.StatusOK {
		return nil // 204 preflight
	}
	rt, _, _, ok := router().Find(method, path)
	doc := openAPIDoc()
	var sch map[string]any
	switch {
	case resp.Status >= 400 && !(ok && rt.Path == "/api/health" && resp.Status == http.StatusServiceUnavailable):
		sch = map[string]any{"$ref": "#/components/schemas/Error"}
	case !ok:
		return fmt.Errorf("answered %d without a route", resp.Status)
	default:
		op := doc["paths"].(map[string]any)[rt.DocPath()].(map[string]any)[strings.ToLower(rt.Method)].(map[string]any)
		r, ok := op["responses"].(map[string]any)[fmt.Sprint(resp.Status)].(map[string]any)
		if !ok {
			return fmt.Errorf("status %d is not described", resp.Status)
		}
		content, _ := r["content"].(map[string]any)
		media, ok := content["application/json"].(map[string]any)
		if !ok {
			return fmt.Errorf("answered JSON; the document describes %v", slices.Sorted(maps.Keys(content)))
		}
		sch = media["schema"].(map[string]any)
	}
	if errs := conform(doc, sch, body, "$"); len(errs) > 0 {
		return fmt.Errorf("the answer does not match the document: %s", strings.Join(errs, "; "))
	}
	return nil
}

// checkRequest checks a request the API accepted against the route's
// description: every query parameter is described, and the body matches the
// described request body, so the document describes what the handlers
// accept.
func checkRequest(method, path string, query url.Values, body []byte) error {
	rt, _, _, ok := router().Find(method, path)
	if !ok {
		return nil
	}
	doc := openAPIDoc()
	op := doc["paths"].(map[string]any)[rt.DocPath()].(map[string]any)[strings.ToLower(rt.Method)].(map[string]any)
	inQuery := map[string]bool{}
	for _, p := range asList(op["parameters"]) {
		if p := p.(map[string]any); p["in"] == "query" {
			inQuery[p["name"].(string)] = true
		}
	}
	for k := range query {
		if !inQuery[k] {
			return fmt.Errorf("accepted the query parameter %s, which the document does not describe", k)
		}
	}
	rb, described := op["requestBody"].(map[string]any)
	if !described {
		return nil // a route that reads no body ignores one
	}
	if len(bytes.TrimSpace(body)) == 0 {
		if rb["required"] == true {
			return fmt.Errorf("accepted an empty body; the document says the body is required")
		}
		return nil
	}
	v, err := jsonx.Decode(body)
	if err != nil {
		return fmt.Errorf("accepted a request body that is not JSON: %w", err)
	}
	sch := rb["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)
	if errs := conform(doc, sch, v, "$"); len(errs) > 0 {
		return fmt.Errorf("accepted a request the document does not describe: %s", strings.Join(errs, "; "))
	}
	return nil
}

// conform checks v against an OpenAPI 3.0 schema object (the subset the
// document uses), strictly: an object with described properties may carry
// no undescribed ones, so a new field in an answer fails until described.
func conform(doc, s map[string]any, v any, at string) []string {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		return conform(doc, doc["components"].(map[string]any)["schemas"].(map[string]any)[name].(map[string]any), v, at)
	}
	if v == nil {
		if s["nullable"] == true || (s["type"] == nil && s["oneOf"] == nil) {
			return nil
		}
		return []string{at + ": null is not allowed"}
	}
	if alts, ok := s["oneOf"].([]any); ok {
		n := 0
		for _, a := range alts {
			if len(conform(doc, a.(map[string]any), v, at)) == 0 {
				n++
			}
		}
		if n != 1 {
			return []string{fmt.Sprintf("%s: %v matches %d of oneOf's alternatives", at, v, n)}
		}
		return nil
	}
	var errs []string
	typ, _ := s["type"].(string)
	want := map[string]bool{}
	switch v.(type) {
	case map[string]any:
		want["object"] = true
	case []any:
		want["array"] = true
	case string:
		want["string"] = true
	case int64:
		want["integer"], want["number"] = true, true
	case float64:
		want["number"] = true
	case bool:
		want["boolean"] = true
	}
	if typ != "" && !want[typ] {
		return []string{fmt.Sprintf("%s: %s, want %s", at, jsonx.TypeName(v), typ)}
	}
	if e, ok := s["enum"].([]any); ok && !slices.Contains(e, v) {
		errs = append(errs, fmt.Sprintf("%s: %v is not one of %v", at, v, e))
	}
	if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(v.(string)) {
		errs = append(errs, fmt.Sprintf("%s: %q does not match %s", at, v, p))
	}
	if s["format"] == "date-time" {
		if _, err := time.Parse(time.RFC3339Nano, v.(string)); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %q is not a date-time", at, v))
		}
	}
	switch x := v.(type) {
	case map[string]any:
		props, hasProps := s["properties"].(map[string]any)
		for _, r := range asList(s["required"]) {
			if _, ok := x[r.(string)]; !ok {
				errs = append(errs, fmt.Sprintf("%s: required %s is missing", at, r))
			}
		}
		extra, _ := s["additionalProperties"].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(x)) {
			switch p, ok := props[k].(map[string]any); {
			case ok:
				errs = append(errs, conform(doc, p, x[k], at+"."+k)...)
			case extra != nil:
				errs = append(errs, conform(doc, extra, x[k], at+"."+k)...)
			case hasProps:
				errs = append(errs, fmt.Sprintf("%s: %s is not described", at, k))
			}
		}
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range x {
				errs = append(errs, conform(doc, items, e, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return errs
}

func asList(v any) []any { l, _ := v.([]any); return l }
