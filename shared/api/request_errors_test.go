package api_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// TestRequestErrors pins the answer to every kind of bad request body each
// route reads: a wrong type, a missing or empty required field, a value out
// of range, two aliases that disagree, an element of the wrong shape, a list
// over its limit. The answers (status and message) are in
// testdata/request_errors.golden, which -update rewrites: a change there is a
// change users see (api.md §1, R-A2), so it is reviewed as one.
func TestRequestErrors(t *testing.T) {
	s := apitest.New(t, apitest.Options{Open: true})
	// Ids that name nothing: every case here is refused before a lookup.
	const exec, cmd, sched = "1099511627776", "1099511627777", "987654321"
	many := func(n int, v any) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	ev := func(kv ...any) map[string]any {
		m := map[string]any{"execution_id": exec, "event_type": "step.note"}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	type bad struct {
		method, path string
		body         string
	}
	cases := []bad{
		{"POST", "/api/catalog/register", `{}`},
		{"POST", "/api/catalog/register", `{"content": ""}`},
		{"POST", "/api/catalog/register", `{"content": 5}`},
		{"POST", "/api/catalog/register", `{"content": "a: b", "resource_type": "Dataset"}`},
		{"POST", "/api/catalog/register", `{"content": "a: b", "resource_type": 3}`},
		{"POST", "/api/catalog/register", `[1]`},
		{"POST", "/api/catalog/register", `{"content": `},
		{"POST", "/api/catalog/list", `{"limit": "ten"}`},
		{"POST", "/api/catalog/list", `{"limit": 0}`},
		{"POST", "/api/catalog/list", `{"limit": 1001}`},
		{"POST", "/api/catalog/list", `{"limit": 1.5}`},
		{"POST", "/api/catalog/list", `{"latest": "yes"}`},
		{"POST", "/api/catalog/list", `{"path": 3}`},
		{"POST", "/api/catalog/list", `{"cursor": "!!!"}`},
		{"POST", "/api/catalog/list", `{"cursor": 7}`},
		{"POST", "/api/catalog/list", `{"resource_type": "x"}`},
		{"POST", "/api/catalog/resource", `{}`},
		{"POST", "/api/catalog/resource", `{"catalog_id": [1]}`},
		{"POST", "/api/catalog/resource", `{"catalog_id": "x"}`},
		{"POST", "/api/catalog/resource", `{"catalog_id": -4}`},
		{"POST", "/api/catalog/resource", `{"catalog_id": 4, "path": "a"}`},
		{"POST", "/api/catalog/resource", `{"catalog_id": 4, "version": 2}`},
		{"POST", "/api/catalog/resource", `{"path": "a", "version": "newest"}`},
		{"POST", "/api/catalog/resource", `{"path": "a", "version": 0}`},
		{"POST", "/api/catalog/resource", `{"path": "a", "version": true}`},
		{"POST", "/api/catalog/resource", `{"path": 1}`},
		{"POST", "/api/catalog/playbooks/validate", `{}`},
		{"POST", "/api/catalog/playbooks/validate", `{"content": []}`},
		{"POST", "/api/execute", `{}`},
		{"POST", "/api/execute", `{"path": "a", "catalog_id": 3}`},
		{"POST", "/api/execute", `{"path": 3}`},
		{"POST", "/api/execute", `{"catalog_id": "three"}`},
		{"POST", "/api/execute", `{"catalog_id": 1.5}`},
		{"POST", "/api/execute", `{"path": "a", "version": "x"}`},
		{"POST", "/api/execute", `{"path": "a", "version": 3000000000}`},
		{"POST", "/api/execute", `{"path": "a", "payload": "n=1"}`},
		{"POST", "/api/execute", `{"path": "a", "workload": []}`},
		{"POST", "/api/execute", `{"path": "a", "payload": {"n": 1}, "workload": {"n": 2}}`},
		{"POST", "/api/execute", `{"path": "a", "parent_execution_id": 1.5}`},
		{"POST", "/api/execute", `{"path": "a", "parent_execution_id": "0"}`},
		{"POST", "/api/execute", `{"path": "a", "execution_pool": 4}`},
		{"POST", "/api/execute", `{"path": "a", "idempotency_key": {}}`},
		{"POST", "/api/execute", `{"path": "a", "idempotency_key": "schedule:1:2"}`},
		{"POST", "/api/execute", `{"path": "a", "resource_kind": "dataset"}`},
		{"POST", "/api/execute", `{"path": "a", "merge": "yes"}`},
		{"POST", "/api/events", `{}`},
		{"POST", "/api/events", `{"execution_id": {"id": 1}, "event_type": "x"}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `"}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": ""}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "name": "b"}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "step": 1}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "step": "s", "node_name": "t"}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "payload": 1}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "context": "x"}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "meta": []}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "event_ids": {}}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "event_id": 1.5}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "actionable": "yes"}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "informative": 1}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "created_at": "yesterday"}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "a", "worker_id": 1}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "command.heartbeat"}`},
		{"POST", "/api/events", `{"execution_id": "` + exec + `", "event_type": "command.heartbeat", "payload": {"command_id": "c"}}`},
		{"POST", "/api/events/batch", `{}`},
		{"POST", "/api/events/batch", `{"execution_id": "` + exec + `"}`},
		{"POST", "/api/events/batch", `{"execution_id": "` + exec + `", "events": []}`},
		{"POST", "/api/events/batch", `{"execution_id": "` + exec + `", "events": {}}`},
		{"POST", "/api/events/batch", `{"execution_id": "` + exec + `", "events": [1]}`},
		{"POST", "/api/events/batch", `{"execution_id": "` + exec + `", "events": [{"event_type": "a"}, {"step": "s"}]}`},
		{"POST", "/api/events/batch", `{"execution_id": "` + exec + `", "events": [{"event_type": "a", "execution_id": 5}]}`},
		{"POST", "/api/events/batch", `{"execution_id": "` + exec + `", "events": [{"event_type": "a", "execution_id": "x"}]}`},
		{"POST", "/api/events/batch", `{"execution_id": "` + exec + `", "worker_id": 3, "events": [{"event_type": "a"}]}`},
		{"POST", "/api/events/batch", string(jsonx.MustMarshal(map[string]any{"execution_id": exec, "events": many(501, map[string]any{"event_type": "a"})}))},
		{"POST", "/api/worker/report", `{}`},
		{"POST", "/api/worker/report", `{"worker_id": ""}`},
		{"POST", "/api/worker/report", `{"worker_id": "w"}`},
		{"POST", "/api/worker/report", `{"worker_id": "w", "take": -1, "claims": [1]}`},
		{"POST", "/api/worker/report", `{"worker_id": "w", "take": 1001, "claims": [1]}`},
		{"POST", "/api/worker/report", `{"worker_id": "w", "take": "x", "claims": [1]}`},
		{"POST", "/api/worker/report", `{"worker_id": "w", "pool": 1, "claims": [1]}`},
		{"POST", "/api/worker/report", `{"worker_id": "w", "claims": {}}`},
		{"POST", "/api/worker/report", `{"worker_id": "w", "claims": ["x"]}`},
		{"POST", "/api/worker/report", `{"worker_id": "w", "events": "x"}`},
		{"POST", "/api/worker/report", `{"worker_id": "w", "events": [3]}`},
		{"POST", "/api/worker/report", `{"worker_id": "w", "events": [{"event_type": "a"}]}`},
		{"POST", "/api/worker/report", string(jsonx.MustMarshal(map[string]any{"worker_id": "w", "events": []any{ev(), ev("execution_id", nil)}}))},
		{"POST", "/api/worker/report", string(jsonx.MustMarshal(map[string]any{"worker_id": "w", "events": many(300, ev()), "claims": many(201, int64(1))}))},
		{"POST", "/api/commands/" + cmd + "/claim", `{}`},
		{"POST", "/api/commands/" + cmd + "/claim", `{"worker_id": 1}`},
		{"POST", "/api/commands/" + cmd + "/claim", `{"worker_id": "w", "start": "yes"}`},
		{"POST", "/api/commands/x/claim", `{"worker_id": "w"}`},
		{"POST", "/api/commands/" + cmd + "/heartbeat", `{}`},
		{"POST", "/api/commands/" + cmd + "/heartbeat", `{"worker_id": "w", "attempt": 0}`},
		{"POST", "/api/commands/" + cmd + "/heartbeat", `{"worker_id": "w", "attempt": "two"}`},
		{"POST", "/api/worker/pool/register", `{}`},
		{"POST", "/api/worker/pool/register", `{"name": "w", "capacity": -1}`},
		{"POST", "/api/worker/pool/register", `{"name": "w", "runtime": {}}`},
		{"POST", "/api/worker/pool/register", `{"name": "w", "component_type": "x"}`},
		{"POST", "/api/worker/pool/heartbeat", `{}`},
		{"POST", "/api/worker/pool/heartbeat", `{"name": "w", "registration": 1}`},
		{"POST", "/api/worker/pool/deregister", `{}`},
		{"POST", "/api/worker/pool/deregister", `{"name": []}`},
		{"POST", "/api/credentials", `{}`},
		{"POST", "/api/credentials", `{"name": 5, "data": {}}`},
		{"POST", "/api/credentials", `{"name": "x y", "data": {}}`},
		{"POST", "/api/credentials", `{"name": "123", "data": {}}`},
		{"POST", "/api/credentials", `{"name": "x", "data": "password"}`},
		{"POST", "/api/credentials", `{"name": "x"}`},
		{"POST", "/api/credentials", `{"name": "x", "data": {}, "type": "a", "credential_type": "b"}`},
		{"POST", "/api/credentials", `{"name": "x", "data": {}, "credential_type": 4}`},
		{"POST", "/api/credentials", `{"name": "x", "data": {}, "meta": []}`},
		{"POST", "/api/credentials", `{"name": "x", "data": {}, "description": 1}`},
		{"POST", "/api/credentials", `{"name": "x", "data": {}, "tags": 1}`},
		{"POST", "/api/credentials", `{"name": "x", "data": {}, "tags": ["a", 2]}`},
		{"POST", "/api/credentials", `{"name": "x", "data": {}, "scope": 1}`},
		{"POST", "/api/credentials", `{"name": "x", "data": {}, "scope": {"pools": 1}}`},
		{"POST", "/api/credentials/rotate", `{"limit": "all"}`},
		{"POST", "/api/credentials/rotate", `{"limit": 0}`},
		{"POST", "/api/credentials/rotate", `{"new_key": 1}`},
		{"POST", "/api/vars/" + exec, `{"variables": {"x": 1}, "var_type": "odd"}`},
		{"POST", "/api/vars/" + exec, `{"variables": 1}`},
		{"POST", "/api/vars/x", `{"a": 1}`},
		{"PUT", "/api/result/" + exec, `{}`},
		{"PUT", "/api/result/" + exec, `{"name": 5, "data": 1}`},
		{"PUT", "/api/result/" + exec, `{"name": "n"}`},
		{"PUT", "/api/result/" + exec, `{"name": "n", "data": 1, "scope": "galaxy"}`},
		{"POST", "/api/executions/" + exec + "/cancel", `{"reason": 1}`},
		{"POST", "/api/executions/" + exec + "/cancel", `{"cascade": "yes"}`},
		{"POST", "/api/executions/x/cancel", `{}`},
		{"POST", "/api/executions/" + exec + "/stop", `{"reason": []}`},
		{"POST", "/api/executions/" + exec + "/rerun", `{"workload": 1}`},
		{"POST", "/api/executions/" + exec + "/rerun", `{"workload": {"a": 1}, "payload": {"a": 2}}`},
		{"POST", "/api/executions/" + exec + "/rerun", `{"resource_kind": "x"}`},
		{"POST", "/api/executions/" + exec + "/finalize", `{}`},
		{"POST", "/api/executions/" + exec + "/finalize", `{"status": "DONE"}`},
		{"POST", "/api/executions/" + exec + "/finalize", `{"status": "failed", "error": 3}`},
		{"POST", "/api/internal/outbox/claim", `{"limit": "many"}`},
		{"POST", "/api/internal/outbox/claim", `{"limit": 1.5}`},
		{"POST", "/api/internal/outbox/mark-published", `{}`},
		{"POST", "/api/internal/outbox/mark-published", `{"outbox_ids": 1}`},
		{"POST", "/api/internal/outbox/mark-published", `{"outbox_ids": [1, "x"]}`},
		{"POST", "/api/internal/outbox/mark-published", string(jsonx.MustMarshal(map[string]any{"outbox_ids": many(1001, int64(1))}))},
		{"POST", "/api/internal/outbox/mark-failed", `{}`},
		{"POST", "/api/internal/outbox/mark-failed", `{"outbox_id": 1}`},
		{"POST", "/api/internal/outbox/mark-failed", `{"outbox_id": 1, "error": ""}`},
		{"POST", "/api/internal/outbox/mark-failed", `{"outbox_id": 1, "error": "e", "attempts": -1}`},
		{"POST", "/api/internal/outbox/mark-failed", `{"outbox_id": 1, "error": "e", "max_delay_seconds": "5"}`},
		{"POST", "/api/internal/outbox/mark-failed", `{"outbox_id": 1, "error": "e", "max_delay_seconds": 0}`},
		{"POST", "/api/internal/outbox/mark-failed", `{"outbox_id": 1, "error": "e", "max_delay_seconds": 90000}`},
		{"POST", "/api/internal/events/project", `{}`},
		{"POST", "/api/internal/events/project", `{"events": []}`},
		{"POST", "/api/internal/events/project", `{"events": [1]}`},
		{"POST", "/api/internal/events/project", `{"events": [{}]}`},
		{"POST", "/api/internal/events/project", `{"events": [{"event_id": 1, "execution_id": "x"}]}`},
		{"POST", "/api/internal/events/project", `{"events": [{"event_id": 1, "event_type": "a", "name": "b"}]}`},
		{"POST", "/api/internal/events/project", `{"events": [{"event_id": 1, "node_name": 3}]}`},
		{"POST", "/api/internal/events/project", `{"events": [{"event_id": 1, "context": 3}]}`},
		{"POST", "/api/internal/events/project", `{"events": [{"event_id": 1, "result": 3}]}`},
		{"POST", "/api/internal/events/project", `{"events": [{"event_id": 1, "command_id": 1.5}]}`},
		{"POST", "/api/internal/events/project", `{"events": [{"event_id": 1, "stage_id": true}]}`},
		{"POST", "/api/internal/events/project", `{"events": [{"event_id": 1, "timestamp": "noon"}]}`},
		{"POST", "/api/internal/events/project", `{"events": [{"event_id": 1, "created_at": 5}]}`},
		{"POST", "/api/schedules", `{"playbok_path": "a"}`},
		{"POST", "/api/schedules", `{"playbook_path": 1}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "playbook_version": 0}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "playbook_version": "x"}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "interval_seconds": 0}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "interval_seconds": "x"}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "cron": 5}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "enabled": "no"}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "input_payload": []}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "catchup_seconds": 0}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "jitter_seconds": -1}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "meta": 1}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "overlap": 1}`},
		{"POST", "/api/schedules", `{"playbook_path": "a", "timezone": 1}`},
		{"PATCH", "/api/schedules/" + sched, `{"enabled": 1}`},
		{"PATCH", "/api/schedules/" + sched, `{"nope": 1}`},
		{"PATCH", "/api/schedules/x", `{}`},
		{"POST", "/api/schedules/" + sched + "/trigger", `[]`},
		{"POST", "/api/schedules/" + sched + "/backfill", `{}`},
		{"POST", "/api/schedules/" + sched + "/backfill", `{"from": "2024-01-01T00:00:00Z"}`},
		{"POST", "/api/schedules/" + sched + "/backfill", `{"from": "yesterday", "to": "2024-01-01T00:00:00Z"}`},
		{"POST", "/api/schedules/" + sched + "/backfill", `{"from": 1, "to": "2024-01-01T00:00:00Z"}`},
	}
	var got bytes.Buffer
	for _, c := range cases {
		r := serve(t, s.API, call{method: c.method, target: c.path, body: c.body})
		if r.Status < 400 {
			t.Errorf("%s %s %s: %d, want an error", c.method, c.path, truncate(c.body), r.Status)
		}
		fmt.Fprintf(&got, "%s %s %s\n\t%d %s\n", c.method, c.path, truncate(c.body), r.Status, strconv.Quote(r.str("error")))
	}
	golden := filepath.Join("testdata", "request_errors.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestRequestErrors -update writes it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			g, w := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("line %d:\n got %s\nwant %s", i+1, g, w)
			}
		}
	}
}

func truncate(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}
