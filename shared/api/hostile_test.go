package api_test

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
)

// hostile is a request the API must refuse cleanly: its status, the phrases
// its message must hold, and nothing written.
type hostile struct {
	name   string
	call   call
	status int
	want   []string
}

// nul is the NUL message for a field path and byte offset (jsonx.TextError).
func nul(path string, at int) string {
	return fmt.Sprintf(`%s: contains a NUL character (\u0000) at byte %d, which cannot be stored`, path, at)
}

// nested is n arrays, one inside the other.
func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }

// TestHostileRequests is issue 10's hostile-input suite for requests: NUL
// anywhere in a body (keys and values, any depth, every route that stores
// what it is given), in the query string and path; malformed and huge ids;
// bodies nested past the decoder's limit; a huge number of keys; bytes that
// are not UTF-8. Each gets a 4xx naming the field, never a 500, and writes
// nothing; afterwards the held command still completes with its holder's
// result, so the refused requests left no trace in the execution either.
func TestHostileRequests(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	cmd := strconv.FormatInt(f.command, 10)
	exec := strconv.FormatInt(f.exec, 10)
	claimed := must(t, a, 200, call{method: "POST", target: "/api/commands/" + cmd + "/claim", token: tWorker,
		body: map[string]any{"worker_id": "w1"}})
	commandID := claimed.str("command_id")
	meta := map[string]any{"command_id": commandID, "attempt": int64(1)}
	completed := func(data any) map[string]any {
		return map[string]any{"execution_id": exec, "step": "start", "event_type": "command.completed", "status": "success",
			"worker_id": "w1", "meta": meta, "payload": map[string]any{"command_id": commandID,
				"result": map[string]any{"status": "success", "data": data}}}
	}
	stdout := func(s string) map[string]any { return completed(map[string]any{"stdout": s, "exit_code": int64(0)}) }
	manyKeys := map[string]any{}
	for i := range 50_000 {
		manyKeys["k"+strconv.Itoa(i)] = int64(i)
	}
	manyKeys["k50000\x00"] = int64(0)
	const bigID = "99999999999999999999999"
	nulYAML := strings.Replace(apitest.ThreeSteps, "tests/three", "tests/\x00three", 1)

	cases := []hostile{
		// NUL in bodies: every field that is stored, keys and values.
		{"execute payload value", call{method: "POST", target: "/api/execute", token: tAPI,
			body: map[string]any{"path": "tests/three", "payload": map[string]any{"n": "a\x00b"}}}, 422, []string{nul("payload.n", 1)}},
		{"execute payload key", call{method: "POST", target: "/api/execute", token: tAPI,
			body: map[string]any{"path": "tests/three", "payload": map[string]any{"deep": []any{map[string]any{"k\x00": 1}}}}}, 422,
			[]string{`payload.deep[0]["k\x00"]: the key contains a NUL character (\u0000) at byte 1`}},
		{"execute workload alias", call{method: "POST", target: "/api/execute", token: tAPI,
			body: map[string]any{"path": "tests/three", "workload": map[string]any{"n": "\x00"}}}, 422, []string{nul("workload.n", 0)}},
		{"execute idempotency_key", call{method: "POST", target: "/api/execute", token: tAPI,
			body: map[string]any{"path": "tests/three", "idempotency_key": "key\x00"}}, 422, []string{nul("idempotency_key", 3)}},
		{"execute path", call{method: "POST", target: "/api/execute", token: tAPI,
			body: map[string]any{"path": "tests/\x00three"}}, 422, []string{nul("path", 6)}},
		{"execute pool", call{method: "POST", target: "/api/execute", token: tAPI,
			body: map[string]any{"path": "tests/three", "execution_pool": "\x00"}}, 422, []string{nul("execution_pool", 0)}},
		{"register content", call{method: "POST", target: "/api/catalog/register", token: tAPI,
			body: map[string]any{"content": nulYAML}}, 422, []string{nul("content", strings.IndexByte(nulYAML, 0))}},
		{"register base64 content", call{method: "POST", target: "/api/catalog/register", token: tAPI,
			body: map[string]any{"content": base64.StdEncoding.EncodeToString([]byte(nulYAML))}}, 422, []string{"not valid YAML: yaml: control characters are not allowed"}},
		{"event result", call{method: "POST", target: "/api/events", token: tWorker, body: stdout("a\x00b")}, 422,
			[]string{nul("payload.result.data.stdout", 1)}},
		{"event meta", call{method: "POST", target: "/api/events", token: tWorker, body: map[string]any{"execution_id": exec,
			"step": "start", "event_type": "command.started", "worker_id": "w1", "meta": map[string]any{"command_id": commandID + "\x00"}}},
			422, []string{nul("meta.command_id", len(commandID))}},
		{"event type", call{method: "POST", target: "/api/events", token: tWorker, body: map[string]any{"execution_id": exec,
			"event_type": "step.\x00note"}}, 422, []string{nul("event_type", 5)}},
		{"batch element", call{method: "POST", target: "/api/events/batch", token: tWorker, body: map[string]any{
			"execution_id": exec, "worker_id": "w1", "events": []any{
				map[string]any{"step": "start", "event_type": "command.started", "meta": meta},
				stdout("ok\x00")}}}, 422, []string{nul("events[1].payload.result.data.stdout", 2)}},
		{"report event", call{method: "POST", target: "/api/worker/report", token: tWorker, body: map[string]any{
			"worker_id": "w1", "events": []any{stdout("a\x00b")}}}, 422, []string{nul("events[0].payload.result.data.stdout", 1)}},
		{"report worker_id", call{method: "POST", target: "/api/worker/report", token: tWorker, body: map[string]any{
			"worker_id": "w\x001", "claims": []any{cmd}}}, 422, []string{nul("worker_id", 1)}},
		{"report result key", call{method: "POST", target: "/api/worker/report", token: tWorker, body: map[string]any{
			"worker_id": "w1", "events": []any{completed(map[string]any{"rows": []any{map[string]any{"a\x00": 1}}})}}}, 422,
			[]string{`events[0].payload.result.data.rows[0]["a\x00"]: the key contains a NUL`}},
		{"project", call{method: "POST", target: "/api/internal/events/project", token: tInternal, body: map[string]any{
			"events": []any{map[string]any{"event_id": "77", "execution_id": exec, "event_type": "step.note",
				"context": map[string]any{"note": "\x00"}}}}}, 422, []string{nul("events[0].context.note", 0)}},
		{"claim worker_id", call{method: "POST", target: "/api/commands/" + cmd + "/claim", token: tWorker,
			body: map[string]any{"worker_id": "w1\x00"}}, 422, []string{nul("worker_id", 2)}},
		{"heartbeat worker_id", call{method: "POST", target: "/api/commands/" + cmd + "/heartbeat", token: tWorker,
			body: map[string]any{"worker_id": "\x00"}}, 422, []string{nul("worker_id", 0)}},
		{"cancel reason", call{method: "POST", target: "/api/executions/" + exec + "/cancel", token: tAPI,
			body: map[string]any{"reason": "stop\x00"}}, 422, []string{nul("reason", 4)}},
		{"finalize error", call{method: "POST", target: "/api/executions/" + exec + "/finalize", token: tAPI,
			body: map[string]any{"status": "FAILED", "error": "\x00"}}, 422, []string{nul("error", 0)}},
		{"outbox error", call{method: "POST", target: "/api/internal/outbox/mark-failed", token: tInternal,
			body: map[string]any{"outbox_id": "1", "error": "x\x00"}}, 422, []string{nul("error", 1)}},
		{"a huge number of keys, one with NUL", call{method: "POST", target: "/api/execute", token: tAPI,
			body: map[string]any{"path": "tests/three", "payload": manyKeys}}, 422, []string{`payload["k50000\x00"]: the key contains a NUL`}},

		// NUL and bytes that are not UTF-8 in the query string and the path.
		{"query value", call{method: "GET", target: "/api/catalog?path=a%00b", token: tAPI}, 422, []string{nul("path", 1)}},
		{"query key", call{method: "GET", target: "/api/executions?st%00atus=RUNNING", token: tAPI}, 422,
			[]string{`["st\x00atus"]: the key contains a NUL character (\u0000) at byte 2`}},
		{"query not UTF-8", call{method: "GET", target: "/api/executions?path=%FFx", token: tAPI}, 422,
			[]string{"path: is not valid UTF-8 at byte 0, which cannot be stored"}},
		{"events filter", call{method: "GET", target: "/api/executions/" + exec + "/events?step=st%00art", token: tAPI}, 422,
			[]string{nul("step", 2)}},
		{"path parameter", call{method: "GET", target: "/api/executions/1\x00", token: tAPI}, 422, []string{nul("id", 1)}},

		// Bodies that are not UTF-8: decoding would replace the bytes silently.
		{"body not UTF-8", call{method: "POST", target: "/api/execute", token: tAPI,
			body: []byte("{\"path\": \"tests/three\", \"payload\": {\"n\": \"\xff\xfe\"}}")}, 400,
			[]string{"the body is not valid UTF-8 at byte 42"}},

		// Nesting: past the decoder's own limit, and past ours.
		{"100,000 nested arrays", call{method: "POST", target: "/api/execute", token: tAPI,
			body: `{"path": "tests/three", "payload": {"x": ` + nested(100_000) + `}}`}, 422,
			[]string{"body: nests arrays and objects more than 1000 levels deep (limit MaxJSONDepth)"}},
		{"1,001 nested arrays", call{method: "POST", target: "/api/worker/report", token: tWorker,
			body: `{"worker_id": "w1", "events": [{"execution_id": "` + exec + `", "event_type": "command.completed", "payload": {"result": ` + nested(api.MaxJSONDepth) + `}}]}`},
			422, []string{"events[0].payload.result[0][0][0][0]…: nests arrays and objects more than 1000 levels deep"}},

		// Ids: malformed, negative, zero, past int64, past what exists.
		{"huge execution id", call{method: "GET", target: "/api/executions/" + bigID, token: tAPI}, 422,
			[]string{"execution_id: id " + bigID + " is out of range"}},
		{"negative execution id", call{method: "GET", target: "/api/executions/-5/events", token: tAPI}, 422,
			[]string{"execution_id: id must be positive, got -5"}},
		{"hex command id", call{method: "POST", target: "/api/commands/0x10/claim", token: tWorker,
			body: map[string]any{"worker_id": "w1"}}, 422, []string{`event_id: expected an id (integer or numeric string), got "0x10"`}},
		{"zero command id", call{method: "POST", target: "/api/commands/0/heartbeat", token: tWorker,
			body: map[string]any{"worker_id": "w1"}}, 422, []string{"event_id: id must be positive, got 0"}},
		{"fractional catalog id", call{method: "POST", target: "/api/execute", token: tAPI,
			body: `{"catalog_id": 1.5}`}, 422, []string{"catalog_id: expected an integer id, got 1.5"}},
		{"huge claim id", call{method: "POST", target: "/api/worker/report", token: tWorker,
			body: `{"worker_id": "w1", "claims": [` + bigID + `]}`}, 422, []string{"claims[0]: id 1e+23 is out of range"}},
		{"unknown command id", call{method: "POST", target: "/api/commands/9007199254740993/claim", token: tWorker,
			body: map[string]any{"worker_id": "w1"}}, 404, []string{"9007199254740993"}},
		{"huge execution id in an event", call{method: "POST", target: "/api/events", token: tWorker,
			body: `{"execution_id": "` + bigID + `", "event_type": "step.note"}`}, 422, []string{"execution_id: id " + bigID + " is out of range"}},
		{"long command id", call{method: "POST", target: "/api/events", token: tWorker, body: map[string]any{"execution_id": exec,
			"step": "start", "event_type": "command.started", "worker_id": "w1", "meta": map[string]any{"command_id": strings.Repeat("c", 100_000)}}},
			404, []string{"not found in execution " + exec}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.s.Counts(t)
			r := must(t, a, tc.status, tc.call)
			for _, w := range tc.want {
				if !strings.Contains(r.str("error"), w) {
					t.Errorf("message %q lacks %q", r.str("error"), w)
				}
			}
			if after := f.s.Counts(t); after != before {
				t.Errorf("rows written: %+v → %+v", before, after)
			}
		})
	}
	// The holder's result still completes the step and issues the next one.
	r := must(t, a, 200, call{method: "POST", target: "/api/worker/report", token: tWorker,
		body: map[string]any{"worker_id": "w1", "events": []any{completed(map[string]any{"n": int64(1)})}}})
	if ev := r.json["events"].([]any)[0].(map[string]any); ev["status"] != int64(200) || ev["commands_generated"] != int64(1) {
		t.Fatalf("the holder's report: %s", r.Body)
	}
}

