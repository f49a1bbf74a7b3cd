package localgw_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/dev/localgw"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lambdafn"
	"github.com/noetl-go/noetl/shared/notify"
)

func TestMain(m *testing.M) { devstacktest.Main(m) }

// server is the local gateway over a real stack, on a real port.
type server struct {
	s       *apitest.Stack
	srv     *httptest.Server
	gw      *localgw.Gateway
	metrics *localgw.Metrics

	mu     sync.Mutex
	events map[string][]byte // request id → the API Gateway event a function got
}

// lazyStats reads the stack's service at scrape time (the stack is built
// after the metrics it records into).
type lazyStats struct{ s **apitest.Stack }

func (l lazyStats) OutboxStats(ctx context.Context) (controlplane.OutboxStats, error) {
	return (*l.s).API.Service().OutboxStats(ctx)
}

func (l lazyStats) CommandCounts(ctx context.Context) (map[string]int64, error) {
	return (*l.s).API.Service().CommandCounts(ctx)
}

func newServer(t *testing.T, opts apitest.Options) *server {
	t.Helper()
	sv := &server{events: map[string][]byte{}}
	var stack *apitest.Stack
	sv.metrics = localgw.NewMetrics(lazyStats{&stack}, apitest.Tokens())
	opts.Recorder, opts.Observer = sv.metrics, sv.metrics
	stack = apitest.New(t, opts)
	sv.s = stack
	handlers := map[string]any{}
	for _, fn := range api.Functions() {
		h, err := lambdafn.New(fn, stack.Build,
			lambdafn.Options{Stage: "test", Metrics: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		// Record each event as the function receives it, then run it.
		handlers[fn] = func(ctx context.Context, ev json.RawMessage) (any, error) {
			var probe events.APIGatewayV2HTTPRequest
			if json.Unmarshal(ev, &probe) == nil && probe.RequestContext.RequestID != "" {
				sv.mu.Lock()
				sv.events[probe.RequestContext.RequestID] = append([]byte(nil), ev...)
				sv.mu.Unlock()
			}
			return h.Handle(ctx, ev)
		}
	}
	// As devserver wires it: the API's admission before any body is read.
	gw, err := localgw.New(handlers, localgw.Options{Metrics: sv.metrics, CORS: api.NewCORS(opts.CORSOrigins), Admit: stack.API.Admit})
	if err != nil {
		t.Fatal(err)
	}
	sv.gw = gw
	sv.srv = httptest.NewServer(gw)
	t.Cleanup(sv.srv.Close)
	return sv
}

type reply struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
}

func (r reply) str(k string) string { s, _ := r.json[k].(string); return s }

func (sv *server) do(t *testing.T, method, path, token string, body any, hdr http.Header) reply {
	t.Helper()
	var rdr io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rdr = bytes.NewReader(b)
	default:
		raw, err := jsonx.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rdr = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, sv.srv.URL+path, rdr)
	if err != nil {
		t.Fatal(err)
	}
	if rdr != nil {
		req.Header.Set("Content-Type", "application/json") // what every client sends
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: raw}
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if r.json, err = jsonx.DecodeObject(raw); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, raw)
		}
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("%s %s: no X-Request-Id", method, path)
	}
	return r
}

func (sv *server) must(t *testing.T, want int, method, path, token string, body any) reply {
	t.Helper()
	r := sv.do(t, method, path, token, body, nil)
	if r.status != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, r.status, want, r.body)
	}
	return r
}

const (
	tAPI      = apitest.APIToken
	tWorker   = apitest.WorkerToken
	tInternal = apitest.InternalToken
)

