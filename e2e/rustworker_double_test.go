package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/commandbus/bustest"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// rustWorker is a Go double of NoETL's Rust worker (github noetl/worker),
// written from its source: release 5.91.1, the last that takes commands from
// NATS (src/nats/), and 5.120.0 for everything after the claim, which is the
// same in both (../shared/conformance/noetl-worker/RUST-CONTRACT.md cites
// file:line for each fact). What it sends, and when, is the real worker's:
//
//   - commands from NoETL's command bus when it has a claim address
//     (5.91.2 and later: NOETL_COMMAND_BUS=ehdb,
//     NOETL_COMMAND_BUS_CLAIM_ADDR): {"Next": {member, filter
//     commands.<pool>.>}} on one connection to the claim coordinator, the
//     record's payload being the notification, {"Ack"|"Nack": {sort_key}}
//     on another, a failed call retried every 250 ms
//     (shared/commandbus/bustest's Claimer); else from NATS, as 5.91.1:
//
//   - at start: stream NOETL_COMMANDS looked up by name (created with
//     [noetl.commands, noetl.commands.>] when absent); durable pull consumer
//     noetl_worker_pool looked up by name, else created with only its filter
//     (NOETL_FEED_FILTER_SUBJECT, e.g. noetl.commands.shared.>) and the
//     client's defaults (deliver all, explicit ack); then POST
//     /api/worker/pool/register {name: <worker id>, component_type:
//     worker_pool, runtime: {kind: rust, worker_public_key}, status: ready,
//     hostname, labels: {pool_name}}, a non-2xx stopping it; then POST
//     /api/worker/pool/heartbeat {name} every heartbeat interval, its only
//     liveness signal (no per-command heartbeat exists);
//
//   - per notification ({execution_id, event_id, command_id (string or
//     number), step, server_url, execution_pool?}, one per pull of up to
//     2 s, or per bus record): a pool other than its filter's segment is
//     acked and skipped; else POST <server_url>/api/commands/{event_id}/claim {worker_id};
//     200/201 acks and runs the command (up to WORKER_MAX_CONCURRENT at
//     once), 409 acks, anything else naks;
//
//   - per command, every call at the notification's server_url: POST
//     /api/events with the ExecutorEvent envelope {execution_id, event_type,
//     step, status, created_at, context, event_id, worker_id, meta:
//     {attempts}} (command_id inside context, never at the top), each retried
//     three times (0.5, 1, 2 s): command.started; then for a string auth: or
//     credential: GET /api/credentials/{alias}?include_data=true&
//     execution_id=N, applied by type (404 or another terminal answer:
//     call.error + command.failed); the tool; call.done {command_id,
//     call_index: 0, result: {status, context: ToolResult}} whatever the
//     tool's status, then command.completed with that status in lower case;
//     a result over 100 KiB is first PUT /api/result/{execution_id} {name,
//     data, scope: execution, source_step} and call.done carries {status,
//     context: {data: {_ref}}, reference: {kind: result_ref, ref, store,
//     scope, meta, expires_at, extracted, uri}};
//
//   - POST /api/worker/pool/deregister {name, component_type} when it stops;
//     Authorization: Bearer $NOETL_INTERNAL_API_TOKEN on every request when
//     that is set.
//
// Its tools (python, http, noop) answer noetl-tools' ToolResult {status:
// success|error, data, error, stdout, stderr, duration_ms}: the wire, not
// NoETL's tool implementations, is what it doubles.
type rustWorker struct {
	server    string // NOETL_SERVER_URL: the pool calls; commands go to their server_url
	nc        *nats.Conn
	claimAddr string // NOETL_COMMAND_BUS_CLAIM_ADDR: set, commands come from the bus (5.91.2+)
	id        string // WORKER_ID
	pool      string // WORKER_POOL_NAME
	filter    string // NOETL_FEED_FILTER_SUBJECT
	token     string // NOETL_INTERNAL_API_TOKEN
	heartbeat time.Duration
	slots     int // WORKER_MAX_CONCURRENT
	python    string
	hc        *http.Client
	eventSeq  atomic.Int64

	mu     sync.Mutex
	calls  []rustCall
	ready  chan struct{} // closed once registered and pulling
	sealed string        // its per-process public key, as it registers it
}

