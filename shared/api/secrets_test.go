package api_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/redact"
)

const secretsPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: secrets, path: tests/secrets}
workload:
  db_password: wl-password-1
  api_key: default-key
  user: postgres
workflow:
  - step: start
    tool:
      kind: postgres
      host: db.example
      user: "{{ user }}"
      password: "{{ db_password }}"
      query: "SELECT '{{ db_password }}' AS pw, '{{ api_key }}' AS k"
`

// TestServedSecretsMasked: secret-named workload keys, their values wherever
// a template put them, and secrets in worker results are masked in
// everything users are served (execution view, events, GET command, replay)
// while the claiming worker still receives the rendered password (R-P4: the
// step needs it).
func TestServedSecretsMasked(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	a := s.API
	must(t, a, 200, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": secretsPlaybook}})
	ex := must(t, a, 200, call{method: "POST", target: "/api/execute", token: tAPI,
		body: map[string]any{"path": "tests/secrets", "payload": map[string]any{"api_key": "payload-key-333"}}})
	exec := id(t, ex.json["execution_id"])
	secrets := []string{"wl-password-1", "payload-key-333", "result-token-4444"}
	clean := func(what string, r result) {
		t.Helper()
		for _, sec := range secrets {
			if strings.Contains(string(r.Body), sec) {
				t.Fatalf("%s serves %q:\n%s", what, sec, r.Body)
			}
		}
	}
	views := func(stage string) {
		t.Helper()
		v := must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d", exec), token: tAPI})
		clean(stage+": the execution view", v)
		wl, _ := v.json["workload"].(map[string]any)
		if wl["db_password"] != redact.Mask || wl["api_key"] != redact.Mask || wl["user"] != "postgres" {
			t.Fatalf("%s: workload %v", stage, wl)
		}
		ev := must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d/events", exec), token: tAPI})
		clean(stage+": the events", ev)
		if !strings.Contains(string(ev.Body), `SELECT '[REDACTED]' AS pw, '[REDACTED]' AS k`) {
			t.Fatalf("%s: the issued command's query should be served masked:\n%s", stage, ev.Body)
		}
		rp := must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d/replay?verify=true", exec), token: tAPI})
		clean(stage+": replay", rp)
		if v, _ := rp.json["verify"].(map[string]any); v["consistent"] != true {
			t.Fatalf("%s: replay verify: %s", stage, rp.Body)
		}
	}
	views("started")

	pending := s.Pending(t, exec)
	if len(pending) != 1 {
		t.Fatalf("%d pending commands", len(pending))
	}
	cmd := strconv.FormatInt(pending[0].IssuedEventID, 10)
	look := must(t, a, 200, call{method: "GET", target: "/api/commands/" + cmd, token: tWorker})
	clean("GET /api/commands/{event_id}", look)
	if tc, _ := look.json["context"].(map[string]any)["tool_config"].(map[string]any); tc["password"] != redact.Mask || tc["user"] != "postgres" {
		t.Fatalf("looked-at command: %s", look.Body)
	}
	claim := must(t, a, 200, call{method: "POST", target: "/api/commands/" + cmd + "/claim", token: tWorker,
		body: map[string]any{"worker_id": "w1"}})
	tc, _ := claim.json["context"].(map[string]any)["tool_config"].(map[string]any)
	if tc["password"] != "wl-password-1" || !strings.Contains(tc["query"].(string), "payload-key-333") {
		t.Fatalf("the claiming worker must get the rendered secrets: %s", claim.Body)
	}

	// The worker reports a result that echoes the password and carries a token.
	meta := map[string]any{"command_id": claim.str("command_id"), "attempt": int64(1)}
	must(t, a, 200, call{method: "POST", target: "/api/events/batch", token: tWorker, body: map[string]any{
		"execution_id": strconv.FormatInt(exec, 10), "worker_id": "w1",
		"events": []any{map[string]any{"step": "start", "event_type": "call.done", "meta": meta,
			"payload": map[string]any{"result": map[string]any{"status": "success",
				"data": map[string]any{"echo": "pw was wl-password-1", "token": "result-token-4444", "rows": int64(1)}}}},
			map[string]any{"step": "start", "event_type": "command.completed", "status": "success", "meta": meta}}}})
	views("completed")
	v := must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d", exec), token: tAPI})
	res, _ := v.json["steps"].(map[string]any)["start"].(map[string]any)["result"].(map[string]any)
	if res["echo"] != "pw was [REDACTED]" || res["token"] != redact.Mask || res["rows"] != int64(1) {
		t.Fatalf("step result: %v", res)
	}
}
