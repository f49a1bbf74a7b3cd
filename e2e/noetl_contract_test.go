package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/store"
)

// The NoETL-client contract test (issue 12): a client that speaks exactly as
// NoETL's worker, CLI and system playbooks do — plain JSON with integer ids,
// NoETL's field names, its internal token variable — against a real running
// stack, one subtest per route, asserting NoETL's answers. docs/noetl-compat.md
// is the table this test keeps honest.

const (
	contractAPIToken      = "contract-api-token"
	contractWorkerToken   = "contract-worker-token"
	contractInternalToken = "contract-internal-token"
	contractPool          = "contract-noetl"
)

// contractYAML: start → a loop over two items → end, every step noop.
const contractYAML = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: contract, path: contract/NoETL_Client}
workload: {greeting: hi}
workflow:
  - step: start
    tool: {kind: noop, result: {n: 1}}
    next: items
  - step: items
    loop: {in: "{{ [1, 2] }}", iterator: num}
    tool: {kind: noop, result: {item: "{{ num }}"}}
    next: end
  - step: end
    tool: {kind: noop}
`

// noetlClient sends requests as NoETL's Python/Rust clients do and decodes
// answers keeping numbers as json.Number, so a test can tell 5 from "5".
type noetlClient struct {
	t    *testing.T
	base string
}

type answer struct {
	status int
	header http.Header
	body   any
	raw    []byte
}

func (a answer) obj() map[string]any { m, _ := a.body.(map[string]any); return m }

func (c noetlClient) call(method, path, token string, body any) answer {
	c.t.Helper()
	var rdr io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rdr = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rdr)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&a.body); err != nil {
			c.t.Fatalf("%s %s: the answer is not JSON: %v: %s", method, path, err, raw)
		}
	}
	return a
}

// must calls and fails the test unless the status is want.
func (c noetlClient) must(want int, method, path, token string, body any) answer {
	c.t.Helper()
	a := c.call(method, path, token, body)
	if a.status != want {
		c.t.Fatalf("%s %s: HTTP %d, want %d: %s", method, path, a.status, want, a.raw)
	}
	return a
}

// isInt reports whether v is a JSON integer (not a string, not a float).
func isInt(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return false
	}
	_, err := n.Int64()
	return err == nil
}

// idOf reads an id a NoETL client would: a JSON integer or a numeric string.
func idOf(t *testing.T, v any) int64 {
	t.Helper()
	s := fmt.Sprint(v)
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		t.Fatalf("id %v (%T) is not a positive integer", v, v)
	}
	return id
}

func startContractStack(t *testing.T) *devserver.Server {
	t.Helper()
	env := map[string]string{
		"NOETL_API_TOKEN": contractAPIToken, "NOETL_WORKER_TOKEN": contractWorkerToken,
		// NoETL's variable for the internal token (its system playbooks set it).
		"NOETL_INTERNAL_API_TOKEN": contractInternalToken, "NOETL_INTERNAL_TOKEN": "",
		"NOETL_API_TOKENS_SECRET_ARN": "", "NOETL_LOG_LEVEL": "warn",
	}
	srv, err := devserver.Start(context.Background(), devserver.Options{Shards: 1,
		Getenv: func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			if k == "NOETL_DATABASE_URL" || k == "NOETL_SHARD_URLS" || k == "NOETL_NATS_URL" || k == "NOETL_SERVER_URL" {
				return ""
			}
			return ""
		}})
	if err != nil {
		t.Fatalf("start the contract stack: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return srv
}

// TestNoETLClientContract: NoETL's clients and workers work unchanged, route
// by route. The stack has its own databases and no scheduled drain, so the
// outbox subtests see exactly the rows they make.
func TestNoETLClientContract(t *testing.T) {
	t.Parallel()
	srv := startContractStack(t)
	c := noetlClient{t: t, base: srv.URL}
	ctx := context.Background()
	cons, err := notify.EnsureConsumer(ctx, srv.JS, contractPool)
	if err != nil {
		t.Fatal(err)
	}

	var path string
	t.Run("POST /api/catalog/register", func(t *testing.T) {
		c.t = t
		a := c.must(200, "POST", "/api/catalog/register", contractAPIToken,
			map[string]any{"content": contractYAML, "resource_type": "Playbook"})
		m := a.obj()
		if m["status"] != "success" || m["path"] != "contract/NoETL_Client" || !isInt(m["version"]) {
			t.Fatalf("register: %s", a.raw)
		}
		idOf(t, m["catalog_id"])
		path = m["path"].(string)
	})
	if path == "" {
		t.FailNow()
	}

	var execID int64
	t.Run("POST /api/execute", func(t *testing.T) {
		c.t = t
		a := c.must(200, "POST", "/api/execute", contractAPIToken,
			map[string]any{"path": path, "workload": map[string]any{"greeting": "hello"}, "execution_pool": contractPool})
		m := a.obj()
		// NoETL answers the id as a string; its clients read it so (R-I2).
		if s, ok := m["execution_id"].(string); !ok || m["status"] != "started" {
			t.Fatalf("execute: %s", a.raw)
		} else {
			execID = idOf(t, s)
		}
	})
	if execID == 0 {
		t.FailNow()
	}

	// The worker's loop, as NoETL's worker runs it: NATS body → claim → four
	// events (command.started, call.done, step.exit, command.completed).
	t.Run("NATS body, POST /api/commands/{event_id}/claim, POST /api/events", func(t *testing.T) {
		c.t = t
		deadline := time.Now().Add(60 * time.Second)
		handled := 0
		for time.Now().Before(deadline) {
			st := c.must(200, "GET", fmt.Sprintf("/api/executions/%d/status", execID), contractAPIToken, nil).obj()
			if st["status"] != "RUNNING" {
				break
			}
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(300*time.Millisecond))
			if err != nil {
				continue
			}
			for msg := range batch.Messages() {
				handled++
				contractWorkerStep(t, c, msg.Data())
				if err := msg.Ack(); err != nil {
					t.Fatal(err)
				}
			}
		}
		// start, two iterations, end.
		if handled != 4 {
			t.Fatalf("the NoETL worker ran %d commands, want 4", handled)
		}
	})

	t.Run("GET /api/executions/{id}/status", func(t *testing.T) {
		c.t = t
		m := c.must(200, "GET", fmt.Sprintf("/api/executions/%d/status", execID), contractAPIToken, nil).obj()
		p, _ := m["progress"].(map[string]any)
		if m["status"] != "COMPLETED" || m["is_cancelled"] != false || p == nil || !isInt(p["total_steps"]) ||
			!isInt(p["completed_steps"]) || !isInt(p["running_steps"]) || !isInt(p["failed_steps"]) {
			t.Fatalf("status: %v", m)
		}
		if idOf(t, m["execution_id"]) != execID {
			t.Fatalf("status of %v", m["execution_id"])
		}
	})

	t.Run("GET /api/executions", func(t *testing.T) {
		c.t = t
		// NoETL's list: a bare array; path a case-insensitive substring.
		a := c.must(200, "GET", "/api/executions?path=noetl_client&limit=10&offset=0", contractAPIToken, nil)
		list, ok := a.body.([]any)
		if !ok || len(list) != 1 {
			t.Fatalf("list: want a bare array of 1, got %s", a.raw)
		}
		e := list[0].(map[string]any)
		for _, k := range []string{"execution_id", "catalog_id", "path", "status", "started_at", "completed_at", "event_count"} {
			if _, ok := e[k]; !ok {
				t.Errorf("summary lacks %s: %v", k, e)
			}
		}
		if idOf(t, e["execution_id"]) != execID || e["status"] != "COMPLETED" || !isInt(e["event_count"]) {
			t.Fatalf("summary: %v", e)
		}
		if n, _ := e["event_count"].(json.Number).Int64(); n < 20 {
			t.Errorf("event_count %d: the run wrote more", n)
		}
		if a.header.Get("X-Noetl-Has-More") != "false" || a.header.Get("X-Noetl-Limit-Applied") != "10" {
			t.Errorf("paging headers: %v", a.header)
		}
		// limit above NoETL's 100 is served capped, and says so.
		a = c.must(200, "GET", "/api/executions?limit=500", contractAPIToken, nil)
		if a.header.Get("X-Noetl-Limit-Capped") != "true" || a.header.Get("X-Noetl-Limit-Applied") != "100" {
			t.Errorf("limit 500: headers %v", a.header)
		}
		// offset past the only row: an empty array, not page 1 again.
		a = c.must(200, "GET", "/api/executions?path=NoETL_Client&offset=1", contractAPIToken, nil)
		if l, ok := a.body.([]any); !ok || len(l) != 0 {
			t.Errorf("offset 1: %s", a.raw)
		}
	})

	t.Run("GET /api/executions/{id}", func(t *testing.T) {
		c.t = t
		m := c.must(200, "GET", fmt.Sprintf("/api/executions/%d", execID), contractAPIToken, nil).obj()
		if m["status"] != "COMPLETED" || m["path"] != path || m["parent_execution_id"] != nil {
			t.Fatalf("detail: %v", m)
		}
		if w, _ := m["workload"].(map[string]any); w["greeting"] != "hello" {
			t.Errorf("workload: %v", m["workload"])
		}
		evs, _ := m["events"].([]any)
		if len(evs) == 0 {
			t.Fatalf("detail has no events page: %v", m)
		}
		// NoETL's paging: newest first, with pagination.
		if pg, _ := m["pagination"].(map[string]any); fmt.Sprint(pg["page"]) != "1" || fmt.Sprint(pg["page_size"]) != "100" ||
			pg["total_events"] != m["event_count"] || pg["has_prev"] != false {
			t.Errorf("pagination %v (event_count %v)", m["pagination"], m["event_count"])
		}
		var types []string
		var workerExit map[string]any
		for _, raw := range evs {
			e := raw.(map[string]any)
			for _, k := range []string{"event_id", "event_type", "node_name", "status", "created_at", "timestamp", "duration", "result", "error"} {
				if _, ok := e[k]; !ok {
					t.Fatalf("event lacks %s: %v", k, e)
				}
			}
			types = append(types, e["event_type"].(string))
			if e["event_type"] == "step.exit" && e["worker_id"] == "noetl-worker-1" {
				workerExit = e
			}
		}
		if types[0] != "playbook.completed" || types[len(types)-1] != "playbook.started" {
			t.Errorf("events, newest first: %v", types)
		}
		// The worker's own step.exit is stored as sent, flagged ignored (the
		// orchestrator's step.exit is the one folded), with its created_at.
		if workerExit == nil || workerExit["ignored"] != true {
			t.Fatalf("the worker's step.exit is not in the log as sent: %v", types)
		}
		if meta, _ := workerExit["meta"].(map[string]any); meta["client_created_at"] != "2026-06-17T16:48:21.379403" {
			t.Errorf("worker created_at not kept: %v", workerExit["meta"])
		}
	})

	t.Run("step.enter loop context", func(t *testing.T) {
		c.t = t
		ctxv, _ := findEvent(t, c, execID, "step.enter", "items")["context"].(map[string]any)
		if ctxv["iterator_var"] != "num" || ctxv["iterator"] != "num" || fmt.Sprint(ctxv["iterations_expected"]) != "2" {
			t.Fatalf("loop step.enter context: %v", ctxv)
		}
	})

	t.Run("GET /api/commands/{event_id}", func(t *testing.T) {
		c.t = t
		issued := findEvent(t, c, execID, "command.issued", "start")
		m := c.must(200, "GET", "/api/commands/"+fmt.Sprint(issued["event_id"]), contractWorkerToken, nil).obj()
		if !isInt(m["event_id"]) || !isInt(m["execution_id"]) || m["node_name"] != "start" || m["action"] != "noop" || m["status"] != "COMPLETED" {
			t.Fatalf("command: %v", m)
		}
	})

	t.Run("GET /api/executions/{id}/cancellation-check", func(t *testing.T) {
		c.t = t
		// NoETL's worker asks with its own token.
		m := c.must(200, "GET", fmt.Sprintf("/api/executions/%d/cancellation-check", execID), contractWorkerToken, nil).obj()
		if m["is_cancelled"] != false || idOf(t, m["execution_id"]) != execID {
			t.Fatalf("cancellation-check: %v", m)
		}
	})

	t.Run("GET /api/replay/state", func(t *testing.T) {
		c.t = t
		m := c.must(200, "GET", fmt.Sprintf("/api/replay/state?execution_id=%d", execID), contractAPIToken, nil).obj()
		ex, _ := m["execution"].(map[string]any)
		if sum, _ := m["checksum"].(map[string]any); sum["value"] == nil || ex["status"] != "COMPLETED" || idOf(t, m["execution_id"]) != execID {
			t.Fatalf("replay: %v", m)
		}
		c.must(400, "GET", fmt.Sprintf("/api/replay/state?execution_id=%d&projection=nope", execID), contractAPIToken, nil)
	})

	t.Run("POST /api/executions/{id}/cancel", func(t *testing.T) {
		c.t = t
		// No worker serves this pool: the run waits at its first command.
		id := idOf(t, c.must(200, "POST", "/api/execute", contractAPIToken,
			map[string]any{"path": path, "execution_pool": "contract-idle"}).obj()["execution_id"])
		m := c.must(200, "POST", fmt.Sprintf("/api/executions/%d/cancel", id), contractAPIToken, map[string]any{"reason": "contract"}).obj()
		if m["message"] != "Cancelled 1 execution(s)" || idOf(t, m["execution_id"]) != id || fmt.Sprint(m["cancelled_executions"]) != fmt.Sprintf("[%d]", id) {
			t.Fatalf("cancel: %v", m)
		}
		chk := c.must(200, "GET", fmt.Sprintf("/api/executions/%d/cancellation-check", id), contractWorkerToken, nil).obj()
		if chk["is_cancelled"] != true {
			t.Fatalf("cancellation-check after cancel: %v", chk)
		}
		st := c.must(200, "GET", fmt.Sprintf("/api/executions/%d/status", id), contractAPIToken, nil).obj()
		if st["status"] != "CANCELLED" || st["is_cancelled"] != true {
			t.Fatalf("status after cancel: %v", st)
		}
		// Its waiting command is over: a NoETL worker's claim is refused.
		cmd := findEvent(t, c, id, "command.issued", "start")
		a := c.call("POST", "/api/commands/"+fmt.Sprint(cmd["event_id"])+"/claim", contractWorkerToken, map[string]any{"worker_id": "noetl-worker-1"})
		if a.status != 409 {
			t.Errorf("claim after cancel: HTTP %d %s", a.status, a.raw)
		}
		c.must(200, "POST", fmt.Sprintf("/api/executions/%d/cancel", id), contractAPIToken, map[string]any{}) // idempotent (R-R10)
		// A finished execution is answered as NoETL answers it (issue 30).
		if m := c.must(200, "POST", fmt.Sprintf("/api/executions/%d/cancel", execID), contractAPIToken, map[string]any{}).obj(); m["status"] != "already_completed" {
			t.Errorf("cancel of a finished execution: %v", m)
		}
	})

	t.Run("POST /api/executions/{id}/finalize", func(t *testing.T) {
		c.t = t
		id := idOf(t, c.must(200, "POST", "/api/execute", contractAPIToken,
			map[string]any{"path": path, "execution_pool": "contract-idle"}).obj()["execution_id"])
		m := c.must(200, "POST", fmt.Sprintf("/api/executions/%d/finalize", id), contractAPIToken,
			map[string]any{"status": "FAILED", "error": "operator stop"}).obj()
		if m["status"] != "FAILED" || m["message"] != "Execution finalized with status: FAILED" {
			t.Fatalf("finalize: %v", m)
		}
		d := c.must(200, "GET", fmt.Sprintf("/api/executions/%d", id), contractAPIToken, nil).obj()
		if d["status"] != "FAILED" {
			t.Fatalf("after finalize: %v", d["status"])
		}
		c.must(422, "POST", fmt.Sprintf("/api/executions/%d/finalize", id), contractAPIToken, map[string]any{"status": "RUNNING"})
	})

	t.Run("/api/internal/outbox", func(t *testing.T) {
		c.t = t
		contractOutbox(t, c, srv, execID)
	})

	t.Run("POST /api/internal/events/project", func(t *testing.T) {
		c.t = t
		// Envelopes as NoETL's projector posts them: integer ids, a zone-less
		// timestamp, extra fields, optional ones missing.
		evs := []any{
			map[string]any{"event_id": 880001, "execution_id": execID, "event_type": "stage.opened", "node_name": "s",
				"status": "OPEN", "timestamp": "2026-06-17T16:48:21.379403", "trace_component": "projector", "prev_event_id": 1},
			map[string]any{"event_id": 880002, "execution_id": execID, "event_type": "command.completed", "status": "COMPLETED"},
			map[string]any{"event_id": 880003, "event_type": "call.done"},                                  // no execution
			map[string]any{"event_id": 880004, "execution_id": 123456789012, "event_type": "stage.closed"}, // unknown execution
		}
		m := c.must(200, "POST", "/api/internal/events/project", contractInternalToken, map[string]any{"events": evs}).obj()
		if fmt.Sprint(m["projected"]) != "2" || fmt.Sprint(m["duplicates"]) != "0" || fmt.Sprint(m["skipped"]) != "2" {
			t.Fatalf("project: %v", m)
		}
		m = c.must(200, "POST", "/api/internal/events/project", contractInternalToken, map[string]any{"events": evs[:2]}).obj()
		if fmt.Sprint(m["projected"]) != "0" || fmt.Sprint(m["duplicates"]) != "2" {
			t.Fatalf("re-project: %v", m)
		}
		// Projected orchestration types are kept but never folded: the
		// snapshot still equals a fresh fold of the log.
		v := c.must(200, "GET", fmt.Sprintf("/api/executions/%d/replay?verify=true", execID), contractAPIToken, nil).obj()
		if vr, _ := v["verify"].(map[string]any); vr["consistent"] != true {
			t.Fatalf("replay verify after projection: %v", v["verify"])
		}
	})

	t.Run("internal token", func(t *testing.T) {
		c.t = t
		// NoETL answers 403 to a missing or wrong internal token.
		for _, tok := range []string{"", "wrong", contractAPIToken} {
			if a := c.call("GET", "/api/internal/outbox/pending-count", tok, nil); a.status != 403 {
				t.Errorf("token %q: HTTP %d %s", tok, a.status, a.raw)
			}
		}
	})
}

// contractWorkerStep is one command run as NoETL's worker runs it.
func contractWorkerStep(t *testing.T, c noetlClient, data []byte) {
	t.Helper()
	var n map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&n); err != nil {
		t.Fatalf("NATS body: %v: %s", err, data)
	}
	// NoETL's notification body: integer ids, command_id, step, server_url.
	if !isInt(n["execution_id"]) || !isInt(n["event_id"]) || n["command_id"] == nil || n["step"] == nil || n["server_url"] == nil {
		t.Fatalf("NATS body: %s", data)
	}
	claim := c.must(200, "POST", "/api/commands/"+n["event_id"].(json.Number).String()+"/claim", contractWorkerToken,
		map[string]any{"worker_id": "noetl-worker-1"}).obj()
	// NoETL's claim answer: status, event_id, execution_id (integers), node_id,
	// node_name, action, context, meta.
	for _, k := range []string{"status", "event_id", "execution_id", "node_id", "node_name", "action", "context", "meta"} {
		if _, ok := claim[k]; !ok {
			t.Fatalf("claim lacks %s: %v", k, claim)
		}
	}
	if !isInt(claim["event_id"]) || !isInt(claim["execution_id"]) || claim["action"] != "noop" {
		t.Fatalf("claim: %v", claim)
	}
	execID, _ := claim["execution_id"].(json.Number).Int64()
	step := claim["node_name"].(string)
	cmdID := n["command_id"].(string)
	// NoETL's worker checks for cancellation before it runs.
	if chk := c.must(200, "GET", fmt.Sprintf("/api/executions/%d/cancellation-check", execID), contractWorkerToken, nil).obj(); chk["is_cancelled"] != false {
		t.Fatalf("cancellation-check: %v", chk)
	}
	cfg, _ := claim["context"].(map[string]any)["tool_config"].(map[string]any)
	data2, ok := cfg["result"]
	if !ok {
		data2 = map[string]any{"status": "ok"}
	}
	post := func(typ, status string, payload map[string]any) {
		t.Helper()
		payload["command_id"] = cmdID
		a := c.must(200, "POST", "/api/events", contractWorkerToken, map[string]any{
			"execution_id": execID, "step": step, "event_type": typ, "status": status, "worker_id": "noetl-worker-1",
			"payload": payload, "meta": map[string]any{"command_id": cmdID, "attempts": claim["attempt"]},
			"created_at": "2026-06-17T16:48:21.379403", "actionable": typ == "command.completed", "informative": typ != "command.completed",
		}).obj()
		if a["status"] != "ok" || a["event_id"] == nil {
			t.Fatalf("%s: %v", typ, a)
		}
	}
	post("command.started", "STARTED", map[string]any{})
	post("call.done", "COMPLETED", map[string]any{"result": map[string]any{"status": "success",
		"context": map[string]any{"status": "success", "data": data2}}})
	post("step.exit", "COMPLETED", map[string]any{"result": map[string]any{"status": "success", "data": data2}})
	post("command.completed", "success", map[string]any{"status": "success"})
}

// findEvent returns the first event of type typ at step, read the way
// NoETL's CLI pages the log.
func findEvent(t *testing.T, c noetlClient, execID int64, typ, step string) map[string]any {
	t.Helper()
	q := url.Values{"event_type": {typ}, "step": {step}}
	m := c.must(200, "GET", fmt.Sprintf("/api/executions/%d/events?%s", execID, q.Encode()), contractAPIToken, nil).obj()
	evs, _ := m["events"].([]any)
	if len(evs) == 0 {
		t.Fatalf("no %s event at %s in execution %d", typ, step, execID)
	}
	return evs[0].(map[string]any)
}

// contractOutbox drives the four outbox routes as NoETL's
// system/outbox_publisher playbook does, on two rows of its own.
func contractOutbox(t *testing.T, c noetlClient, srv *devserver.Server, execID int64) {
	ctx := context.Background()
	sh := srv.Store.Shard(0)
	pool := sh.Pool()
	payload := []byte(fmt.Sprintf(`{"execution_id": %d, "event_id": 1, "command_id": "x", "step": "s", "server_url": "u"}`, execID))
	// Written the way a transaction of the control plane writes its outbox.
	ids, err := store.AllocateIDs(ctx, pool, sh.Index(), 2)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := sh.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	err = tx.Write(&store.Changes{Outbox: []store.OutboxMessage{
		{OutboxID: ids[0], ExecutionID: execID, EventID: 1, Subject: "noetl.commands.contract-outbox." + strconv.FormatInt(execID, 10), MsgID: "contract-1", Payload: payload},
		{OutboxID: ids[1], ExecutionID: execID, EventID: 2, Subject: "noetl.commands.contract-outbox." + strconv.FormatInt(execID, 10), MsgID: "contract-2", Payload: payload},
	}})
	if err == nil {
		err = tx.Commit(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	// The drain leaves rows younger than 5 s to the post-commit publisher (R-A6).
	if _, err := pool.Exec(ctx, `UPDATE outbox SET created_at = now() - interval '1 minute' WHERE outbox_id = ANY($1)`, ids); err != nil {
		t.Fatal(err)
	}
	pending := func() string {
		return fmt.Sprint(c.must(200, "GET", "/api/internal/outbox/pending-count", contractInternalToken, nil).obj()["pending"])
	}
	if p := pending(); p != "2" {
		t.Fatalf("pending-count %s, want 2", p)
	}
	a := c.must(200, "POST", "/api/internal/outbox/claim", contractInternalToken, map[string]any{"limit": 10})
	m := a.obj()
	rows, _ := m["rows"].([]any)
	if len(rows) != 2 || fmt.Sprint(m["claimed"]) != "2" {
		t.Fatalf("claim: %s", a.raw)
	}
	var claimed []any
	for _, r := range rows {
		row := r.(map[string]any)
		if row["payload_codec"] != "json" || fmt.Sprint(row["attempts"]) != "1" || row["subject"] == nil {
			t.Fatalf("claimed row: %v", row)
		}
		if p, _ := row["payload"].(map[string]any); !isInt(p["execution_id"]) {
			t.Fatalf("row payload: %v", row["payload"])
		}
		claimed = append(claimed, row["outbox_id"])
		if !slices.Contains(ids, idOf(t, row["outbox_id"])) {
			t.Fatalf("claimed a row not ours: %v", row)
		}
	}
	if p := pending(); p != "0" {
		t.Fatalf("pending-count %s after the claim, want 0 (in flight)", p)
	}
	// mark-failed with NoETL's fields: the caller's attempts and cap decide.
	mf := c.must(200, "POST", "/api/internal/outbox/mark-failed", contractInternalToken,
		map[string]any{"outbox_id": claimed[0], "error": "nats: timeout", "attempts": 4, "max_delay_seconds": 5}).obj()
	if mf["marked"] != true || fmt.Sprint(mf["available_at_in"]) != "5" {
		t.Fatalf("mark-failed: %v", mf)
	}
	mf = c.must(200, "POST", "/api/internal/outbox/mark-failed", contractInternalToken,
		map[string]any{"outbox_id": claimed[1], "error": "nats: timeout"}).obj()
	if fmt.Sprint(mf["available_at_in"]) != "1" {
		t.Fatalf("mark-failed after one claim: %v", mf)
	}
	c.must(422, "POST", "/api/internal/outbox/mark-failed", contractInternalToken, map[string]any{"outbox_id": claimed[1], "error": ""})
	if p := pending(); p != "0" {
		t.Fatalf("pending-count %s while both back off, want 0", p)
	}
	mp := c.must(200, "POST", "/api/internal/outbox/mark-published", contractInternalToken, map[string]any{"outbox_ids": claimed}).obj()
	if fmt.Sprint(mp["marked"]) != "2" {
		t.Fatalf("mark-published: %v", mp)
	}
	mp = c.must(200, "POST", "/api/internal/outbox/mark-published", contractInternalToken, map[string]any{"outbox_ids": claimed}).obj()
	if fmt.Sprint(mp["marked"]) != "0" {
		t.Fatalf("mark-published again: %v", mp)
	}
	if strings.TrimSpace(pending()) != "0" {
		t.Fatal("pending after publish")
	}
}
