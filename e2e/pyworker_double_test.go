package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// pyWorker is a Go double of NoETL's Python worker (github noetl/noetl 4.26,
// noetl/worker/nats_worker.py and noetl/core/messaging/nats_client.py), written
// from its wire: the requests recorded in ../shared/conformance/noetl-worker and
// the worker's source. What it sends, and when, is the real worker's:
//
//   - one durable pull consumer per segment of NOETL_WORKER_POOL_SEGMENTS
//     (default legacy,shared,python) on stream NOETL_COMMANDS: legacy is
//     noetl_worker_pool with no filter, the others noetl_worker_pool_<segment>
//     filtered to noetl.commands.<segment>.>; before consuming it adds to the
//     stream whichever of noetl.commands and noetl.commands.> it lacks;
//
//   - per notification: ack a command it claimed or skipped within its
//     memory's TTL (recentTTL: NoETL's min(120 s, its command timeout)); else POST
//     /api/commands/{event_id}/claim {worker_id, locality}; 409 active_claim or
//     already_terminal (detail.code) acks and skips, another 409 naks;
//
//   - POST /api/events/batch [command.started, step.enter]; command.heartbeat
//     via POST /api/events every heartbeat interval while the tool runs; then
//     [call.done {response, result: {status: COMPLETED, context}}, step.exit,
//     command.completed] or [call.error …, command.failed] — each batch under
//     one Idempotency-Key, retried three times under that key;
//
//   - tools return NoETL's outputs: python its `result` (a top-level `return`
//     is a SyntaxError, as exec refuses it), http {status_code, headers, url,
//     elapsed, data}, task_sequence {status, _prev, results, ctx, metrics}.
//
//   - its pool calls: POST /api/worker/pool/register {name: <worker id>,
//     component_type, runtime: "python", status, capacity: 1, pid, hostname,
//     labels: {nats_consumer}, meta: {nats_url, started_at}} at start and again
//     every 15 s as its heartbeat (poolEvery), GET /api/pool/status every 8 s
//     after a first wait (probeEvery) for its adaptive concurrency, and POST
//     /api/worker/pool/deregister {name, component_type} when it stops; a
//     refusal is only logged, never fatal.
//
// Its pipelines run through our pipeline runner with its own tools: the wire,
// not NoETL's template engine, is what it doubles.
type pyWorker struct {
	server    string
	nc        *nats.Conn
	id        string
	segments  []string
	heartbeat time.Duration
	python    string
	// poolEvery is how often it registers again; probeEvery how often it
	// reads the pool status.
	poolEvery, probeEvery time.Duration
	// recentTTL is how long it drops the notifications of a command id it
	// claimed or was refused: a retry of that id (attempt 2 after a lease
	// expired) is claimed at its first announcement after that.
	recentTTL time.Duration
	hc        *http.Client
	started   string

	mu        sync.Mutex
	recent    map[string]time.Time
	claims    map[string][]int // command_id → claim answers' statuses
	posts     []posted
	poolCalls []posted
	// ready is closed once it consumes and has registered.
	ready chan struct{}
}

// posted is one event request the double made and the status it got.
type posted struct {
	path    string
	names   []string
	command string // the command id its events name
	status  int
}

func newPyWorker(server string, nc *nats.Conn) *pyWorker {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &pyWorker{server: strings.TrimRight(server, "/"), nc: nc, id: "worker-" + hex.EncodeToString(b),
		segments: []string{"legacy", "shared", "python"}, heartbeat: 15 * time.Second, python: "python3",
		poolEvery: 15 * time.Second, probeEvery: 8 * time.Second, recentTTL: 120 * time.Second, started: time.Now().UTC().Format("2006-01-02T15:04:05.000000+00:00"), ready: make(chan struct{}),
		hc: &http.Client{Timeout: 30 * time.Second}, recent: map[string]time.Time{}, claims: map[string][]int{}}
}

const (
	noetlStream   = "NOETL_COMMANDS"
	noetlSubject  = "noetl.commands"
	noetlConsumer = "noetl_worker_pool"
)