// nulPlaybook is a playbook at path whose templates build a NUL ('\x00' is an
// escape of template literals) where the server stores what they render.
func nulPlaybook(path, workload, startTool, set string) string {
	return "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: nul, path: " + path + "}\n" + workload +
		"workflow:\n  - step: start\n    tool: " + startTool + "\n" + set + "    next: end\n  - step: end\n    tool: {kind: noop}\n"
}

// TestTemplateNULEndsCleanly: a template rendering a NUL where the server
// would store it fails the render, naming the output and the template, like
// any render error (R-L6): at dispatch the step fails and the execution ends
// FAILED with no command issued; in a set block the step fails once the
// worker's result arrives, and that report is answered 200; in the workload
// execute is a 422 starting nothing. Before, each transaction failed (500)
// and the execution hung.
func TestTemplateNULEndsCleanly(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	for _, pb := range []string{
		nulPlaybook("nul/tool", "", `{kind: noop, message: "{{ 'a\\x00b' }}"}`, ""),
		nulPlaybook("nul/set", "", "{kind: noop}", "    set: {ctx.v: \"{{ {'k': '\\\\x00'} }}\"}\n"),
		nulPlaybook("nul/workload", "workload:\n  w: \"{{ 'x' ~ '\\\\x00' }}\"\n", "{kind: noop}", ""),
	} {
		must(t, s.API, 200, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": pb}})
	}
	view := func(id string) result {
		return must(t, s.API, 200, call{method: "GET", target: "/api/executions/" + id, token: tAPI})
	}
	const output = `output: contains a NUL character (\u0000) at byte 1, which cannot be stored`

	ex := must(t, s.API, 200, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{"path": "nul/tool"}})
	v := view(ex.str("execution_id"))
	if errText, _ := v.json["error"].(string); v.str("status") != "FAILED" || ex.json["commands_generated"] != int64(0) ||
		!strings.Contains(errText, output) || !strings.Contains(errText, `template "{{ 'a\\x00b' }}"`) {
		t.Fatalf("dispatch: execute %s; execution %s", ex.Body, v.Body)
	}

	ex = must(t, s.API, 200, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{"path": "nul/set"}})
	execID := ex.str("execution_id")
	pending := s.Pending(t, id(t, ex.json["execution_id"]))
	if len(pending) != 1 {
		t.Fatalf("%d pending commands", len(pending))
	}
	r := must(t, s.API, 200, call{method: "POST", target: "/api/worker/report", token: tWorker,
		body: map[string]any{"worker_id": "w1", "claims": []any{strconv.FormatInt(pending[0].IssuedEventID, 10)}}})
	cmd := r.json["claims"].([]any)[0].(map[string]any)
	if cmd["status"] != int64(200) {
		t.Fatalf("claim: %s", r.Body)
	}
	commandID := pending[0].CommandID
	r = must(t, s.API, 200, call{method: "POST", target: "/api/worker/report", token: tWorker, body: map[string]any{"worker_id": "w1",
		"events": []any{map[string]any{"execution_id": execID, "step": "start", "event_type": "command.completed", "status": "success",
			"meta":    map[string]any{"command_id": commandID, "attempt": int64(1)},
			"payload": map[string]any{"command_id": commandID, "result": map[string]any{"status": "success", "data": map[string]any{}}}}}}})
	if ev := r.json["events"].([]any)[0].(map[string]any); ev["status"] != int64(200) {
		t.Fatalf("the completion: %s", r.Body)
	}
	v = view(execID)
	if errText, _ := v.json["error"].(string); v.str("status") != "FAILED" || !strings.Contains(errText, `output.k: contains a NUL character (\u0000) at byte 0`) {
		t.Fatalf("set: execution %s", v.Body)
	}

	before := s.Counts(t)
	r = must(t, s.API, 422, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{"path": "nul/workload"}})
	if !strings.Contains(r.str("error"), "workload.w") || !strings.Contains(r.str("error"), output) {
		t.Fatalf("workload: %s", r.Body)
	}
	if after := s.Counts(t); after != before {
		t.Fatalf("rows written: %+v → %+v", before, after)
	}
}