// TestEndToEndOverHTTP: register → execute → (notification → claim → events →
// next command)×3 → completion, over real HTTP through the Lambda handlers,
// with commands found the way workers find them: NATS notifications.
func TestEndToEndOverHTTP(t *testing.T) {
	sv := newServer(t, apitest.Options{})
	ctx := sv.s.Ctx
	sv.must(t, 200, "POST", "/api/catalog/register", tAPI, map[string]any{"content": apitest.ThreeSteps})
	r := sv.must(t, 200, "POST", "/api/execute", tAPI, map[string]any{"path": "tests/three", "payload": map[string]any{"n": int64(41)}})
	exec := r.str("execution_id")
	execID, _ := strconv.ParseInt(exec, 10, 64)

	cons, err := sv.s.JS.OrderedConsumer(ctx, notify.StreamName, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{notify.Subject(notify.PoolShared, execID)}})
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for i := range 3 {
		msg, err := cons.Next(jetstream.FetchMaxWait(10 * time.Second))
		if err != nil {
			t.Fatalf("notification %d: %v", i, err)
		}
		var note notify.Body
		if err := json.Unmarshal(msg.Data(), &note); err != nil {
			t.Fatal(err)
		}
		if note.ServerURL != sv.srv.URL {
			t.Errorf("notification server_url %q, want %q (derived from the request's host)", note.ServerURL, sv.srv.URL)
		}
		c := sv.must(t, 200, "POST", fmt.Sprintf("/api/commands/%d/claim", note.EventID), tWorker, map[string]any{"worker_id": "w1"})
		step, commandID := c.str("node_name"), c.str("command_id")
		steps = append(steps, step)
		args, _ := c.json["context"].(map[string]any)["args"].(map[string]any)
		meta := map[string]any{"command_id": commandID, "attempt": c.json["attempt"]}
		for j, ev := range []map[string]any{
			{"event_type": "command.started", "status": "RUNNING"},
			{"event_type": "call.done", "status": "COMPLETED", "payload": map[string]any{"result": map[string]any{"status": "success", "data": args}}},
			{"event_type": "command.completed", "status": "success"},
		} {
			ev["execution_id"], ev["step"], ev["worker_id"], ev["meta"] = exec, step, "w1", meta
			ev["event_id"] = fmt.Sprintf("%s-%d", commandID, j)
			sv.must(t, 200, "POST", "/api/events", tWorker, ev)
		}
	}
	if strings.Join(steps, ",") != "start,middle,end" {
		t.Fatalf("steps ran %v", steps)
	}
	r = sv.must(t, 200, "GET", "/api/executions/"+exec, tAPI, nil)
	if r.str("status") != "COMPLETED" {
		t.Fatalf("execution: %s", r.body)
	}
	if res, _ := r.json["result"].(map[string]any); res["first"] != int64(41) {
		t.Fatalf("result %v, want {first: 41}", r.json["result"])
	}
	if mid := r.json["steps"].(map[string]any)["middle"].(map[string]any); mid["result"].(map[string]any)["m"] != int64(42) {
		t.Fatalf("middle: %v", mid)
	}
	r = sv.must(t, 200, "GET", "/api/executions/"+exec+"/status", tAPI, nil)
	if p := r.json["progress"].(map[string]any); p["completed_steps"] != int64(3) {
		t.Fatalf("status: %s", r.body)
	}

	// /metrics: what the flow did, and the outbox read at scrape time.
	sv.do(t, "GET", "/metrics", "", nil, nil)
	m := sv.do(t, "GET", "/metrics", tAPI, nil, nil)
	if m.status != 200 {
		t.Fatalf("metrics: %d %s", m.status, m.body)
	}
	for _, want := range []string{
		`noetl_events_ingested_total{event_type="command.completed",status="200"} 3`,
		`noetl_events_ingested_total{event_type="call.done",status="200"} 3`,
		`noetl_claims_total{status="200"} 3`,
		`noetl_http_requests_total{route="POST /api/events",status="200"} 9`,
		`noetl_event_ingest_duration_seconds_count{event_type="command.started"} 3`,
		"noetl_outbox_pending 0",
		"noetl_outbox_scrape_ok 1",
		`noetl_orchestration_duration_seconds_count{event_type="playbook.started"} 1`,
		`noetl_orchestration_duration_seconds_count{event_type="command.completed"} 3`,
		`noetl_commands{status="COMPLETED"} 3`,
		"noetl_commands_scrape_ok 1",
	} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("metrics lack %q:\n%s", want, m.body)
		}
	}
	if r := sv.do(t, "GET", "/metrics", "", nil, nil); r.status != 401 {
		t.Errorf("metrics without a token: %d", r.status)
	}
	if r := sv.do(t, "GET", "/metrics", tWorker, nil, nil); r.status != 403 {
		t.Errorf("metrics with a worker token: %d", r.status)
	}
}