// run subscribes and serves notifications until ctx ends.
func (w *pyWorker) run(ctx context.Context) error {
	js, err := jetstream.New(w.nc)
	if err != nil {
		return err
	}
	var ccs []jetstream.ConsumeContext
	defer func() {
		for _, cc := range ccs {
			cc.Stop()
		}
	}()
	for _, seg := range w.segments {
		s, err := js.Stream(ctx, noetlStream)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("stream %s: %w", noetlStream, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		cfg := info.Config
		missing := false
		for _, want := range []string{noetlSubject, noetlSubject + ".>"} {
			if !containsString(cfg.Subjects, want) {
				cfg.Subjects, missing = append(cfg.Subjects, want), true
			}
		}
		if missing {
			if _, err := js.UpdateStream(ctx, cfg); err != nil {
				return err
			}
		}
		cc := jetstream.ConsumerConfig{Durable: noetlConsumer, AckPolicy: jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverNewPolicy, AckWait: 5 * time.Minute, MaxAckPending: 64}
		if seg != "legacy" {
			cc.Durable, cc.FilterSubject = noetlConsumer+"_"+seg, noetlSubject+"."+seg+".>"
		}
		cons, err := js.CreateOrUpdateConsumer(ctx, noetlStream, cc)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("consumer %s: %w", cc.Durable, err)
		}
		c, err := cons.Consume(func(m jetstream.Msg) { go w.handle(ctx, m) })
		if err != nil {
			return err
		}
		ccs = append(ccs, c)
	}
	// Like the real worker: subscribers first, then the registration and its
	// beats, then the pool status probe.
	w.poolCall(ctx, "POST", "/api/worker/pool/register", w.registration())
	var pool sync.WaitGroup
	pool.Add(2)
	go func() {
		defer pool.Done()
		every(ctx, w.poolEvery, func() { w.poolCall(ctx, "POST", "/api/worker/pool/register", w.registration()) })
	}()
	go func() {
		defer pool.Done()
		every(ctx, w.probeEvery, func() { w.poolCall(ctx, "GET", "/api/pool/status", nil) })
	}()
	defer func() {
		pool.Wait()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		w.poolCall(dctx, "POST", "/api/worker/pool/deregister", map[string]any{"name": w.id, "component_type": "worker_pool"})
	}()
	close(w.ready)
	<-ctx.Done()
	return nil
}

// registration is the Python worker's register body; started_at is fixed per
// process, so each re-registration is the same instance.
func (w *pyWorker) registration() map[string]any {
	return map[string]any{"name": w.id, "component_type": "worker_pool", "runtime": "python", "status": "ready",
		"capacity": 1, "pid": os.Getpid(), "hostname": "unknown", "labels": map[string]any{"nats_consumer": noetlConsumer},
		"meta": map[string]any{"nats_url": w.nc.ConnectedUrl(), "started_at": w.started}}
}

// every runs f every d until ctx ends.
func every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// poolCall makes one pool call and records its answer's status (0: no answer).
func (w *pyWorker) poolCall(ctx context.Context, method, path string, body any) {
	var rdr io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rdr = bytes.NewReader(b)
	}
	status := 0
	if req, err := http.NewRequestWithContext(ctx, method, w.server+path, rdr); err == nil {
		req.Header.Set("Content-Type", "application/json")
		if resp, err := w.hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
	}
	if ctx.Err() != nil && status == 0 {
		return // stopping
	}
	w.mu.Lock()
	w.poolCalls = append(w.poolCalls, posted{path: method + " " + path, status: status})
	w.mu.Unlock()
}

// pool returns the pool calls made so far.
func (w *pyWorker) pool() []posted {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.poolCalls)
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

type notification struct {
	ExecutionID int64  `json:"execution_id"`
	EventID     int64  `json:"event_id"`
	CommandID   string `json:"command_id"`
	Step        string `json:"step"`
	ServerURL   string `json:"server_url"`
}

func (w *pyWorker) handle(ctx context.Context, m jetstream.Msg) {
	var n notification
	if err := json.Unmarshal(m.Data(), &n); err != nil {
		_ = m.Term()
		return
	}
	w.mu.Lock()
	at, seen := w.recent[n.CommandID]
	recent := seen && time.Since(at) < w.recentTTL
	w.mu.Unlock()
	if recent {
		_ = m.Ack()
		return
	}
	cmd, status, code := w.claim(ctx, n.EventID)
	w.mu.Lock()
	w.claims[n.CommandID] = append(w.claims[n.CommandID], status)
	if status == http.StatusOK || code == "active_claim" || code == "already_terminal" {
		w.recent[n.CommandID] = time.Now()
	}
	w.mu.Unlock()
	switch {
	case status == http.StatusOK:
		_ = m.Ack()
		w.execute(ctx, n, cmd)
	case status == http.StatusConflict && (code == "active_claim" || code == "already_terminal" || code == "execution_cancelled"):
		_ = m.Ack()
	default:
		_ = m.NakWithDelay(time.Second)
	}
}

// claimed is the part of the claim answer the worker reads.
type claimed struct {
	ExecutionID int64          `json:"execution_id"`
	NodeName    string         `json:"node_name"`
	Action      string         `json:"action"`
	Context     map[string]any `json:"context"`
	Meta        map[string]any `json:"meta"`
}