// rustCall is one HTTP request the double made: method, path (no query), the
// event type for /api/events, and the answer's status (0: no answer).
type rustCall struct {
	method, path, event string
	status              int
}

const (
	rustInlineBudget = 100 << 10 // NOETL_EVENT_RESULT_CONTEXT_MAX_BYTES' default
	rustFetchWait    = 2 * time.Second
)

func newRustWorker(server string, nc *nats.Conn, token string) *rustWorker {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return &rustWorker{server: strings.TrimRight(server, "/"), nc: nc, id: "rust-" + hex.EncodeToString(b[:4]), pool: "worker-rust-pool",
		filter: noetlSubject + ".shared.>", token: token, heartbeat: 15 * time.Second, slots: 4, python: "python3",
		hc: &http.Client{Timeout: 30 * time.Second}, ready: make(chan struct{}), sealed: hex.EncodeToString(b)}
}

// segment is the pool its filter names: the segment after "commands".
func (w *rustWorker) segment() string {
	parts := strings.Split(w.filter, ".")
	for i, p := range parts {
		if p == "commands" && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}

// rustMsg is one notification as a command source hands it over: a NATS
// message (5.91.1) or a bus record (5.91.2 and later).
type rustMsg interface {
	Data() []byte
	Ack() error
	Nak() error
}

// run subscribes, registers and serves commands until ctx ends.
func (w *rustWorker) run(ctx context.Context) error {
	next, retry, closeSource, err := w.source(ctx)
	if err != nil {
		return err
	}
	defer closeSource()
	if status, _ := w.call(ctx, http.MethodPost, w.server, "/api/worker/pool/register", "", map[string]any{"name": w.id, "component_type": "worker_pool",
		"runtime": map[string]any{"kind": "rust", "worker_public_key": w.sealed}, "status": "ready", "hostname": "rust-double",
		"labels": map[string]any{"pool_name": w.pool}}); status/100 != 2 {
		return fmt.Errorf("register: HTTP %d (the worker stops)", status)
	}
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		every(ctx, w.heartbeat, func() {
			w.call(ctx, http.MethodPost, w.server, "/api/worker/pool/heartbeat", "", map[string]any{"name": w.id})
		})
	}()
	defer func() {
		bg.Wait()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		w.call(dctx, http.MethodPost, w.server, "/api/worker/pool/deregister", "", map[string]any{"name": w.id, "component_type": "worker_pool"})
	}()
	close(w.ready)
	slots := make(chan struct{}, w.slots)
	for ctx.Err() == nil {
		msgs, err := next(ctx)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(retry):
			}
			continue
		}
		for _, m := range msgs {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				_ = m.Nak()
				continue
			}
			bg.Add(1)
			go func() {
				defer func() { <-slots; bg.Done() }()
				w.handle(ctx, m)
			}()
		}
	}
	return nil
}

// source is where commands come from: with a claim address (5.91.2 and
// later, NOETL_COMMAND_BUS=ehdb) the bus's claim coordinator, Next on one
// connection and acks on another, a failed call retried every 250 ms;
// without (5.91.1) the NATS stream and durable consumer, one message per
// pull of up to 2 s.
func (w *rustWorker) source(ctx context.Context) (next func(context.Context) ([]rustMsg, error), retry time.Duration, closeFn func(), err error) {
	if w.claimAddr != "" {
		h := fnv.New32a()
		h.Write([]byte(w.id))
		c := bustest.NewClaimer(w.claimAddr, h.Sum32()|1, "commands."+w.segment()+".>")
		next = func(ctx context.Context) ([]rustMsg, error) {
			a, err := c.Next(ctx)
			if err != nil {
				return nil, err
			}
			return []rustMsg{busRecord{ctx: ctx, c: c, a: a}}, nil
		}
		return next, 250 * time.Millisecond, c.Close, nil
	}
	js, err := jetstream.New(w.nc)
	if err != nil {
		return nil, 0, nil, err
	}
	if _, err := js.Stream(ctx, noetlStream); errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: noetlStream, Subjects: []string{noetlSubject, noetlSubject + ".>"}})
		if err != nil {
			return nil, 0, nil, fmt.Errorf("create stream %s: %w", noetlStream, err)
		}
	} else if err != nil {
		return nil, 0, nil, fmt.Errorf("stream %s: %w", noetlStream, err)
	}
	cons, err := js.Consumer(ctx, noetlStream, noetlConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = js.CreateConsumer(ctx, noetlStream, jetstream.ConsumerConfig{Durable: noetlConsumer, FilterSubject: w.filter, AckPolicy: jetstream.AckExplicitPolicy})
	}
	if err != nil {
		return nil, 0, nil, fmt.Errorf("consumer %s: %w", noetlConsumer, err)
	}
	next = func(context.Context) ([]rustMsg, error) {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(rustFetchWait))
		if err != nil {
			return nil, err
		}
		var out []rustMsg
		for m := range batch.Messages() {
			out = append(out, m)
		}
		return out, nil
	}
	return next, 100 * time.Millisecond, func() {}, nil
}

