package lambdafn_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/dev/lambdaemu"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lambdafn"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/store"
)

func TestMain(m *testing.M) { devstacktest.Main(m) }

// lockedBuffer collects EMF lines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// functions builds every function's handler over one stack, each wrapped the
// way the Lambda runtime wraps it.
type functions struct {
	s       *apitest.Stack
	invoke  map[string]lambda.Handler
	handler map[string]*lambdafn.Handler
	emf     *lockedBuffer
}

func newFunctions(t *testing.T, s *apitest.Stack, serverURL string) *functions {
	t.Helper()
	f := &functions{s: s, invoke: map[string]lambda.Handler{}, handler: map[string]*lambdafn.Handler{}, emf: &lockedBuffer{}}
	for _, fn := range api.Functions() {
		h, err := lambdafn.New(fn, s.Build, lambdafn.Options{ServerURL: serverURL, Stage: "test", Metrics: f.emf})
		if err != nil {
			t.Fatal(err)
		}
		f.handler[fn] = h
		f.invoke[fn] = lambda.NewHandler(h.Handle)
	}
	return f
}

// event reads a testdata event and fills its placeholders.
func event(t *testing.T, name string, vars map[string]string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for k, v := range vars {
		s = strings.ReplaceAll(s, "{{"+k+"}}", v)
	}
	return []byte(s)
}