func (w *pyWorker) claim(ctx context.Context, eventID int64) (*claimed, int, string) {
	body := map[string]any{"worker_id": w.id, "locality": map[string]any{"worker_pool": "worker-cpu-01", "runtime": "cpu"}}
	status, raw := w.post(ctx, fmt.Sprintf("/api/commands/%d/claim", eventID), body, "")
	if status != http.StatusOK {
		var e struct {
			Detail struct {
				Code string `json:"code"`
			} `json:"detail"`
		}
		_ = json.Unmarshal(raw, &e)
		return nil, status, e.Detail.Code
	}
	var c claimed
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&c); err != nil {
		return nil, 0, ""
	}
	c.Context, _ = jsonx.Normalize(c.Context).(map[string]any)
	c.Meta, _ = jsonx.Normalize(c.Meta).(map[string]any)
	return &c, status, ""
}

func (w *pyWorker) execute(ctx context.Context, n notification, c *claimed) {
	step, commandID := c.NodeName, n.CommandID
	w.batch(ctx, c.ExecutionID, []map[string]any{
		{"step": step, "name": "command.started", "payload": map[string]any{"command_id": commandID, "worker_id": w.id}, "actionable": false, "informative": true},
		{"step": step, "name": "step.enter", "payload": map[string]any{"status": "started"}, "actionable": false, "informative": true},
	})
	stop := make(chan struct{})
	beats := sync.WaitGroup{}
	beats.Add(1)
	go func() {
		defer beats.Done()
		t := time.NewTicker(w.heartbeat)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				w.post(ctx, "/api/events", map[string]any{"execution_id": fmt.Sprint(c.ExecutionID), "step": step, "name": "command.heartbeat",
					"payload": map[string]any{"command_id": commandID, "worker_id": w.id}, "worker_id": w.id, "actionable": false, "informative": true}, "")
			}
		}
	}()
	out, toolErr := w.tool(ctx, c)
	close(stop)
	beats.Wait()
	meta := map[string]any{"command_id": commandID}
	if toolErr != "" {
		w.batch(ctx, c.ExecutionID, []map[string]any{
			{"step": step, "name": "call.error", "payload": map[string]any{"error": toolErr, "response": out, "command_id": commandID,
				"loop_event_id": nil, "loop_iteration_index": nil, "result": resultEnvelope("FAILED", out)}, "actionable": true, "informative": true, "meta": meta},
			{"step": step, "name": "step.exit", "payload": map[string]any{"status": "FAILED", "result": resultEnvelope("FAILED", out), "error": toolErr, "command_id": commandID},
				"actionable": false, "informative": true, "meta": meta},
			{"step": step, "name": "command.failed", "payload": map[string]any{"command_id": commandID, "worker_id": w.id, "result": resultEnvelope("FAILED", out), "error": toolErr},
				"actionable": false, "informative": true},
		})
		return
	}
	w.batch(ctx, c.ExecutionID, []map[string]any{
		{"step": step, "name": "call.done", "payload": map[string]any{"response": out, "command_id": commandID,
			"loop_event_id": nil, "loop_iteration_index": nil, "result": resultEnvelope("COMPLETED", out)}, "actionable": true, "informative": true, "meta": meta},
		{"step": step, "name": "step.exit", "payload": map[string]any{"status": "COMPLETED", "result": resultEnvelope("COMPLETED", out), "error": nil, "command_id": commandID},
			"actionable": false, "informative": true, "meta": meta},
		{"step": step, "name": "command.completed", "payload": map[string]any{"command_id": commandID, "worker_id": w.id, "result": resultEnvelope("COMPLETED", out)},
			"actionable": false, "informative": true},
	})
}

// resultEnvelope is NoETL's worker's payload.result: the lifecycle status and
// the output without its data fields (scalars and flat objects only).
func resultEnvelope(status string, out any) map[string]any {
	r := map[string]any{"status": status}
	m, ok := out.(map[string]any)
	if !ok {
		return r
	}
	ctx := map[string]any{}
	for k, v := range m {
		switch k {
		case "data", "response", "result", "payload", "rows", "columns", "_ref", "_store":
			continue
		}
		switch x := v.(type) {
		case map[string]any:
			flat := map[string]any{}
			for nk, nv := range x {
				if _, nested := nv.(map[string]any); !nested {
					if _, list := nv.([]any); !list {
						flat[nk] = nv
					}
				}
			}
			if len(flat) > 0 {
				ctx[k] = flat
			}
		case []any:
		default:
			ctx[k] = v
		}
	}
	if len(ctx) > 0 {
		r["context"] = ctx
	}
	return r
}