// busRecord is a record the claim coordinator handed out: its payload is
// the notification; ack and nack go by its sort key.
type busRecord struct {
	ctx context.Context
	c   *bustest.Claimer
	a   bustest.ClaimAnswer
}

func (r busRecord) Data() []byte { return []byte(r.a.Record.Payload) }
func (r busRecord) Ack() error   { return r.c.Ack(context.WithoutCancel(r.ctx), r.a.SortKey) }
func (r busRecord) Nak() error   { return r.c.Nack(context.WithoutCancel(r.ctx), r.a.SortKey) }

// rustNotification is the notification as the worker decodes it.
type rustNotification struct {
	ExecutionID   int64          `json:"execution_id"`
	EventID       int64          `json:"event_id"`
	CommandID     flexibleString `json:"command_id"`
	Step          string         `json:"step"`
	ServerURL     string         `json:"server_url"`
	ExecutionPool string         `json:"execution_pool"`
}

// flexibleString reads a JSON string or number as its text.
type flexibleString string

func (f *flexibleString) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*f = flexibleString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a string or a number: %s", b)
	}
	*f = flexibleString(n.String())
	return nil
}

// rustCommand is the claim answer as the worker decodes it: execution_id an
// integer, node_id, node_name and action required.
type rustCommand struct {
	ExecutionID *int64         `json:"execution_id"`
	NodeID      *string        `json:"node_id"`
	NodeName    *string        `json:"node_name"`
	Action      *string        `json:"action"`
	Context     map[string]any `json:"context"`
	Meta        map[string]any `json:"meta"`
}

func (w *rustWorker) handle(ctx context.Context, m rustMsg) {
	var n rustNotification
	if err := json.Unmarshal(m.Data(), &n); err != nil {
		_ = m.Nak()
		return
	}
	if n.ExecutionPool != "" && n.ExecutionPool != w.segment() {
		_ = m.Ack()
		return
	}
	status, raw := w.call(ctx, http.MethodPost, n.ServerURL, fmt.Sprintf("/api/commands/%d/claim", n.EventID), "", map[string]any{"worker_id": w.id})
	switch {
	case status == http.StatusOK || status == http.StatusCreated:
		var c rustCommand
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		if err := d.Decode(&c); err != nil || c.ExecutionID == nil || c.NodeID == nil || c.NodeName == nil || c.Action == nil {
			return // neither acked nor run: redelivered after the ack wait
		}
		c.Context, _ = jsonx.Normalize(c.Context).(map[string]any)
		c.Meta, _ = jsonx.Normalize(c.Meta).(map[string]any)
		_ = m.Ack()
		w.execute(ctx, n.ServerURL, &c)
	case status == http.StatusConflict:
		_ = m.Ack()
	default:
		_ = m.Nak()
	}
}