// TestTooEarlyAndCancelOverHTTP: 429 with Retry-After before a retry is due
// (R-L7); 409 for claims and events after cancel (R-R10).
func TestTooEarlyAndCancelOverHTTP(t *testing.T) {
	sv := newServer(t, apitest.Options{})
	sv.must(t, 200, "POST", "/api/catalog/register", tAPI, map[string]any{"content": apitest.Flaky})
	sv.must(t, 200, "POST", "/api/catalog/register", tAPI, map[string]any{"content": apitest.ThreeSteps})

	r := sv.must(t, 200, "POST", "/api/execute", tAPI, map[string]any{"path": "tests/flaky"})
	execID, _ := strconv.ParseInt(r.str("execution_id"), 10, 64)
	c := sv.s.Pending(t, execID)[0]
	claim := fmt.Sprintf("/api/commands/%d/claim", c.IssuedEventID)
	sv.must(t, 200, "POST", claim, tWorker, map[string]any{"worker_id": "w1"})
	sv.must(t, 200, "POST", "/api/events", tWorker, map[string]any{"execution_id": r.str("execution_id"), "step": "start",
		"event_type": "command.failed", "status": "error", "worker_id": "w1", "payload": map[string]any{"error": "boom"},
		"meta": map[string]any{"command_id": c.CommandID, "attempt": int64(1)}})
	r = sv.must(t, 429, "POST", claim, tWorker, map[string]any{"worker_id": "w1"})
	if ra, err := strconv.Atoi(r.header.Get("Retry-After")); err != nil || ra < 1 || ra > 30 {
		t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
	}

	r = sv.must(t, 200, "POST", "/api/execute", tAPI, map[string]any{"path": "tests/three"})
	exec := r.str("execution_id")
	execID, _ = strconv.ParseInt(exec, 10, 64)
	c = sv.s.Pending(t, execID)[0]
	sv.must(t, 200, "POST", fmt.Sprintf("/api/commands/%d/claim", c.IssuedEventID), tWorker, map[string]any{"worker_id": "w1"})
	sv.must(t, 200, "POST", "/api/executions/"+exec+"/cancel", tAPI, map[string]any{"reason": "test"})
	// Stored ignored (R-R10) and answered 200 naming why, as NoETL's server takes it.
	r = sv.must(t, 200, "POST", "/api/events", tWorker, map[string]any{"execution_id": exec, "step": "start",
		"event_type": "command.completed", "status": "success", "worker_id": "w1",
		"meta": map[string]any{"command_id": c.CommandID, "attempt": int64(1)}})
	if !strings.Contains(r.str("ignored"), "CANCELLED") {
		t.Errorf("event after cancel: %s", r.body)
	}
	sv.must(t, 409, "POST", fmt.Sprintf("/api/commands/%d/heartbeat", c.IssuedEventID), tWorker, map[string]any{"worker_id": "w1"})
	sv.must(t, 409, "POST", fmt.Sprintf("/api/commands/%d/claim", c.IssuedEventID), tWorker, map[string]any{"worker_id": "w2"})
}