// tool runs the command's tool; toolErr is set when NoETL's worker would post
// call.error.
func (w *pyWorker) tool(ctx context.Context, c *claimed) (out any, toolErr string) {
	tc, _ := c.Context["tool_config"].(map[string]any)
	if c.Action == "task_sequence" {
		return w.taskSequence(ctx, c)
	}
	args, _ := c.Context["args"].(map[string]any)
	rc, _ := c.Context["render_context"].(map[string]any)
	out, toolErr = w.runKind(ctx, c.Action, tc, args, rc)
	if m, ok := out.(map[string]any); ok && toolErr == "" {
		if st, _ := m["status"].(string); st == "error" || st == "failed" {
			toolErr = fmt.Sprint(m["error"])
			if toolErr == "<nil>" {
				toolErr = "Tool returned error status"
			}
		}
	}
	return out, toolErr
}

func (w *pyWorker) runKind(ctx context.Context, kind string, cfg, args, rc map[string]any) (any, string) {
	switch kind {
	case "python":
		return w.runPython(ctx, cfg, args, rc)
	case "http":
		return w.runHTTP(ctx, cfg)
	case "noop":
		return map[string]any{"status": "noop"}, ""
	}
	err := fmt.Sprintf("Tool kind '%s' not implemented", kind)
	return map[string]any{"status": "error", "error": err}, err
}

// pythonDriver runs a step's code as NoETL's python tool does: the args are
// the code's globals beside `args` and `context` (the command's render
// context); main() is called when the code defines it (with the args as
// keywords when it takes parameters), else the `result` global is the output;
// a compile error (a top-level return included) or an exception is the error.
// What the code prints goes to stderr.
const pythonDriver = `
import inspect, json, sys
req = json.load(sys.stdin)
out_stream, sys.stdout = sys.stdout, sys.stderr
ns = dict(req["args"]); ns["args"] = req["args"]; ns["context"] = req["context"]
try:
    exec(compile(req["code"], "<string>", "exec"), ns)
    if callable(ns.get("main")):
        if len(inspect.signature(ns["main"]).parameters) == 0:
            value = ns["main"]()
        else:
            try:
                value = ns["main"](**req["args"])
            except TypeError:
                value = ns["main"](req["args"])
    else:
        value = ns.get("result", {"status": "ok"})
    out = {"ok": value}
except BaseException as e:
    out = {"error": str(e)}
out_stream.write(json.dumps(out, default=str))
`

func (w *pyWorker) runPython(ctx context.Context, cfg, args, rc map[string]any) (any, string) {
	if args == nil {
		args, _ = cfg["args"].(map[string]any)
	}
	code, _ := cfg["code"].(string)
	out, err := runScript(ctx, w.python, code, args, rc)
	if err != nil {
		return map[string]any{"status": "error", "error": err.Error()}, err.Error()
	}
	return out, ""
}