// execute runs one claimed command and posts its events.
func (w *rustWorker) execute(ctx context.Context, server string, c *rustCommand) {
	eid, step := *c.ExecutionID, *c.NodeName
	commandID := fmt.Sprintf("%d:%s:unknown", eid, step)
	if v, ok := c.Meta["command_id"]; ok && v != nil {
		commandID = fmt.Sprint(v)
	}
	attempts, _ := c.Meta["attempts"].(int64)
	emit := func(typ, status string, body map[string]any) {
		w.event(ctx, server, map[string]any{"execution_id": eid, "event_type": typ, "step": step, "status": status,
			"created_at": time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), "context": body,
			"event_id": w.eventID(), "worker_id": w.id, "meta": map[string]any{"attempts": attempts}})
	}
	fail := func(msg string) {
		emit("call.error", "FAILED", map[string]any{"command_id": commandID, "call_index": 0, "error": msg})
		emit("command.failed", "FAILED", map[string]any{"command_id": commandID, "error": msg})
	}
	cfg := map[string]any{}
	if tc, ok := c.Context["tool_config"].(map[string]any); ok {
		for k, v := range tc {
			cfg[k] = v
		}
	}
	if _, ok := cfg["kind"]; !ok {
		cfg["kind"] = *c.Action
	}
	if args, ok := c.Context["args"]; ok && cfg["args"] == nil && cfg["kind"] != "container" {
		cfg["args"] = args
	}
	emit("command.started", "STARTED", map[string]any{"command_id": commandID})
	secrets, err := w.resolveAlias(ctx, server, eid, cfg)
	if errors.Is(err, errTransient) {
		return // no events: the lease runs out and the command is retried
	}
	if err != nil {
		fail(err.Error())
		return
	}
	rc, _ := c.Context["render_context"].(map[string]any)
	res, err := w.tool(ctx, cfg, secrets, rc)
	if err != nil {
		fail(err.Error())
		return
	}
	emit("call.done", "COMPLETED", map[string]any{"command_id": commandID, "call_index": 0, "result": w.callDoneResult(ctx, server, eid, step, res)})
	status, _ := res["status"].(string)
	emit("command.completed", status, map[string]any{"command_id": commandID, "status": status})
}

// eventID is a snowflake-like id: milliseconds, then a sequence.
func (w *rustWorker) eventID() int64 {
	return time.Now().UnixMilli()<<22 | w.eventSeq.Add(1)&(1<<22-1)
}

var errTransient = errors.New("transient keychain answer")