// TestGatewayDetails: base64 for bodies that are not UTF-8, request ids,
// 404/405/413 in the error shape, CORS preflight through the gateway.
func TestGatewayDetails(t *testing.T) {
	sv := newServer(t, apitest.Options{CORSOrigins: []string{"http://dash.local"}})

	// A body that is not UTF-8 travels base64 and arrives byte for byte, so
	// the API can refuse it naming the byte (JSON text is UTF-8).
	js, _ := json.Marshal(map[string]string{"content": apitest.ThreeSteps + "# "})
	body := append(append(js[:len(js)-2:len(js)-2], 0xff, 0xfe), `\n"}`...)
	r := sv.do(t, "POST", "/api/catalog/register", tAPI, body, http.Header{"X-Request-Id": {"trace-b64-1"}})
	if want := fmt.Sprintf("not valid UTF-8 at byte %d", len(js)-2); r.status != 400 || !strings.Contains(string(r.body), want) {
		t.Fatalf("register: %d %s, want 400 naming %q", r.status, r.body, want)
	}
	sv.mu.Lock()
	raw := sv.events["trace-b64-1"]
	sv.mu.Unlock()
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatalf("recorded event: %v", err)
	}
	got, _ := base64.StdEncoding.DecodeString(ev.Body)
	if !ev.IsBase64Encoded || !bytes.Equal(got, body) {
		t.Fatalf("event: base64 %v, body round trip %v", ev.IsBase64Encoded, bytes.Equal(got, body))
	}
	if ev.RouteKey != "POST /api/catalog/register" || ev.RequestContext.HTTP.Method != "POST" ||
		ev.Headers["authorization"] != "Bearer "+tAPI || ev.Version != "2.0" {
		t.Fatalf("event: %+v", ev)
	}
	// A UTF-8 body travels as text; path parameters and the query arrive.
	r = sv.do(t, "GET", "/api/executions/123/events?limit=5&step=a", tAPI, nil, http.Header{"X-Request-Id": {"trace-2"}})
	if r.status != 404 || r.header.Get("X-Request-Id") != "trace-2" {
		t.Fatalf("unknown execution: %d %v", r.status, r.header)
	}
	sv.mu.Lock()
	raw = sv.events["trace-2"]
	sv.mu.Unlock()
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.IsBase64Encoded || ev.PathParameters["id"] != "123" || ev.RawQueryString != "limit=5&step=a" ||
		ev.QueryStringParameters["step"] != "a" || ev.RouteKey != "GET /api/executions/{id}/events" {
		t.Fatalf("event: %+v", ev)
	}
	// A greedy route: API Gateway's route key stops at the greedy variable,
	// whose value runs to the path's end.
	sv.must(t, 200, "POST", "/api/catalog/register", tAPI, map[string]any{"content": apitest.ThreeSteps})
	r = sv.do(t, "GET", "/api/catalog/tests/three/ui_schema", tAPI, nil, http.Header{"X-Request-Id": {"trace-3"}})
	if r.status != 200 || r.str("path") != "tests/three" {
		t.Fatalf("ui_schema: %d %s", r.status, r.body)
	}
	sv.mu.Lock()
	raw = sv.events["trace-3"]
	sv.mu.Unlock()
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.RouteKey != "GET /api/catalog/{path+}" || ev.PathParameters["path"] != "tests/three/ui_schema" {
		t.Fatalf("ui_schema's event: %s %v", ev.RouteKey, ev.PathParameters)
	}
	// Without a client id, the gateway makes one.
	if r = sv.do(t, "GET", "/api/health", "", nil, nil); len(r.header.Get("X-Request-Id")) != 32 {
		t.Errorf("request id %q", r.header.Get("X-Request-Id"))
	}

	r = sv.do(t, "GET", "/nope", tAPI, nil, nil)
	if r.status != 404 || r.json["status"] != int64(404) || r.str("error") == "" {
		t.Fatalf("404: %d %s", r.status, r.body)
	}
	r = sv.do(t, "DELETE", "/api/catalog/1", tAPI, nil, nil)
	if r.status != 405 || r.header.Get("Allow") != "GET" || r.json["status"] != int64(405) {
		t.Fatalf("405: %d %v %s", r.status, r.header, r.body)
	}
	r = sv.do(t, "POST", "/api/execute", tAPI, bytes.Repeat([]byte("x"), 2<<20), nil)
	if r.status != 413 || !strings.Contains(r.str("error"), "1048576") {
		t.Fatalf("413: %d %s", r.status, r.body)
	}

	// CORS: the preflight goes through the path's function ($default route).
	r = sv.do(t, "OPTIONS", "/api/execute", "", nil, http.Header{"Origin": {"http://dash.local"}, "Access-Control-Request-Method": {"POST"}})
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "http://dash.local" || r.header.Get("Access-Control-Allow-Methods") != "POST" {
		t.Fatalf("preflight: %d %v", r.status, r.header)
	}
	r = sv.do(t, "GET", "/api/catalog", tAPI, nil, http.Header{"Origin": {"http://dash.local"}})
	if r.header.Get("Access-Control-Allow-Origin") != "http://dash.local" {
		t.Fatalf("CORS on a request: %v", r.header)
	}
	// What the gateway answers itself carries them too: an unknown route's
	// 404 (with NoETL's detail), the preflight of a path without routes,
	// which lets the request through to that 404, and a body over its limit.
	origin := http.Header{"Origin": {"http://dash.local"}}
	r = sv.do(t, "GET", "/api/no-such-route", tAPI, nil, origin)
	if r.status != 404 || r.header.Get("Access-Control-Allow-Origin") != "http://dash.local" || r.str("detail") != r.str("error") {
		t.Fatalf("unknown route: %d %v %s", r.status, r.header, r.body)
	}
	r = sv.do(t, "OPTIONS", "/api/no-such-route", "", nil, http.Header{"Origin": {"http://dash.local"}, "Access-Control-Request-Method": {"DELETE"}})
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "http://dash.local" || r.header.Get("Access-Control-Allow-Methods") != "DELETE" {
		t.Fatalf("preflight of an unknown path: %d %v", r.status, r.header)
	}
	r = sv.do(t, "POST", "/api/execute", tAPI, bytes.Repeat([]byte("x"), 11<<20), origin)
	if r.status != 413 || r.header.Get("Access-Control-Allow-Origin") != "http://dash.local" {
		t.Fatalf("over the gateway's limit: %d %v", r.status, r.header)
	}
	r = sv.do(t, "GET", "/api/no-such-route", tAPI, nil, http.Header{"Origin": {"http://evil.local"}})
	if r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("a foreign origin was allowed: %v", r.header)
	}
}