// runScript runs code through pythonDriver with args and the render context
// rc; the error is the script's (a compile error or an exception) or the
// interpreter's.
func runScript(ctx context.Context, python, code string, args, rc map[string]any) (any, error) {
	if args == nil {
		args = map[string]any{}
	}
	if rc == nil {
		rc = map[string]any{}
	}
	in, _ := json.Marshal(map[string]any{"code": code, "args": args, "context": rc})
	cmd := exec.CommandContext(ctx, python, "-c", pythonDriver)
	cmd.Stdin = bytes.NewReader(in)
	raw, err := cmd.Output()
	if err != nil {
		return nil, err
	}
	var res struct {
		OK    any    `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, err
	}
	if res.Error != "" {
		return nil, errors.New(res.Error)
	}
	return jsonx.Normalize(res.OK), nil
}

func (w *pyWorker) runHTTP(ctx context.Context, cfg map[string]any) (any, string) {
	method, _ := cfg["method"].(string)
	if method == "" {
		method = "GET"
	}
	target, _ := cfg["url"].(string)
	u, err := url.Parse(target)
	if err != nil {
		return map[string]any{"status": "error", "error": err.Error()}, err.Error()
	}
	if params, ok := cfg["params"].(map[string]any); ok {
		q := u.Query()
		for k, v := range params {
			q.Set(k, fmt.Sprint(v))
		}
		u.RawQuery = q.Encode()
	}
	start := time.Now()
	req, _ := http.NewRequestWithContext(ctx, strings.ToUpper(method), u.String(), nil)
	resp, err := w.hc.Do(req)
	if err != nil {
		return map[string]any{"status": "error", "error": err.Error()}, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var data any = string(body)
	if v, err := jsonx.Decode(body); err == nil {
		data = v
	}
	headers := map[string]any{}
	for k := range resp.Header {
		headers[strings.ToLower(k)] = resp.Header.Get(k)
	}
	return map[string]any{"status_code": int64(resp.StatusCode), "headers": headers, "url": u.String(),
		"elapsed": time.Since(start).Seconds(), "data": data}, ""
}

// taskSequence runs NoETL's task_sequence command: context.tool_config is
// {tasks: [{name, kind, …}], remaining_actions}; the answer is the executor's
// {status: ok|failed, _prev, results: {name: output}, ctx, metrics: {tasks}}.
func (w *pyWorker) taskSequence(ctx context.Context, c *claimed) (any, string) {
	tc, ok := c.Context["tool_config"].(map[string]any)
	if !ok {
		err := fmt.Sprintf("Expected object for tool_config but got %T", c.Context["tool_config"])
		return map[string]any{"status": "failed", "error": map[string]any{"message": err}}, err
	}
	if _, ok := tc["tasks"].([]any); !ok {
		err := "task_sequence without tasks"
		return map[string]any{"status": "failed", "error": map[string]any{"message": err}}, err
	}
	results := map[string]any{}
	var runs []any
	var prev any
	env := pipeline.Run(ctx, c.Context, pipeline.Options{Exec: func(ctx context.Context, it pipeline.Item) toolresult.Envelope {
		cfg := it.Config
		rc, _ := c.Context["render_context"].(map[string]any)
		out, errText := w.runKind(ctx, it.Kind, cfg, it.Input, rc)
		runs = append(runs, map[string]any{"name": it.Label, "kind": it.Kind})
		if errText != "" {
			return toolresult.Envelope{Status: toolresult.StatusError, Data: out, Error: &toolresult.ErrorInfo{Message: errText, Kind: toolresult.KindTool}}
		}
		results[it.Label], prev = out, out
		return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: out}
	}})
	seq := map[string]any{"status": "ok", "_prev": prev, "results": results, "metrics": map[string]any{"task_count": int64(len(runs)), "tasks": runs}}
	if d, ok := env.Data.(map[string]any); ok {
		if u, ok := d["_context_updates"].(map[string]any); ok {
			seq["ctx"] = u
		}
	}
	if env.Status != toolresult.StatusSuccess {
		msg := "task sequence failed"
		if env.Error != nil {
			msg = env.Error.Message
		}
		seq["status"], seq["error"] = "failed", map[string]any{"message": msg}
		return seq, msg
	}
	return seq, ""
}

// batch posts events to /api/events/batch under one Idempotency-Key, three
// tries, as the worker's _emit_batch_events does.
func (w *pyWorker) batch(ctx context.Context, executionID int64, events []map[string]any) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	key := fmt.Sprintf("%s:%d:%s", w.id, executionID, hex.EncodeToString(b))
	body := map[string]any{"execution_id": fmt.Sprint(executionID), "worker_id": w.id, "events": events}
	for range 3 {
		if status, _ := w.post(ctx, "/api/events/batch", body, key); status/100 == 2 || ctx.Err() != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// post sends body as JSON and records the answer's status for event routes.
func (w *pyWorker) post(ctx context.Context, path string, body any, key string) (int, []byte) {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.server+path, bytes.NewReader(raw))
	if err != nil {
		return 0, nil
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(path, "/api/events") {
		var names []string
		var command string
		name := func(e map[string]any) {
			names = append(names, fmt.Sprint(e["name"]))
			if p, ok := e["payload"].(map[string]any); ok && command == "" && p["command_id"] != nil {
				command = fmt.Sprint(p["command_id"])
			}
		}
		if m, ok := body.(map[string]any); ok {
			if evs, ok := m["events"].([]map[string]any); ok {
				for _, e := range evs {
					name(e)
				}
			} else {
				name(m)
			}
		}
		w.mu.Lock()
		w.posts = append(w.posts, posted{path: path, names: names, command: command, status: resp.StatusCode})
		w.mu.Unlock()
	}
	return resp.StatusCode, out
}

// refused lists the event requests answered outside 2xx.
func (w *pyWorker) refused() []posted {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []posted
	for _, p := range w.posts {
		if p.status/100 != 2 {
			out = append(out, p)
		}
	}
	return out
}

// claimAnswers returns each command's claim statuses.
func (w *pyWorker) claimAnswers() map[string][]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]int{}
	for k, v := range w.claims {
		out[k] = append([]int(nil), v...)
	}
	return out
}