// resolveAlias fetches a string auth: (else credential:) alias from the
// keychain and applies it to cfg by its type; the secrets it returns (alias
// → token) are what the tool's auth: {type, credential} names.
func (w *rustWorker) resolveAlias(ctx context.Context, server string, eid int64, cfg map[string]any) (map[string]string, error) {
	alias, ok := cfg["auth"].(string)
	if !ok {
		if alias, ok = cfg["credential"].(string); !ok {
			return nil, nil
		}
	}
	q := url.Values{"include_data": {"true"}, "execution_id": {strconv.FormatInt(eid, 10)}}
	status, raw := w.call(ctx, http.MethodGet, server, "/api/credentials/"+url.PathEscape(alias), q.Encode(), nil)
	switch {
	case status == http.StatusNotFound:
		return nil, fmt.Errorf("credential alias '%s' not found in the keychain", alias)
	case status == 0 || status == 408 || status == 429 || status == 502 || status == 503 || status == 504:
		return nil, errTransient
	case status/100 != 2:
		return nil, fmt.Errorf("credential '%s': HTTP %d: %s", alias, status, raw)
	}
	var cred struct {
		ID   *string        `json:"id"`
		Name *string        `json:"name"`
		Type *string        `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(raw, &cred); err != nil || cred.ID == nil || cred.Name == nil || cred.Type == nil {
		return nil, fmt.Errorf("credential '%s': undecodable answer: %s", alias, raw)
	}
	delete(cfg, "auth")
	delete(cfg, "credential")
	str := func(keys ...string) string {
		for _, k := range keys {
			if s, ok := cred.Data[k].(string); ok {
				return s
			}
		}
		return ""
	}
	setDefault := func(k string, v any) {
		if _, set := cfg[k]; !set && v != nil && v != "" {
			cfg[k] = v
		}
	}
	switch strings.ToLower(*cred.Type) {
	case "postgres":
		for _, f := range [][2]string{{"host", "db_host"}, {"port", "db_port"}, {"user", "db_user"}, {"password", "db_password"}, {"database", "db_name"}} {
			v := cred.Data[f[1]]
			if v == nil {
				v = cred.Data[f[0]]
			}
			setDefault(f[0], v)
		}
		return nil, nil
	case "bearer", "bearer_token":
		cfg["auth"] = map[string]any{"type": "bearer", "credential": alias}
		return map[string]string{alias: str("token", "access_token", "bearer_token")}, nil
	case "api_key":
		header := str("header")
		if header == "" {
			header = "X-API-Key"
		}
		cfg["auth"] = map[string]any{"type": "api_key", "credential": alias, "header": header}
		return map[string]string{alias: str("api_key", "key", "token")}, nil
	case "basic":
		cfg["auth"] = map[string]any{"type": "basic", "credential": alias, "username": str("username", "user", "db_user")}
		return map[string]string{alias: str("password", "db_password")}, nil
	}
	return nil, fmt.Errorf("credential '%s': unsupported type '%s'", alias, *cred.Type)
}

// tool runs cfg's kind and answers a ToolResult; an error is a tool that
// raised (call.error), not one that reports its own failure.
func (w *rustWorker) tool(ctx context.Context, cfg map[string]any, secrets map[string]string, rc map[string]any) (map[string]any, error) {
	start := time.Now()
	var res map[string]any
	switch kind, _ := cfg["kind"].(string); kind {
	case "python":
		code, _ := cfg["code"].(string)
		args, _ := cfg["input"].(map[string]any)
		if args == nil {
			args, _ = cfg["args"].(map[string]any)
		}
		out, err := runScript(ctx, w.python, code, args, rc)
		if err != nil {
			res = map[string]any{"status": "error", "error": err.Error(), "stderr": err.Error(), "exit_code": int64(1)}
		} else {
			res = map[string]any{"status": "success", "data": out, "exit_code": int64(0)}
		}
	case "http":
		var err error
		if res, err = w.httpTool(ctx, cfg, secrets); err != nil {
			return nil, err
		}
	case "noop":
		data := cfg["result"]
		if data == nil {
			data = map[string]any{"status": "ok", "message": "noop"}
		}
		res = map[string]any{"status": "success", "data": data}
	default:
		return nil, fmt.Errorf("unsupported tool kind '%s'", kind)
	}
	res["duration_ms"] = time.Since(start).Milliseconds()
	return res, nil
}

// httpTool is noetl-tools' http: url, method, headers, params, json or
// body; auth {type, credential} from the keychain. Its data is
// {status_code, headers, data, body} with the parsed body; outside 2xx it
// reports status error.
func (w *rustWorker) httpTool(ctx context.Context, cfg map[string]any, secrets map[string]string) (map[string]any, error) {
	method, _ := cfg["method"].(string)
	if method == "" {
		method = http.MethodGet
	}
	target, _ := cfg["url"].(string)
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("invalid url %q: %w", target, err)
	}
	if params, ok := cfg["params"].(map[string]any); ok {
		q := u.Query()
		for k, v := range params {
			q.Set(k, fmt.Sprint(v))
		}
		u.RawQuery = q.Encode()
	}
	var body io.Reader
	payload, ok := cfg["json"]
	if !ok {
		payload, ok = cfg["body"]
	}
	if ok {
		if s, isText := payload.(string); isText {
			body = strings.NewReader(s)
		} else {
			body = bytes.NewReader(jsonx.MustMarshal(payload))
		}
	}
	req, err := http.NewRequestWithContext(ctx, strings.ToUpper(method), u.String(), body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h, ok := cfg["headers"].(map[string]any); ok {
		for k, v := range h {
			req.Header.Set(k, fmt.Sprint(v))
		}
	}
	if a, ok := cfg["auth"].(map[string]any); ok {
		secret := secrets[fmt.Sprint(a["credential"])]
		switch a["type"] {
		case "bearer":
			req.Header.Set("Authorization", "Bearer "+secret)
		case "api_key":
			req.Header.Set(fmt.Sprint(a["header"]), secret)
		case "basic":
			req.SetBasicAuth(fmt.Sprint(a["username"]), secret)
		}
	}
	resp, err := w.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("http request failed: %w", err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	var parsed any = string(text)
	if v, err := jsonx.Decode(text); err == nil {
		parsed = v
	}
	headers := map[string]any{}
	for k := range resp.Header {
		headers[strings.ToLower(k)] = resp.Header.Get(k)
	}
	res := map[string]any{"status": "success", "data": map[string]any{"status_code": int64(resp.StatusCode), "headers": headers, "data": parsed, "body": parsed},
		"stdout": string(text)}
	if resp.StatusCode/100 != 2 {
		res["status"], res["error"] = "error", fmt.Sprintf("HTTP %d", resp.StatusCode)
	}
	return res, nil
}

// callDoneResult is call.done's result: the ToolResult inline, or over the
// inline budget staged with PUT /api/result and carried by reference.
func (w *rustWorker) callDoneResult(ctx context.Context, server string, eid int64, step string, res map[string]any) map[string]any {
	status := res["status"]
	serialised := jsonx.MustMarshal(res)
	if len(serialised) <= rustInlineBudget {
		return map[string]any{"status": status, "context": res}
	}
	code, raw := w.call(ctx, http.MethodPut, server, fmt.Sprintf("/api/result/%d", eid), "",
		map[string]any{"name": step, "data": res, "scope": "execution", "source_step": step})
	var put struct {
		Ref       string  `json:"ref"`
		Store     string  `json:"store"`
		Scope     string  `json:"scope"`
		ExpiresAt *string `json:"expires_at"`
		Bytes     int64   `json:"bytes"`
		SHA256    *string `json:"sha256"`
	}
	if code/100 != 2 || json.Unmarshal(raw, &put) != nil || put.Ref == "" || put.Store == "" || put.Scope == "" {
		// The real worker falls back to its shared memory here; the double
		// has none: {status} alone is its both-failed answer.
		return map[string]any{"status": status}
	}
	ref := map[string]any{"kind": "result_ref", "ref": put.Ref, "store": put.Store, "scope": put.Scope,
		"meta":      map[string]any{"bytes": put.Bytes, "sha256": put.SHA256, "media_type": "application/json", "content_type": "application/json"},
		"extracted": extracted(res, 0),
		"uri":       fmt.Sprintf("noetl://default/default/results/%d/%s/0/0/1", eid, step)}
	if put.ExpiresAt != nil {
		ref["expires_at"] = *put.ExpiresAt
	}
	return map[string]any{"status": status, "context": map[string]any{"data": map[string]any{"_ref": put.Ref}}, "reference": ref}
}

// extracted is the bounded summary a reference carries: every key, the
// first element of each array, strings cut at 512 bytes, nothing below
// depth 8.
func extracted(v any, depth int) any {
	if depth > 8 {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = extracted(e, depth+1)
		}
		return out
	case []any:
		if len(x) == 0 {
			return []any{}
		}
		return []any{extracted(x[0], depth+1)}
	case string:
		if len(x) > 512 {
			return x[:512]
		}
	}
	return v
}

// event posts one ExecutorEvent: three retries (0.5, 1, 2 s) after a
// failure, then it gives up.
func (w *rustWorker) event(ctx context.Context, server string, e map[string]any) {
	for i, wait := range []time.Duration{0, 500 * time.Millisecond, time.Second, 2 * time.Second} {
		if i > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		if status, _ := w.call(ctx, http.MethodPost, server, "/api/events", "", e); status/100 == 2 {
			return
		}
	}
}

// call makes one request with the worker's auth header and records it.
func (w *rustWorker) call(ctx context.Context, method, server, path, query string, body any) (int, []byte) {
	target := strings.TrimRight(server, "/") + path
	if query != "" {
		target += "?" + query
	}
	var rdr io.Reader
	if body != nil {
		rdr = bytes.NewReader(jsonx.MustMarshal(body))
	}
	status, out := 0, []byte(nil)
	if req, err := http.NewRequestWithContext(ctx, method, target, rdr); err == nil {
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if w.token != "" {
			req.Header.Set("Authorization", "Bearer "+w.token)
		}
		if resp, err := w.hc.Do(req); err == nil {
			out, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			status = resp.StatusCode
		}
	}
	if ctx.Err() != nil && status == 0 {
		return 0, nil // stopping
	}
	typ := ""
	if path == "/api/events" {
		typ, _ = body.(map[string]any)["event_type"].(string)
	}
	w.mu.Lock()
	w.calls = append(w.calls, rustCall{method: method, path: path, event: typ, status: status})
	w.mu.Unlock()
	return status, out
}

// made returns the requests made so far.
func (w *rustWorker) made() []rustCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.calls)
}