// TestToEventShape checks the converted event against API Gateway's
// documented payload 2.0 fields.
func TestToEventShape(t *testing.T) {
	req := httptest.NewRequest("POST", "http://api.local:8082/api/commands/77/claim?x=1&x=2", strings.NewReader(`{"worker_id":"w"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Add("X-Multi", "a")
	req.Header.Add("X-Multi", "b")
	req.Header.Set("Cookie", "a=1; b=2")
	req.RemoteAddr = "192.0.2.9:5555"
	ev := localgw.ToEvent(req, []byte(`{"worker_id":"w"}`), "POST /api/commands/{event_id}/claim", map[string]string{"event_id": "77"}, "rid-1")
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	rc := m["requestContext"].(map[string]any)
	h := m["headers"].(map[string]any)
	switch {
	case m["version"] != "2.0", m["routeKey"] != "POST /api/commands/{event_id}/claim", m["rawPath"] != "/api/commands/77/claim",
		m["rawQueryString"] != "x=1&x=2", m["isBase64Encoded"] != false, m["body"] != `{"worker_id":"w"}`:
		t.Fatalf("event: %s", b)
	case h["content-type"] != "application/json", h["x-multi"] != "a,b", h["host"] != "api.local:8082", h["cookie"] != nil:
		t.Fatalf("headers: %v", h)
	case fmt.Sprint(m["cookies"]) != "[a=1 b=2]", m["queryStringParameters"].(map[string]any)["x"] != "1,2",
		m["pathParameters"].(map[string]any)["event_id"] != "77":
		t.Fatalf("event: %s", b)
	case rc["requestId"] != "rid-1", rc["routeKey"] != "POST /api/commands/{event_id}/claim", rc["stage"] != "$default",
		rc["domainName"] != "api.local:8082", rc["http"].(map[string]any)["sourceIp"] != "192.0.2.9",
		rc["http"].(map[string]any)["method"] != "POST", rc["http"].(map[string]any)["path"] != "/api/commands/77/claim":
		t.Fatalf("requestContext: %v", rc)
	}
}
