package api_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/replay"
)

const (
	tAPI      = apitest.APIToken
	tWorker   = apitest.WorkerToken
	tInternal = apitest.InternalToken
)

func playbook(path string) string {
	return strings.Replace(apitest.ThreeSteps, "path: tests/three", "path: "+path, 1)
}

func TestRegisterAndCatalog(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	a := s.API
	r := must(t, a, 200, call{method: "POST", target: "/api/catalog/register", token: tAPI,
		body: map[string]any{"content": apitest.ThreeSteps, "resource_type": "Playbook"}})
	if r.str("status") != "success" || r.str("path") != "tests/three" || r.json["version"] != int64(1) || r.json["created"] != true {
		t.Fatalf("register: %s", r.Body)
	}
	first := id(t, r.json["catalog_id"])
	// The same content, base64: the same version (idempotent).
	b64 := base64.StdEncoding.EncodeToString([]byte(apitest.ThreeSteps))
	r = must(t, a, 200, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": b64}})
	if id(t, r.json["catalog_id"]) != first || r.json["version"] != int64(1) || r.json["created"] != false {
		t.Fatalf("base64 re-register: %s", r.Body)
	}
	// New content: version 2.
	v2 := apitest.ThreeSteps + "# v2\n"
	r = must(t, a, 200, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": v2}})
	if r.json["version"] != int64(2) {
		t.Fatalf("v2: %s", r.Body)
	}
	// Invalid playbooks are rejected with every problem listed.
	r = must(t, a, 422, call{method: "POST", target: "/api/catalog/register", token: tAPI,
		body: map[string]any{"content": "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: x}\nworkflow:\n  - step: start\n"}})
	if ps, _ := r.json["problems"].([]any); len(ps) < 2 {
		t.Fatalf("problems: %s", r.Body)
	}
	must(t, a, 422, call{method: "POST", target: "/api/catalog/register", token: tAPI,
		body: map[string]any{"content": apitest.ThreeSteps, "resource_type": "Workbook"}})
	// A playbook over 512 KiB: 413 with the limit, inside the 1 MiB body limit.
	big := apitest.ThreeSteps + "# " + strings.Repeat("x", 600<<10) + "\n"
	r = must(t, a, 413, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": big}})
	if !strings.Contains(r.str("error"), "524288") {
		t.Errorf("413 message %q lacks the limit", r.str("error"))
	}

	for _, p := range []string{"a/one", "b/two", "c/three"} {
		must(t, a, 200, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": playbook(p)}})
	}
	// 5 entries (a/one, b/two, c/three, tests/three v2 and v1), pages of 2.
	var got []string
	cursor := ""
	for page := 0; ; page++ {
		target := "/api/catalog?limit=2"
		if cursor != "" {
			target += "&cursor=" + cursor
		}
		r = must(t, a, 200, call{method: "GET", target: target, token: tAPI})
		for _, e := range r.json["entries"].([]any) {
			m := e.(map[string]any)
			got = append(got, fmt.Sprintf("%s@%d", m["path"], m["version"]))
			if _, has := m["content"]; has {
				t.Error("list entries carry content")
			}
		}
		next, _ := r.json["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
		if page > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if strings.Join(got, ",") != "a/one@1,b/two@1,c/three@1,tests/three@2,tests/three@1" {
		t.Fatalf("catalog pages: %v", got)
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/catalog/list", token: tAPI, body: map[string]any{"path": "tests/three", "limit": "1"}})
	if es := r.json["entries"].([]any); len(es) != 1 || r.json["next_cursor"] == nil {
		t.Fatalf("list alias: %s", r.Body)
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/catalog/list", token: tAPI,
		body: map[string]any{"path": "tests/three", "cursor": r.json["next_cursor"]}})
	if es := r.json["entries"].([]any); len(es) != 1 || es[0].(map[string]any)["version"] != int64(1) {
		t.Fatalf("list alias page 2: %s", r.Body)
	}
	r = must(t, a, 200, call{method: "GET", target: "/api/catalog?latest=true", token: tAPI})
	if es := r.json["entries"].([]any); len(es) != 4 || es[3].(map[string]any)["version"] != int64(2) {
		t.Fatalf("latest only: %s", r.Body)
	}
	must(t, a, 422, call{method: "GET", target: "/api/catalog?latest=maybe", token: tAPI})
	must(t, a, 422, call{method: "GET", target: "/api/catalog?cursor=bm9wZQ", token: tAPI})
	must(t, a, 422, call{method: "GET", target: "/api/catalog?limit=1001", token: tAPI})

	r = must(t, a, 200, call{method: "GET", target: "/api/catalog/" + strconv.FormatInt(first, 10), token: tAPI})
	if r.str("content") != apitest.ThreeSteps || r.str("kind") != "Playbook" {
		t.Fatalf("get: %s", r.Body)
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/catalog/resource", token: tAPI,
		body: map[string]any{"path": "tests/three", "version": "latest"}})
	if r.json["version"] != int64(2) || r.str("content") != v2 {
		t.Fatalf("resource latest: %s", r.Body)
	}
	must(t, a, 404, call{method: "POST", target: "/api/catalog/resource", token: tAPI, body: map[string]any{"path": "tests/none"}})
	must(t, a, 422, call{method: "POST", target: "/api/catalog/resource", token: tAPI, body: map[string]any{}})
}

func TestExecuteValidationAndViews(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	ex := func(want int, body map[string]any) result {
		t.Helper()
		return must(t, a, want, call{method: "POST", target: "/api/execute", token: tAPI, body: body})
	}
	r := ex(422, map[string]any{"path": "tests/three", "payload": map[string]any{"n": int64(1)}, "workload": map[string]any{"n": int64(2)}})
	if !strings.HasPrefix(r.str("error"), "workload:") {
		t.Errorf("payload+workload: %q", r.str("error"))
	}
	if r = ex(422, map[string]any{}); !strings.HasPrefix(r.str("error"), "path:") {
		t.Errorf("neither: %q", r.str("error"))
	}
	ex(422, map[string]any{"path": "tests/three", "catalog_id": strconv.FormatInt(f.catalog, 10)})
	ex(404, map[string]any{"path": "tests/none"})
	ex(422, map[string]any{"path": "tests/three", "execution_pool": "bad pool!"})
	ex(422, map[string]any{"path": "tests/three", "parent_execution_id": 1.5})

	// workload alias, catalog_id as a number, an id above 2^53 survives as a string.
	r = ex(200, map[string]any{"catalog_id": f.catalog, "workload": map[string]any{"n": int64(41)}, "idempotency_key": "k1"})
	if r.str("status") != "started" || r.json["commands_generated"] != int64(1) {
		t.Fatalf("execute: %s", r.Body)
	}
	e1 := id(t, r.json["execution_id"])
	if r2 := ex(200, map[string]any{"path": "tests/three", "idempotency_key": "k1"}); id(t, r2.json["execution_id"]) != e1 {
		t.Fatalf("idempotency key started a second execution: %s", r2.Body)
	}

	r = must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d", e1), token: tAPI})
	for _, k := range []string{"execution_id", "catalog_id", "path", "version", "status", "started_at", "completed_at",
		"parent_execution_id", "workload", "steps", "context", "result", "error"} {
		if _, ok := r.json[k]; !ok {
			t.Errorf("execution view lacks %s: %s", k, r.Body)
		}
	}
	if r.json["workload"].(map[string]any)["n"] != int64(41) || r.str("status") != "RUNNING" || r.json["result"] != nil {
		t.Errorf("execution view: %s", r.Body)
	}
	steps := r.json["steps"].(map[string]any)
	if len(steps) != 3 || steps["start"].(map[string]any)["status"] == nil {
		t.Errorf("steps: %v", steps)
	}
	// view=summary: the same execution without its steps and events.
	r = must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d?view=summary", e1), token: tAPI})
	if s, _ := r.json["steps"].(map[string]any); len(s) != 0 || len(r.json["events"].([]any)) != 0 ||
		r.str("status") != "RUNNING" || r.json["workload"].(map[string]any)["n"] != int64(41) {
		t.Errorf("summary view: %s", r.Body)
	}
	if r = must(t, a, 422, call{method: "GET", target: fmt.Sprintf("/api/executions/%d?view=steps", e1), token: tAPI}); !strings.HasPrefix(r.str("error"), "view:") {
		t.Errorf("bad view: %q", r.str("error"))
	}
	r = must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d/status", e1), token: tAPI})
	prog, _ := r.json["progress"].(map[string]any)
	if prog["total_steps"] != int64(3) || r.json["is_cancelled"] != false || r.str("current_step") != "start" {
		t.Errorf("status: %s", r.Body)
	}
	// Events: paged by seq.
	r = must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d/events?limit=2", e1), token: tAPI})
	evs := r.json["events"].([]any)
	if len(evs) != 2 || evs[0].(map[string]any)["event_type"] != "playbook.started" || r.json["next_after_seq"] != int64(2) {
		t.Fatalf("events page 1: %s", r.Body)
	}
	r = must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d/events?after_seq=2&limit=1000", e1), token: tAPI})
	if r.json["next_after_seq"] != nil || len(r.json["events"].([]any)) == 0 {
		t.Fatalf("events page 2: %s", r.Body)
	}
	r = must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d/events?event_type=command.issued", e1), token: tAPI})
	if evs := r.json["events"].([]any); len(evs) != 1 || evs[0].(map[string]any)["node_type"] != "noop" {
		t.Fatalf("events by type: %s", r.Body)
	}
	// NoETL's cap: a larger limit is served capped, and says so.
	if r := must(t, a, 200, call{method: "GET", target: "/api/executions?limit=1001", token: tAPI}); r.Header.Get(api.HeaderLimitCapped) != "true" ||
		r.Header.Get(api.HeaderLimitApplied) != "100" {
		t.Errorf("limit 1001: headers %v", r.Header)
	}
	must(t, a, 422, call{method: "GET", target: "/api/executions?offset=901", token: tAPI})
	must(t, a, 422, call{method: "GET", target: "/api/executions?offset=-1", token: tAPI})
	must(t, a, 422, call{method: "GET", target: "/api/executions?limit=0", token: tAPI})
	must(t, a, 422, call{method: "GET", target: "/api/executions?status=DONE", token: tAPI})
	must(t, a, 422, call{method: "GET", target: "/api/executions?cursor=!!!", token: tAPI})
	r = must(t, a, 422, call{method: "GET", target: "/api/executions?cursor=ZTE6eDp5", token: tAPI})
	if !strings.HasPrefix(r.str("error"), "cursor:") {
		t.Errorf("bad cursor: %q", r.str("error"))
	}
}

// TestListExecutionsAcrossShards: keyset pages over both shards return every
// execution once, newest first.
func TestListExecutionsAcrossShards(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	shards := map[int]bool{}
	for range 7 {
		r := must(t, a, 200, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{"path": "tests/three"}})
		shards[int(id(t, r.json["execution_id"])&1023)] = true
	}
	if len(shards) != 2 {
		t.Fatalf("executions on shards %v", shards)
	}
	var got []int64
	var times []string
	cursor := ""
	for range 10 {
		target := "/api/executions?limit=3&path=tests/three&status=running"
		if cursor != "" {
			target += "&cursor=" + cursor
		}
		r := must(t, a, 200, call{method: "GET", target: target, token: tAPI})
		for _, e := range r.list {
			m := e.(map[string]any)
			got = append(got, id(t, m["execution_id"]))
			times = append(times, m["started_at"].(string))
			if m["parent_execution_id"] != nil || m["completed_at"] != nil {
				t.Errorf("summary: %v", m)
			}
		}
		next := r.Header.Get(api.HeaderNextCursor)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != 8 {
		t.Fatalf("%d executions listed, want 8: %v", len(got), got)
	}
	seen := map[int64]bool{}
	for i, g := range got {
		if seen[g] {
			t.Fatalf("execution %d listed twice", g)
		}
		seen[g] = true
		if i > 0 && times[i] > times[i-1] {
			t.Fatalf("not newest first: %v", times)
		}
	}
	r := must(t, a, 200, call{method: "GET", target: "/api/executions?status=COMPLETED", token: tAPI})
	if r.list == nil || len(r.list) != 0 {
		t.Fatalf("status filter: %s", r.Body)
	}
	// NoETL's paging: offset over the merged order; path a case-insensitive substring.
	r = must(t, a, 200, call{method: "GET", target: "/api/executions?limit=3&offset=2&path=THREE", token: tAPI})
	if len(r.list) != 3 || id(t, r.list[0].(map[string]any)["execution_id"]) != got[2] ||
		id(t, r.list[2].(map[string]any)["execution_id"]) != got[4] {
		t.Fatalf("offset 2: %s, want %v", r.Body, got[2:5])
	}
	r = must(t, a, 200, call{method: "GET", target: "/api/executions?path=nomatch", token: tAPI})
	if len(r.list) != 0 || r.Header.Get(api.HeaderHasMore) != "false" {
		t.Fatalf("path nomatch: %s", r.Body)
	}
}

// TestWorkerRoutes: command bodies keep NoETL's integers; claims, heartbeats,
// events with NoETL's aliases, duplicates, batches and fencing (R-L8).
func TestWorkerRoutes(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	cmd := strconv.FormatInt(f.command, 10)
	r := must(t, a, 200, call{method: "GET", target: "/api/commands/" + cmd, token: tWorker})
	if r.json["event_id"] != f.command || r.json["execution_id"] != f.exec || r.str("status") != "PENDING" {
		t.Fatalf("command body (ids must be JSON integers): %s", r.Body)
	}
	claim := func(worker string, want int) result {
		t.Helper()
		return must(t, a, want, call{method: "POST", target: "/api/commands/" + cmd + "/claim", token: tWorker,
			body: map[string]any{"worker_id": worker}})
	}
	r = claim("w1", 200)
	for _, k := range []string{"status", "event_id", "execution_id", "node_id", "node_name", "action", "context", "meta",
		"command_id", "attempt", "lease_expires_at"} {
		if _, ok := r.json[k]; !ok {
			t.Errorf("claim response lacks %s", k)
		}
	}
	if r.str("status") != "ok" || r.json["event_id"] != f.command || r.json["execution_id"] != f.exec ||
		r.str("node_name") != "start" || r.str("action") != "noop" || r.json["attempt"] != int64(1) {
		t.Fatalf("claim: %s", r.Body)
	}
	commandID := r.str("command_id")
	// The same worker again: NoETL's worker got the notification twice (legacy
	// and shared consumers); active_claim makes it ack and skip.
	if r := claim("w1", 409); fmt.Sprint(r.json["detail"]) != "map[code:active_claim message:"+r.str("error")+"]" {
		t.Errorf("second claim of the holder: %s", r.Body)
	}
	if r = claim("w2", 409); !strings.Contains(r.str("error"), "w1") {
		t.Errorf("409 message %q", r.str("error"))
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/commands/" + cmd + "/heartbeat", token: tWorker,
		body: map[string]any{"worker_id": "w1", "attempt": int64(1)}})
	if r.str("lease_expires_at") == "" {
		t.Fatalf("heartbeat: %s", r.Body)
	}
	must(t, a, 409, call{method: "POST", target: "/api/commands/" + cmd + "/heartbeat", token: tWorker,
		body: map[string]any{"worker_id": "w2"}})

	meta := map[string]any{"command_id": commandID, "attempt": int64(1)}
	// NoETL's aliases: name for event_type, context for payload; a numeric client id.
	started := map[string]any{"execution_id": f.exec, "step": "start", "name": "command.started", "context": map[string]any{},
		"meta": meta, "worker_id": "w1", "event_id": int64(1001), "actionable": true}
	r = must(t, a, 200, call{method: "POST", target: "/api/events", token: tWorker, body: started})
	first := r.str("event_id")
	before := f.s.Counts(t)
	r = must(t, a, 200, call{method: "POST", target: "/api/events", token: tWorker, body: started})
	if r.str("event_id") != first || r.json["duplicate"] != true {
		t.Fatalf("re-post: %s (first %s)", r.Body, first)
	}
	if f.s.Counts(t) != before {
		t.Fatal("a re-posted event wrote rows")
	}
	// A batch with a bad element stores nothing (all or nothing).
	must(t, a, 422, call{method: "POST", target: "/api/events/batch", token: tWorker, body: map[string]any{
		"execution_id": strconv.FormatInt(f.exec, 10), "worker_id": "w1",
		"events": []any{map[string]any{"step": "start", "event_type": "call.done", "meta": meta,
			"payload": map[string]any{"result": map[string]any{"status": "success", "data": map[string]any{"n": int64(1)}}}},
			map[string]any{"step": "start", "event_type": "command.completed", "meta": "not an object"}}}})
	if f.s.Counts(t) != before {
		t.Fatal("a rejected batch wrote rows")
	}
	over := make([]any, api.MaxBatchEvents+1)
	for i := range over {
		over[i] = map[string]any{"event_type": "step.note"}
	}
	r = must(t, a, 413, call{method: "POST", target: "/api/events/batch", token: tWorker,
		body: map[string]any{"execution_id": f.exec, "events": over}})
	if !strings.Contains(r.str("error"), "500") {
		t.Errorf("batch limit message %q", r.str("error"))
	}
	// A fenced event (another worker's report) is stored ignored (R-L8) and
	// answered 200 with the reason, as NoETL's server takes it.
	r = must(t, a, 200, call{method: "POST", target: "/api/events", token: tWorker, body: map[string]any{
		"execution_id": f.exec, "step": "start", "event_type": "command.completed", "status": "success", "worker_id": "w2",
		"meta": map[string]any{"command_id": commandID}}})
	if !strings.Contains(r.str("ignored"), "held by w1, not w2") || r.str("event_id") == "" {
		t.Errorf("fenced answer: %s", r.Body)
	}
	if after := f.s.Counts(t); after.Event != before.Event+1 {
		t.Errorf("the fenced event was not stored: %+v → %+v", before, after)
	}
	// NoETL's command.heartbeat event extends the holder's lease and writes no
	// event (R-L1); another worker's extends nothing.
	beat := func(worker string) result {
		return must(t, a, 200, call{method: "POST", target: "/api/events", token: tWorker, body: map[string]any{
			"execution_id": strconv.FormatInt(f.exec, 10), "step": "start", "name": "command.heartbeat", "worker_id": worker,
			"payload": map[string]any{"command_id": commandID, "worker_id": worker}, "actionable": false, "informative": true}})
	}
	events := f.s.Counts(t).Event
	if r = beat("w1"); r.str("lease_expires_at") == "" || r.json["event_id"] != nil {
		t.Errorf("holder's heartbeat: %s", r.Body)
	}
	if r = beat("w2"); !strings.Contains(r.str("ignored"), "not held by w2") || r.json["lease_expires_at"] != nil {
		t.Errorf("another worker's heartbeat: %s", r.Body)
	}
	if n := f.s.Counts(t).Event; n != events {
		t.Errorf("heartbeats wrote %d events", n-events)
	}
	// The batch of the real worker completes the step and issues the next one;
	// posted again under its Idempotency-Key (NoETL's worker retries a batch
	// under one key), it gets the first answer and stores nothing.
	batch := call{method: "POST", target: "/api/events/batch", token: tWorker, header: http.Header{"Idempotency-Key": {"w1:batch:1"}}, body: map[string]any{
		"execution_id": strconv.FormatInt(f.exec, 10), "worker_id": "w1",
		"events": []any{map[string]any{"step": "start", "event_type": "call.done", "meta": meta,
			"payload": map[string]any{"result": map[string]any{"status": "success", "data": map[string]any{"n": int64(1)}}}},
			map[string]any{"step": "start", "event_type": "command.completed", "status": "success", "meta": meta}}}}
	r = must(t, a, 200, batch)
	if r.str("status") != "ok" || len(r.json["event_ids"].([]any)) != 2 || r.json["commands_generated"] != int64(1) {
		t.Fatalf("batch: %s", r.Body)
	}
	counts := f.s.Counts(t)
	if again := must(t, a, 200, batch); string(again.Body) != string(r.Body) || f.s.Counts(t) != counts {
		t.Fatalf("the batch again: %s (first %s); rows %+v → %+v", again.Body, r.Body, counts, f.s.Counts(t))
	}
	other := batch
	other.body = map[string]any{"execution_id": strconv.FormatInt(f.exec, 10), "events": []any{map[string]any{"event_type": "step.note"}}}
	if r = must(t, a, 422, other); !strings.Contains(r.str("error"), "Idempotency-Key") || f.s.Counts(t) != counts {
		t.Fatalf("another request under the key: %s", r.Body)
	}
}

// TestTooEarlyClaim: a claim before a retry is due answers 429 with
// Retry-After (R-L7), and writes nothing.
func TestTooEarlyClaim(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	a := s.API
	must(t, a, 200, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": apitest.Flaky}})
	r := must(t, a, 200, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{"path": "tests/flaky"}})
	exec := id(t, r.json["execution_id"])
	c := s.Pending(t, exec)[0]
	target := fmt.Sprintf("/api/commands/%d/claim", c.IssuedEventID)
	must(t, a, 200, call{method: "POST", target: target, token: tWorker, body: map[string]any{"worker_id": "w1"}})
	must(t, a, 200, call{method: "POST", target: "/api/events", token: tWorker, body: map[string]any{
		"execution_id": exec, "step": "start", "event_type": "command.failed", "status": "error", "worker_id": "w1",
		"payload": map[string]any{"error": "boom"}, "meta": map[string]any{"command_id": c.CommandID, "attempt": int64(1)}}})
	before := s.Counts(t)
	r = must(t, a, 429, call{method: "POST", target: target, token: tWorker, body: map[string]any{"worker_id": "w1"}})
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || ra < 1 || ra > 30 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	if after := s.Counts(t); after != before {
		t.Errorf("an early claim wrote rows: %+v → %+v", before, after)
	}
}

func TestCancelAndFinalize(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	ep := fmt.Sprintf("/api/executions/%d", f.exec)
	r := must(t, a, 200, call{method: "POST", target: ep + "/cancel", token: tAPI, body: map[string]any{"reason": "enough"}})
	if r.str("status") != "CANCELLED" || id(t, r.json["execution_id"]) != f.exec {
		t.Fatalf("cancel: %s", r.Body)
	}
	must(t, a, 200, call{method: "POST", target: ep + "/cancel", token: tAPI}) // idempotent, empty body
	must(t, a, 409, call{method: "POST", target: ep + "/finalize", token: tAPI, body: map[string]any{"status": "COMPLETED"}})
	r = must(t, a, 409, call{method: "POST", target: fmt.Sprintf("/api/commands/%d/claim", f.command), token: tWorker,
		body: map[string]any{"worker_id": "w1"}})
	if !strings.Contains(r.str("error"), "cancelled") {
		t.Errorf("claim after cancel: %q", r.str("error"))
	}
	r = must(t, a, 200, call{method: "GET", target: ep + "/status", token: tAPI})
	if r.json["is_cancelled"] != true {
		t.Errorf("status after cancel: %s", r.Body)
	}
	// Finalize another execution; then cancelling it conflicts.
	r = must(t, a, 200, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{"path": "tests/three"}})
	ep2 := "/api/executions/" + r.str("execution_id")
	must(t, a, 422, call{method: "POST", target: ep2 + "/finalize", token: tAPI, body: map[string]any{}})
	r = must(t, a, 200, call{method: "POST", target: ep2 + "/finalize", token: tAPI, body: map[string]any{"status": "failed", "error": "operator"}})
	if r.str("status") != "FAILED" {
		t.Fatalf("finalize: %s", r.Body)
	}
	// Issue 30 (over R-R10's 409): answered as NoETL answers it, nothing cancelled.
	r = must(t, a, 200, call{method: "POST", target: ep2 + "/cancel", token: tAPI})
	if r.str("status") != "already_completed" || r.str("already") != "FAILED" || len(r.json["cancelled_executions"].([]any)) != 0 {
		t.Errorf("cancel of a finalized execution: %s", r.Body)
	}
}

func TestReplayRoutes(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	ep := fmt.Sprintf("/api/executions/%d/replay", f.exec)
	r := must(t, a, 200, call{method: "GET", target: ep + "?verify=true", token: tAPI})
	v, _ := r.json["verify"].(map[string]any)
	if v["consistent"] != true || r.str("execution_id") != strconv.FormatInt(f.exec, 10) || r.json["checksum"] == nil {
		t.Fatalf("replay: %s", r.Body)
	}
	byQuery := must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/replay/state?execution_id=%d&verify=true", f.exec), token: tAPI})
	if !bytes.Equal(byQuery.Body, r.Body) {
		t.Errorf("the two replay routes differ:\n%s\n%s", r.Body, byQuery.Body)
	}
	r = must(t, a, 200, call{method: "GET", target: ep + "?as_of_position=2&diff_from=position:1", token: tAPI})
	if d, ok := r.json["diff"].([]any); !ok || len(d) == 0 || r.json["event_count"] != int64(2) {
		t.Fatalf("diff: %s", r.Body)
	}
	r = must(t, a, 400, call{method: "GET", target: ep + "?as_of_position=1&as_of_event_id=1", token: tAPI})
	if r.str("error") != replay.MsgOneCutoff {
		t.Errorf("two cutoffs: %q", r.str("error"))
	}
	const unknownProjection = `Unknown projection "nope": use one of execution, step, stage, frame, command, business_object, loop, all`
	if r := must(t, a, 400, call{method: "GET", target: ep + "?projection=nope", token: tAPI}); r.str("error") != unknownProjection {
		t.Errorf("unknown projection: %q, want %q", r.str("error"), unknownProjection)
	}
	const badTime = `as_of_time must be an RFC 3339 timestamp such as 2024-05-01T12:00:00Z, got "yesterday"`
	if r := must(t, a, 400, call{method: "GET", target: ep + "?as_of_time=yesterday", token: tAPI}); r.str("error") != badTime {
		t.Errorf("bad time: %q, want %q", r.str("error"), badTime)
	}
	must(t, a, 400, call{method: "GET", target: ep + "?limit=-1", token: tAPI})
	must(t, a, 422, call{method: "GET", target: "/api/replay/state", token: tAPI})
	// Parameters are checked before the execution is looked up.
	must(t, a, 400, call{method: "GET", target: "/api/executions/" + unknownExec + "/replay?projection=nope", token: tAPI})
	must(t, a, 404, call{method: "GET", target: "/api/executions/" + unknownExec + "/replay?projection=stage", token: tAPI})
}

// TestInternalOutboxRoutes: claim, mark-failed, mark-published, pending-count
// over both shards (R-A6).
func TestInternalOutboxRoutes(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	f.s.NATS.Down() // post-commit publishes fail: rows stay PENDING
	for range 3 {
		must(t, a, 200, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{"path": "tests/three"}})
	}
	f.s.NATS.Up() //nolint:errcheck
	r := must(t, a, 200, call{method: "GET", target: "/api/internal/outbox/pending-count", token: tInternal})
	if r.json["pending"] != int64(3) {
		t.Fatalf("pending: %s", r.Body)
	}
	// The drain claims rows older than 5 s (R-A6); age them instead of waiting.
	for i := range f.s.Store.NumShards() {
		if _, err := f.s.Store.Shard(i).Pool().Exec(f.s.Ctx, `UPDATE outbox SET created_at = now() - interval '1 minute'`); err != nil {
			t.Fatal(err)
		}
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/internal/outbox/claim", token: tInternal, body: map[string]any{"limit": int64(10)}})
	rows := r.json["rows"].([]any)
	if len(rows) != 3 {
		t.Fatalf("claimed %d rows: %s", len(rows), r.Body)
	}
	var outboxIDs []any
	shards := map[int64]bool{}
	for _, row := range rows {
		m := row.(map[string]any)
		oid := id(t, m["outbox_id"])
		shards[oid&1023] = true
		outboxIDs = append(outboxIDs, m["outbox_id"])
		p, _ := m["payload"].(map[string]any)
		if _, isInt := p["execution_id"].(int64); !isInt || !strings.HasPrefix(m["subject"].(string), "noetl.commands.") {
			t.Errorf("row: %v", m)
		}
	}
	if len(shards) != 2 {
		t.Errorf("claimed rows of shards %v, want both", shards)
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/internal/outbox/mark-failed", token: tInternal,
		body: map[string]any{"outbox_id": outboxIDs[0], "error": "nats: timeout", "attempts": int64(1)}})
	if r.json["available_at_in"] != int64(1) || r.json["marked"] != true {
		t.Errorf("first failure backs off 1 s: %s", r.Body)
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/internal/outbox/mark-published", token: tInternal,
		body: map[string]any{"outbox_ids": outboxIDs}})
	if r.json["marked"] != int64(3) {
		t.Fatalf("mark-published: %s", r.Body)
	}
	must(t, a, 409, call{method: "POST", target: "/api/internal/outbox/mark-failed", token: tInternal,
		body: map[string]any{"outbox_id": outboxIDs[1], "error": "late"}})
	r = must(t, a, 200, call{method: "GET", target: "/api/internal/outbox/pending-count", token: tInternal})
	if r.json["pending"] != int64(0) {
		t.Fatalf("pending after: %s", r.Body)
	}
	// NoETL's server clamps the limit into 1..1000.
	for _, limit := range []int64{1001, 0, -5} {
		must(t, a, 200, call{method: "POST", target: "/api/internal/outbox/claim", token: tInternal, body: map[string]any{"limit": limit}})
	}
	must(t, a, 422, call{method: "POST", target: "/api/internal/outbox/claim", token: tInternal, body: map[string]any{"limit": "many"}})
	must(t, a, 422, call{method: "POST", target: "/api/internal/outbox/mark-failed", token: tInternal,
		body: map[string]any{"outbox_id": outboxIDs[1], "max_delay_seconds": int64(-1)}})
}

// TestProjectEvents: external informative events are appended once (by
// event_id), fold consistently, and show in replay (R-A4).
func TestProjectEvents(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	evs := []any{
		map[string]any{"event_id": int64(102), "execution_id": f.exec, "event_type": "stage.opened", "node_name": "fanout",
			"status": "OPEN", "stage_id": "s-1", "meta": map[string]any{"kind": "fanout", "step_name": "fanout", "password": "hunter2"}},
		map[string]any{"event_id": "103", "execution_id": strconv.FormatInt(f.exec, 10), "event_type": "frame.dispatched",
			"node_name": "fanout", "status": "CLAIMED", "stage_id": "s-1", "frame_id": "f-1", "command_id": int64(9001),
			"worker_id": "worker-a", "meta": map[string]any{"attempt": int64(1)}},
	}
	before := f.s.Counts(t)
	r := must(t, a, 200, call{method: "POST", target: "/api/internal/events/project", token: tInternal, body: map[string]any{"events": evs}})
	if r.json["projected"] != int64(2) || r.json["duplicates"] != int64(0) {
		t.Fatalf("project: %s", r.Body)
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/internal/events/project", token: tInternal, body: map[string]any{"events": evs}})
	if r.json["projected"] != int64(0) || r.json["duplicates"] != int64(2) {
		t.Fatalf("re-project: %s", r.Body)
	}
	if after := f.s.Counts(t); after.Event != before.Event+2 || after.Command != before.Command {
		t.Fatalf("rows: %+v → %+v", before, after)
	}
	r = must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d/replay?verify=true", f.exec), token: tAPI})
	if v := r.json["verify"].(map[string]any); v["consistent"] != true {
		t.Fatalf("snapshot and log disagree after projecting: %v", v)
	}
	// R-X2: stage.opened opens s-1; the frame event's status then sets it.
	stages, _ := r.json["stages"].(map[string]any)
	if s1, _ := stages["s-1"].(map[string]any); s1 == nil || s1["kind"] != "fanout" || s1["opened_event_id"] == nil {
		t.Fatalf("replay stages: %v", r.json["stages"])
	}
	frames, _ := r.json["frames"].(map[string]any)
	if f1, _ := frames["f-1"].(map[string]any); f1 == nil || f1["status"] != "CLAIMED" || f1["command_id"] != "9001" {
		t.Fatalf("replay frames: %v", r.json["frames"])
	}
	r = must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d/events?event_type=stage.opened", f.exec), token: tAPI})
	ev := r.json["events"].([]any)[0].(map[string]any)
	if m := ev["meta"].(map[string]any); m["password"] != "[REDACTED]" || m["stage_id"] != "s-1" || m["source_event_id"] != "102" {
		t.Errorf("stored meta: %v", m)
	}
	// Orchestration types are stored as sent, flagged ignored, never folded
	// (NoETL's projector materializes every type).
	r = must(t, a, 200, call{method: "POST", target: "/api/internal/events/project", token: tInternal, body: map[string]any{
		"events": []any{map[string]any{"event_id": int64(7), "execution_id": f.exec, "event_type": "command.completed"}}}})
	if r.json["projected"] != int64(1) {
		t.Errorf("orchestration type: %s", r.Body)
	}
	r = must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d/events?event_type=command.completed", f.exec), token: tAPI})
	if evs := r.json["events"].([]any); len(evs) != 1 || evs[0].(map[string]any)["ignored"] != true {
		t.Errorf("projected command.completed: %s", r.Body)
	}
}

func TestHealth(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	r := must(t, s.API, 200, call{method: "GET", target: "/api/health"})
	if r.str("status") != "ok" || r.str("database") != "ok" || r.str("nats") != "ok" || r.str("version") != "test" {
		t.Fatalf("health: %s", r.Body)
	}
	s.NATS.Down()
	r = must(t, s.API, 503, call{method: "GET", target: "/api/health"})
	if r.str("nats") != "down" || r.str("database") != "ok" || !strings.Contains(r.str("error"), "nats") {
		t.Fatalf("health with NATS down: %s", r.Body)
	}
	if err := s.NATS.Up(); err != nil {
		t.Fatal(err)
	}
	// No NATS configured: "disabled".
	noNATS := api.New(s.API.Service(), api.Options{})
	r = must(t, noNATS, 200, call{method: "GET", target: "/api/health"})
	if r.str("nats") != "disabled" {
		t.Fatalf("health without NATS: %s", r.Body)
	}
	// The database down: 503 naming it.
	s.PG.Stop() //nolint:errcheck
	r = must(t, s.API, 503, call{method: "GET", target: "/api/health"})
	if r.str("database") != "down" || !strings.Contains(r.str("error"), "database") {
		t.Fatalf("health with the database down: %s", r.Body)
	}
}

func TestCORS(t *testing.T) {
	s := apitest.New(t, apitest.Options{CORSOrigins: []string{"https://app.example"}})
	hdr := http.Header{"Origin": {"https://app.example"}}
	r := must(t, s.API, 200, call{method: "GET", target: "/api/catalog", token: tAPI, header: hdr})
	if r.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || !strings.Contains(r.Header.Get("Access-Control-Expose-Headers"), "X-Request-Id") {
		t.Fatalf("CORS headers: %v", r.Header)
	}
	// Preflight: no token needed, 204 with the allowed methods.
	pre := must(t, s.API, 204, call{method: "OPTIONS", target: "/api/executions/5/cancel",
		header: http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"POST"}}})
	if pre.Header.Get("Access-Control-Allow-Methods") != "POST" || !strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight: %v", pre.Header)
	}
	// Errors carry them too, an unknown route's included, and a preflight of
	// a path without routes lets the request through to its 404 (a browser
	// reads that; a failed preflight is a CORS error).
	for _, c := range []call{{method: "GET", target: "/api/nope", token: tAPI, header: hdr},
		{method: "GET", target: "/api/executions/5", header: hdr},
		{method: "POST", target: "/api/execute", token: tAPI, header: hdr, body: "{"}} {
		if r := serve(t, s.API, c); r.Status < 400 || r.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
			t.Errorf("%s %s: %d without CORS headers: %v", c.method, c.target, r.Status, r.Header)
		}
	}
	pre = must(t, s.API, 204, call{method: "OPTIONS", target: "/api/dashboard/stats",
		header: http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"GET"}}})
	if pre.Header.Get("Access-Control-Allow-Methods") != "GET" || pre.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Fatalf("preflight of an unknown path: %v", pre.Header)
	}
	// A method the path lacks is let through to its 405 too.
	pre = must(t, s.API, 204, call{method: "OPTIONS", target: "/api/catalog/5",
		header: http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"DELETE"}}})
	if pre.Header.Get("Access-Control-Allow-Methods") != "GET, DELETE" {
		t.Fatalf("preflight of a method the path lacks: %v", pre.Header)
	}
	if r := must(t, s.API, 405, call{method: "DELETE", target: "/api/catalog/5", token: tAPI, header: hdr}); r.Header.Get("Access-Control-Allow-Origin") == "" {
		t.Fatalf("405 without CORS headers: %v", r.Header)
	}
	// A foreign origin is refused outright (guard.go), not only left
	// without CORS headers: a request a page may send without a preflight
	// would otherwise still run.
	r = must(t, s.API, 403, call{method: "GET", target: "/api/catalog", token: tAPI, header: http.Header{"Origin": {"https://evil.example"}}})
	if r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("a foreign origin was allowed")
	}
	// Without CORS configured, the API's own origin only: no CORS header,
	// another origin refused.
	plain := apitest.New(t, apitest.Options{})
	own := http.Header{"Origin": {"http://127.0.0.1:8082"}, "Host": {"127.0.0.1:8082"}}
	r = must(t, plain.API, 200, call{method: "GET", target: "/api/catalog", token: tAPI, header: own})
	if r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("CORS header without CORS configured")
	}
	must(t, plain.API, 403, call{method: "GET", target: "/api/catalog", token: tAPI, header: hdr})
	must(t, plain.API, 403, call{method: "OPTIONS", target: "/api/catalog", header: hdr})
	must(t, plain.API, 405, call{method: "OPTIONS", target: "/api/catalog", header: own})
}