// http invokes fn with an API Gateway event and decodes the response.
func (f *functions) http(t *testing.T, fn string, ev []byte, want int) (events.APIGatewayV2HTTPResponse, map[string]any) {
	t.Helper()
	out, err := f.invoke[fn].Invoke(context.Background(), ev)
	if err != nil {
		t.Fatalf("%s: invoke: %v", fn, err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("%s: the answer is not an API Gateway response: %v: %s", fn, err, out)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s: status %d, want %d: %s", fn, resp.StatusCode, want, resp.Body)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	m, err := jsonx.DecodeObject(body)
	if err != nil {
		t.Fatalf("%s: body: %v: %s", fn, err, body)
	}
	return resp, m
}

// TestEveryFunctionThroughTheLambdaHandler drives register → execute →
// claim → ingest → status → replay → outbox through the seven functions,
// each invoked with a real API Gateway v2 event through lambda.NewHandler.
func TestEveryFunctionThroughTheLambdaHandler(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	f := newFunctions(t, s, "")

	// catalog: a base64 body (isBase64Encoded) is decoded before the API sees it.
	resp, m := f.http(t, api.FnCatalog, event(t, "catalog_register_base64.json", nil), 200)
	if m["status"] != "success" || m["path"] != "tests/three" {
		t.Fatalf("register: %v", m)
	}
	if resp.Headers["X-Request-Id"] != "Kx7mZjc0IAMEVfB=" {
		t.Errorf("X-Request-Id %q, want API Gateway's request id", resp.Headers["X-Request-Id"])
	}
	if resp.Headers["Content-Type"] != "application/json" {
		t.Errorf("Content-Type %q", resp.Headers["Content-Type"])
	}
	_, m = f.http(t, api.FnCatalog, event(t, "catalog_list.json", nil), 200)
	if es, _ := m["entries"].([]any); len(es) != 1 {
		t.Fatalf("list: %v", m)
	}

	// execute
	_, m = f.http(t, api.FnExecute, event(t, "execute.json", nil), 200)
	exec := m["execution_id"].(string)
	execID, _ := strconv.ParseInt(exec, 10, 64)
	cmd := s.Pending(t, execID)[0]
	vars := map[string]string{"EXEC": exec, "CMD": strconv.FormatInt(cmd.IssuedEventID, 10), "COMMAND_ID": cmd.CommandID}

	// claim
	_, m = f.http(t, api.FnClaim, event(t, "claim.json", vars), 200)
	if m["status"] != "ok" || m["execution_id"] != execID || m["command_id"] != cmd.CommandID {
		t.Fatalf("claim: %v", m)
	}
	// ingest
	_, m = f.http(t, api.FnIngest, event(t, "ingest.json", vars), 200)
	if m["status"] != "ok" {
		t.Fatalf("ingest: %v", m)
	}
	// status
	_, m = f.http(t, api.FnStatus, event(t, "status.json", vars), 200)
	if m["status"] != "RUNNING" || m["current_step"] != "start" {
		t.Fatalf("status: %v", m)
	}
	// replay
	_, m = f.http(t, api.FnReplay, event(t, "replay.json", vars), 200)
	if v, _ := m["verify"].(map[string]any); v["consistent"] != true || m["steps"] == nil {
		t.Fatalf("replay: %v", m)
	}
	// outbox (internal scope)
	_, m = f.http(t, api.FnOutbox, event(t, "outbox_pending_count.json", nil), 200)
	if _, ok := m["pending"].(int64); !ok {
		t.Fatalf("pending-count: %v", m)
	}
	// A function answers only its own routes (R-A1).
	f.http(t, api.FnCatalog, event(t, "status.json", vars), 404)

	// The server URL was derived from the first event's domain: the
	// notification of the started command carries it.
	msg, err := f.s.JS.Stream(context.Background(), notify.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := msg.GetLastMsgForSubject(context.Background(), notify.Subject(notify.PoolShared, execID))
	if err != nil {
		t.Fatal(err)
	}
	var body notify.Body
	if err := json.Unmarshal(raw.Data, &body); err != nil {
		t.Fatal(err)
	}
	if body.ServerURL != "https://a1b2c3d4e5.execute-api.us-east-1.amazonaws.com" || body.ExecutionID != execID {
		t.Fatalf("notification: %+v", body)
	}
}

// TestNamedStage: on a named stage rawPath carries the stage; the route key
// and path parameters from API Gateway are used, and health answers.
func TestNamedStage(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	f := newFunctions(t, s, "")
	_, m := f.http(t, api.FnStatus, event(t, "status_health_named_stage.json", nil), 200)
	if m["status"] != "ok" || m["database"] != "ok" {
		t.Fatalf("health: %v", m)
	}
}

// TestHealthProbeOnDirectInvoke: every function answers a direct invoke that
// is not an API Gateway event with the health document (R-A1).
func TestHealthProbeOnDirectInvoke(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	f := newFunctions(t, s, "https://api.example")
	for _, fn := range api.Functions() {
		for _, payload := range []string{`{"health": true}`, `{}`} {
			out, err := f.invoke[fn].Invoke(context.Background(), []byte(payload))
			if err != nil {
				t.Fatalf("%s %s: %v", fn, payload, err)
			}
			var doc map[string]any
			if err := json.Unmarshal(out, &doc); err != nil {
				t.Fatalf("%s: %v: %s", fn, err, out)
			}
			if doc["status"] != "ok" || doc["database"] != "ok" || doc["nats"] != "ok" || doc["function"] != fn {
				t.Fatalf("%s %s: %s", fn, payload, out)
			}
		}
	}
	s.NATS.Down()
	out, err := f.invoke[api.FnClaim].Invoke(context.Background(), []byte(`{"health": true}`))
	if err != nil || !strings.Contains(string(out), `"nats":"down"`) || !strings.Contains(string(out), `"status":503`) {
		t.Fatalf("probe with NATS down: %s %v", out, err)
	}
}

// emfLine is one CloudWatch Embedded Metric Format record.
type emfLine struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
	Stage            string   `json:"Stage"`
	OutboxLagSeconds *float64 `json:"OutboxLagSeconds"`
}

func lastEMF(t *testing.T, out string) emfLine {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var e emfLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &e); err != nil {
		t.Fatalf("EMF line %q: %v", lines[len(lines)-1], err)
	}
	cw := e.AWS.CloudWatchMetrics
	if e.AWS.Timestamp == 0 || len(cw) != 1 || cw[0].Namespace != "NoETL" || len(cw[0].Dimensions) != 1 ||
		len(cw[0].Dimensions[0]) != 1 || cw[0].Dimensions[0][0] != "Stage" || len(cw[0].Metrics) != 1 ||
		cw[0].Metrics[0].Name != "OutboxLagSeconds" || cw[0].Metrics[0].Unit != "Seconds" || e.OutboxLagSeconds == nil {
		t.Fatalf("EMF record does not follow infra/README.md's contract: %s", lines[len(lines)-1])
	}
	return e
}

// TestScheduledOutbox: the EventBridge event (raw or with the template's
// {"maxBatch": n}) drains the outbox and prints one EMF line per run.
func TestScheduledOutbox(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	f := newFunctions(t, s, "https://api.example")
	out, err := f.invoke[api.FnOutbox].Invoke(context.Background(), event(t, "eventbridge_scheduled.json", nil))
	if err != nil {
		t.Fatal(err)
	}
	var report map[string]any
	if err := json.Unmarshal(out, &report); err != nil || report["outbox_pending"] != 0.0 {
		t.Fatalf("report: %s %v", out, err)
	}
	e := lastEMF(t, f.emf.String())
	if e.Stage != "test" || *e.OutboxLagSeconds != 0 {
		t.Fatalf("EMF with nothing pending: %+v", e)
	}

	// NATS down: notifications stay in the outbox; aged a minute, the run
	// cannot publish them and reports the lag.
	if _, err := s.API.Service().Register(context.Background(), apitest.ThreeSteps); err != nil {
		t.Fatal(err)
	}
	s.NATS.Down()
	apitestExecute(t, f)
	for i := range s.Store.NumShards() {
		if _, err := s.Store.Shard(i).Pool().Exec(s.Ctx, `UPDATE outbox SET created_at = now() - interval '90 seconds'`); err != nil {
			t.Fatal(err)
		}
	}
	out, err = f.invoke[api.FnOutbox].Invoke(context.Background(), []byte(`{"maxBatch": 5}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &report); err != nil || report["publish_failed"] != 1.0 || report["outbox_pending"] != 1.0 {
		t.Fatalf("report with NATS down: %s", out)
	}
	if e := lastEMF(t, f.emf.String()); *e.OutboxLagSeconds < 89 {
		t.Fatalf("lag %v, want about 90 s", *e.OutboxLagSeconds)
	}
	// NATS back: the next run publishes and the lag drops to 0.
	if err := s.NATS.Up(); err != nil {
		t.Fatal(err)
	}
	var published bool
	for range 50 {
		// The first publish after the restart may race the reconnect; the
		// failed row backs off 2^k seconds, so make it due again.
		for i := range s.Store.NumShards() {
			_, _ = s.Store.Shard(i).Pool().Exec(s.Ctx, `UPDATE outbox SET available_at = now() WHERE status = 'PENDING'`)
		}
		out, err = f.invoke[api.FnOutbox].Invoke(context.Background(), []byte(`{"maxBatch": 5}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = json.Unmarshal(out, &report)
		if report["outbox_pending"] == 0.0 {
			published = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !published {
		t.Fatalf("the outbox did not drain after NATS came back: %s", out)
	}
	if e := lastEMF(t, f.emf.String()); *e.OutboxLagSeconds != 0 {
		t.Fatalf("lag after draining: %v", *e.OutboxLagSeconds)
	}
	if n := strings.Count(f.emf.String(), "\n"); n < 3 {
		t.Fatalf("%d EMF lines for 3+ runs", n)
	}

	// Only the outbox function has a schedule; maxBatch is checked.
	if _, err := f.invoke[api.FnStatus].Invoke(context.Background(), event(t, "eventbridge_scheduled.json", nil)); err == nil {
		t.Fatal("the status function accepted a scheduled event")
	}
	if _, err := f.invoke[api.FnOutbox].Invoke(context.Background(), []byte(`{"maxBatch": "lots"}`)); err == nil {
		t.Fatal("maxBatch \"lots\" was accepted")
	}
	// A REST API (payload 1.0) event is refused rather than mistaken for a probe.
	if _, err := f.invoke[api.FnStatus].Invoke(context.Background(), []byte(`{"resource": "/api/health", "httpMethod": "GET", "requestContext": {"stage": "prod"}}`)); err == nil {
		t.Fatal("a payload 1.0 event was accepted")
	}
}

func apitestExecute(t *testing.T, f *functions) {
	t.Helper()
	f.http(t, api.FnExecute, event(t, "execute.json", nil), 200)
}

// TestAdapterBodies: base64 both ways, bad base64, cookies and query.
func TestAdapterBodies(t *testing.T) {
	raw := []byte{0xff, 0xfe, 'o', 'k', 0x80}
	req, err := lambdafn.ToRequest(&events.APIGatewayV2HTTPRequest{
		RawPath: "/api/health", RouteKey: "GET /api/health", RawQueryString: "a=1&a=2&b=%20x",
		Headers: map[string]string{"x-thing": "v"}, Cookies: []string{"s=1", "t=2"},
		Body: base64.StdEncoding.EncodeToString(raw), IsBase64Encoded: true,
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "rid",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(req.Body, raw) || req.Query["a"][1] != "2" || req.Query.Get("b") != " x" ||
		req.Header.Get("X-Thing") != "v" || req.Header.Get("Cookie") != "s=1; t=2" || req.RequestID != "rid" {
		t.Fatalf("request: %+v", req)
	}
	resp := lambdafn.FromResponse(&api.Response{Status: 200, Header: map[string][]string{"Vary": {"Origin", "Accept"}}, Body: raw})
	if !resp.IsBase64Encoded || resp.Body != base64.StdEncoding.EncodeToString(raw) || resp.Headers["Vary"] != "Origin, Accept" {
		t.Fatalf("response: %+v", resp)
	}
	resp = lambdafn.FromResponse(&api.Response{Status: 200, Body: []byte(`{"a":"é"}`)})
	if resp.IsBase64Encoded || resp.Body != `{"a":"é"}` {
		t.Fatalf("UTF-8 response: %+v", resp)
	}

	// A body flagged base64 that does not decode: 400 in the error shape.
	s := apitest.New(t, apitest.Options{Open: true})
	f := newFunctions(t, s, "https://api.example")
	var ev map[string]any
	_ = json.Unmarshal(event(t, "execute.json", nil), &ev)
	ev["isBase64Encoded"], ev["body"] = true, "%%% not base64"
	b, _ := json.Marshal(ev)
	resp, m := f.http(t, api.FnExecute, b, 400)
	if !strings.Contains(fmt.Sprint(m["error"]), "base64") || m["status"] != int64(400) {
		t.Fatalf("bad base64: %v", m)
	}
	if resp.Headers["X-Content-Type-Options"] != "nosniff" || resp.Headers["X-Request-Id"] == "" {
		t.Fatalf("bad base64: headers %v, want nosniff and the request id", resp.Headers)
	}
}

// TestFromEnv: the cold-start path from environment variables; it refuses to
// run open unless NOETL_ALLOW_OPEN, and does not create the NATS stream (R-A7).
func TestFromEnv(t *testing.T) {
	pg := devstacktest.Postgres(t, 2)
	n := devstacktest.NATS(t)
	env := map[string]string{
		"NOETL_DATABASE_URL": pg.ClusterDSN, "NOETL_SHARD_URLS": strings.Join(pg.ShardDSNs, ","),
		"NOETL_MIGRATE_ON_START": "true", "NOETL_NATS_URL": n.URL(), "NOETL_STAGE": "ci",
		"AWS_LAMBDA_FUNCTION_NAME": "noetl-ci-StatusFunction", "NOETL_DB_SSLMODE": "disable",
	}
	getenv := func(k string) string { return env[k] }
	ctx := context.Background()
	if _, _, err := lambdafn.FromEnv(ctx, api.FnStatus, getenv, lambdafn.Env{}); err == nil || !strings.Contains(err.Error(), "NOETL_ALLOW_OPEN") {
		t.Fatalf("started open in Lambda: %v", err)
	}
	delete(env, "AWS_LAMBDA_FUNCTION_NAME")
	if _, _, err := lambdafn.FromEnv(ctx, api.FnStatus, getenv, lambdafn.Env{}); err == nil || !strings.Contains(err.Error(), "NOETL_ALLOW_OPEN") {
		t.Fatalf("started open outside Lambda: %v", err)
	}
	env["AWS_LAMBDA_FUNCTION_NAME"] = "noetl-ci-StatusFunction"
	env["NOETL_ALLOW_OPEN"] = "true"
	var emf lockedBuffer
	h, closeFn, err := lambdafn.FromEnv(ctx, api.FnOutbox, getenv, lambdafn.Env{Metrics: &emf})
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	out, err := lambda.NewHandler(h.Handle).Invoke(ctx, []byte(`{"health": true}`))
	if err != nil || !strings.Contains(string(out), `"status":"ok"`) {
		t.Fatalf("health: %s %v", out, err)
	}
	if _, err := lambda.NewHandler(h.Handle).Invoke(ctx, event(t, "eventbridge_scheduled.json", nil)); err != nil {
		t.Fatal(err)
	}
	if e := lastEMF(t, emf.String()); e.Stage != "ci" {
		t.Fatalf("EMF stage %q", e.Stage)
	}
	// With a token it starts closed.
	delete(env, "NOETL_ALLOW_OPEN")
	env["NOETL_API_TOKEN"] = "tok"
	h2, close2, err := lambdafn.FromEnv(ctx, api.FnCatalog, getenv, lambdafn.Env{})
	if err != nil {
		t.Fatal(err)
	}
	defer close2()
	_ = h2
	// Nobody created the stream: cold starts never do (R-A7).
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctx, notify.StreamName); err == nil {
		t.Fatal("a cold start created the NATS stream")
	}
}

// TestFunctionBinariesStayLean: function binaries link neither nats-server,
// the CDK nor anything under shared/dev, the local stack and the tools that
// test and measure the product (serverless.md: ~18 MB, no CDK, no nats-server).
func TestFunctionBinariesStayLean(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "lambda.norpc", "github.com/noetl-go/noetl/functions/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, bad := range []string{"github.com/nats-io/nats-server", "github.com/aws/aws-cdk-go", "/shared/dev/"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("a function binary links %s", bad)
		}
	}
}

// TestRealBootstrap builds the status function's binary for this machine and
// runs it under the Lambda Runtime API emulator (shared/dev/lambdaemu): the cold
// start from the environment, lambda.Start and the runtime protocol, then a
// health probe and an API Gateway event.
func TestRealBootstrap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a function binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, "github.com/noetl-go/noetl/functions/status")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	pg := devstacktest.Postgres(t, 2)
	emu, err := lambdaemu.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	var stderr lockedBuffer
	cmd := exec.Command(bin)
	cmd.Env = []string{"AWS_LAMBDA_RUNTIME_API=" + emu.Addr(), "AWS_LAMBDA_FUNCTION_NAME=noetl-ci-StatusFunction",
		"NOETL_DATABASE_URL=" + pg.ClusterDSN, "NOETL_SHARD_URLS=" + strings.Join(pg.ShardDSNs, ","),
		"NOETL_DB_SSLMODE=disable", "NOETL_MIGRATE_ON_START=true", "NOETL_API_TOKEN=" + apitest.APIToken, "NOETL_STAGE=ci"}
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := emu.Invoke(ctx, []byte(`{"health": true}`))
	if err != nil || r.Error != "" || !strings.Contains(string(r.Payload), `"database":"ok"`) {
		t.Fatalf("health probe: %s %v %s\nstderr:\n%s", r.Payload, err, r.Error, stderr.String())
	}
	r, err = emu.Invoke(ctx, event(t, "status_health_named_stage.json", nil))
	if err != nil || r.Error != "" {
		t.Fatalf("API event: %v %s", err, r.Error)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(r.Payload, &resp); err != nil || resp.StatusCode != 200 || resp.Headers["X-Request-Id"] != "Kx7mZjc0IAMEVfH=" {
		t.Fatalf("API response: %s %v", r.Payload, err)
	}
	if !strings.Contains(stderr.String(), `"msg":"cold start"`) {
		t.Errorf("no cold start log line:\n%s", stderr.String())
	}
}

// TestColdStartWhileTheDatabaseIsDown (issue 23): a function that starts
// while its database cannot be reached does not fail its cold start: it
// answers API Gateway events 503 with Retry-After, and serves as usual from
// the first invocation after the database is back.
func TestColdStartWhileTheDatabaseIsDown(t *testing.T) {
	pg := devstacktest.Postgres(t, 0)
	down := "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2" // nothing listens there
	env := map[string]string{"NOETL_DATABASE_URL": down, "NOETL_MIGRATE_ON_START": "true", "NOETL_ALLOW_OPEN": "true",
		"NOETL_DB_SSLMODE": "disable"}
	start := func(ctx context.Context) (*lambdafn.Handler, func(), error) {
		return lambdafn.FromEnv(ctx, api.FnStatus, func(k string) string { return env[k] }, lambdafn.Env{})
	}
	ctx := context.Background()
	if _, _, err := start(ctx); !store.Transient(err) {
		t.Fatalf("a cold start with the database down: %v, want a transient error", err)
	}
	w := lambdafn.NewWaiting(start)
	defer w.Close()
	invoke := lambda.NewHandler(w.Handle)
	health := event(t, "status.json", map[string]string{"EXEC": "1024"})
	out, err := invoke.Invoke(ctx, health)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Headers["Retry-After"] == "" || !strings.Contains(resp.Body, "database") {
		t.Fatalf("with the database down: %d %v %s; want 503 with Retry-After", resp.StatusCode, resp.Headers, resp.Body)
	}
	env["NOETL_DATABASE_URL"] = pg.ClusterDSN // the database is back
	out, err = invoke.Invoke(ctx, health)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode == http.StatusServiceUnavailable {
		t.Fatalf("with the database back: %s %v", out, err)
	}
}

// TestFireSchedulesInvocation: {"fire_schedules": true} (what the scheduler
// entries and the sweep send) fires the due schedules through the schedules
// function and answers the report; other functions refuse it.
func TestFireSchedulesInvocation(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	f := newFunctions(t, s, "https://api.example")
	ctx := context.Background()
	if _, err := s.API.Service().Register(ctx, apitest.ThreeSteps); err != nil {
		t.Fatal(err)
	}
	path := "tests/three"
	sc, err := s.API.Service().CreateSchedule(ctx, controlplane.SchedulePatch{PlaybookPath: &path, IntervalSeconds: new(int64(1))})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(sc.FireAt) + 10*time.Millisecond)
	out, err := f.invoke[api.FnSchedules].Invoke(ctx, []byte(`{"fire_schedules": true, "schedule_id": "`+strconv.FormatInt(sc.ScheduleID, 10)+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var r controlplane.FireReport
	if err := json.Unmarshal(out, &r); err != nil || r.Started != 1 || r.Schedules != 1 || !r.NextFireAt.After(sc.FireAt) {
		t.Fatalf("report %s (%v), want one run started and the next fire time", out, err)
	}
	if _, err := f.invoke[api.FnOutbox].Invoke(ctx, []byte(`{"fire_schedules": true}`)); err == nil || !strings.Contains(err.Error(), "fires no schedules") {
		t.Fatalf("the outbox function fired schedules: %v", err)
	}
}