// syncBuffer collects log output written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRequestIDAndLogs: the transport's request id is the response's
// X-Request-Id and tags the request's log lines, with the execution and
// command ids once known.
func TestRequestIDAndLogs(t *testing.T) {
	var logs syncBuffer
	logger := slog.New(api.LogHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	f := newFixture(t, apitest.Options{Logger: logger})
	req := &api.Request{Method: "POST", Path: fmt.Sprintf("/api/commands/%d/claim", f.command), RequestID: "req-abc-123",
		Header: http.Header{"Authorization": {"Bearer " + tWorker}, "Content-Type": {"application/json"}}, Body: []byte(`{"worker_id": "w9"}`)}
	resp := f.s.API.Serve(t.Context(), req)
	if resp.Status != 200 || resp.Header.Get("X-Request-Id") != "req-abc-123" {
		t.Fatalf("claim: %d %v %s", resp.Status, resp.Header, resp.Body)
	}
	var tagged []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"request_id":"req-abc-123"`) {
			tagged = append(tagged, line)
		}
	}
	// The service's "command claimed" line and the request line.
	if len(tagged) < 2 {
		t.Fatalf("lines tagged with the request id: %v\nall logs:\n%s", tagged, logs.String())
	}
	for _, line := range tagged {
		if !strings.Contains(line, `"execution_id":"`+strconv.FormatInt(f.exec, 10)+`"`) && !strings.Contains(line, `"execution_id":`+strconv.FormatInt(f.exec, 10)) {
			t.Errorf("line without the execution id: %s", line)
		}
		if !strings.Contains(line, `"command_id":"`) {
			t.Errorf("line without the command id: %s", line)
		}
	}
	// Without a transport id, one is made.
	resp = f.s.API.Serve(t.Context(), &api.Request{Method: "GET", Path: "/api/health"})
	if len(resp.Header.Get("X-Request-Id")) < 16 {
		t.Errorf("made request id %q", resp.Header.Get("X-Request-Id"))
	}
}
