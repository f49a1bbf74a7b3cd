package noetlwire

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/jsonx"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	v, err := jsonx.Decode([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v.(map[string]any)
}

// TestResultVariants reads each envelope variant onto the stored shape: the
// requests are NoETL's Python worker's, as recorded in
// ../shared/conformance/noetl-worker (wire*.jsonl).
func TestResultVariants(t *testing.T) {
	tests := []struct {
		name, typ, event string
		want             string // the stored result, canonical JSON
		raw              bool
	}{
		{"python worker: output in response", "call.done",
			`{"name": "call.done", "payload": {"response": {"status": "ok", "data": {"message": "Hello World"}}, "command_id": "1:s:2", "result": {"status": "COMPLETED", "context": {"status": "ok"}}}, "meta": {"command_id": "1:s:2"}}`,
			`{"context":{"data":{"data":{"message":"Hello World"},"status":"ok"},"status":"success"},"status":"success"}`, true},
		{"python worker: status success is data too", "call.done",
			`{"name": "call.done", "payload": {"response": {"status": "success", "data": {"echo": "hi"}}, "result": {"status": "COMPLETED", "context": {"status": "success"}}}}`,
			`{"context":{"data":{"data":{"echo":"hi"},"status":"success"},"status":"success"},"status":"success"}`, true},
		{"python worker: tool error", "call.error",
			`{"name": "call.error", "payload": {"error": "boom", "response": {"status": "error", "error": "boom"}, "result": {"status": "FAILED", "context": {"status": "error", "error": "boom"}}}}`,
			`{"context":{"data":{"error":"boom","status":"error"},"error":"boom","status":"error"},"status":"error"}`, true},
		{"python worker: command.completed has the output without its data", "command.completed",
			`{"name": "command.completed", "payload": {"command_id": "1:s:2", "result": {"status": "COMPLETED", "context": {"status": "success"}}}}`,
			`{"context":{"data":{"status":"success"},"status":"success"},"status":"success"}`, false},
		{"python worker: call.error after a refusal (no command, no output)", "call.error",
			`{"name": "call.error", "payload": {"error": "Batch failed", "result": {"status": "FAILED"}}, "meta": null}`,
			`{"context":{"data":null,"error":"Batch failed","status":"error"},"status":"error"}`, false},
		{"ours: flat envelope", "command.completed",
			`{"event_type": "command.completed", "payload": {"result": {"status": "success", "data": {"n": 1}}}}`,
			`{"context":{"data":{"n":1},"status":"success"},"status":"success"}`, false},
		{"R-R1: {status, context: envelope}", "call.done",
			`{"event_type": "call.done", "payload": {"result": {"status": "COMPLETED", "context": {"status": "error", "error": "x"}}}}`,
			`{"context":{"error":"x","status":"error"},"status":"error"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Read("", decode(t, tt.event))
			if err != nil {
				t.Fatal(err)
			}
			got, raw, err := Result(&e, tt.typ)
			if err != nil {
				t.Fatal(err)
			}
			if s := string(jsonx.MustMarshal(got)); s != tt.want || raw != tt.raw {
				t.Fatalf("got %s (raw %v)\nwant %s (raw %v)", s, raw, tt.want, tt.raw)
			}
		})
	}
}

// TestResultRefusals: shapes neither ours nor NoETL's are refused naming the field.
func TestResultRefusals(t *testing.T) {
	for _, ev := range []string{
		`{"name": "call.done", "payload": {"result": {"status": "initialized"}}}`,
		`{"name": "command.completed", "payload": {"result": "done"}}`,
	} {
		e, err := Read("", decode(t, ev))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := Result(&e, e.Type); err == nil || !strings.HasPrefix(err.Error(), "payload.result: expected") {
			t.Errorf("%s: %v", ev, err)
		}
	}
	if _, err := Read("events[2]", decode(t, `{"name": "x", "meta": []}`)); err == nil || err.Error() != "events[2].meta: expected object, got array" {
		t.Errorf("meta as array: %v", err)
	}
}

func TestCommandIDAndAttempt(t *testing.T) {
	e, _ := Read("", decode(t, `{"name": "command.heartbeat", "payload": {"command_id": "7:s:9", "worker_id": "w"}, "meta": {"attempts": 2}}`))
	if e.CommandID() != "7:s:9" || e.Attempt() != 2 || !e.IsHeartbeat() {
		t.Fatalf("%q %d %v", e.CommandID(), e.Attempt(), e.IsHeartbeat())
	}
	e, _ = Read("", decode(t, `{"name": "call.done", "payload": {"command_id": 123}}`))
	if e.CommandID() != "123" {
		t.Fatalf("integer command id %q", e.CommandID())
	}
}

// TestFit: NoETL's worker's outputs become the data our worker reports for the
// same tool.
func TestFit(t *testing.T) {
	wrap := func(data string) map[string]any {
		return map[string]any{"status": "success", "context": map[string]any{"status": "success", "data": decode(t, data)}}
	}
	data := func(r map[string]any) any { return r["context"].(map[string]any)["data"] }

	// task_sequence: R-R4's merge in run order, ctx as _context_updates.
	seq := `{"status": "ok", "_prev": {"b": 2}, "results": {"first": {"a": 1, "x": "first"}, "second": {"b": 2, "x": "second"}},
		"ctx": {"counter": "42", "ratio": "0.5", "ok": "True", "word": "42abc", "cfg": {"t": 30}}, "metrics": {"tasks": [{"name": "first"}, {"name": "second"}]}}`
	got := data(Fit(wrap(seq), Tool{Kind: "task_sequence", Labels: []string{"first", "second"}}))
	want := decode(t, `{"a": 1, "b": 2, "x": "second", "first": {"a": 1, "x": "first"}, "second": {"b": 2, "x": "second"}, "_context_updates": {"counter": 42, "ratio": 0.5, "ok": true, "word": "42abc", "cfg": {"t": 30}}}`)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("pipeline data %v", got)
	}
	// A single tool with spec.policy keeps its own data, fitted to its kind.
	got = data(Fit(wrap(`{"status": "ok", "results": {"fetch": {"data": {"n": 1}}}, "metrics": {"tasks": [{"name": "fetch"}]}}`),
		Tool{Kind: "task_sequence", Labels: []string{"fetch"}, Kinds: []string{"http"}, Single: true}))
	if !reflect.DeepEqual(got, decode(t, `{"data": {"n": 1}, "body": {"n": 1}}`)) {
		t.Fatalf("single data %v", got)
	}
	// A failed sequence is an error envelope.
	failed := Fit(wrap(`{"status": "failed", "results": {}, "error": {"message": "no"}}`), Tool{Kind: "task_sequence"})
	if failed["status"] != "error" || failed["context"].(map[string]any)["error"] == nil {
		t.Fatalf("failed sequence %v", failed)
	}
	// http: body beside data, as our tool and NoETL's Rust tool name it.
	got = data(Fit(wrap(`{"status_code": 200, "data": {"users": []}}`), Tool{Kind: "http"}))
	if !reflect.DeepEqual(got, decode(t, `{"status_code": 200, "data": {"users": []}, "body": {"users": []}}`)) {
		t.Fatalf("http data %v", got)
	}
	// postgres: NoETL's Python worker keeps the last statement only; it is
	// also command_<count-1>, what NoETL's playbooks read.
	got = data(Fit(wrap(`{"status": "success", "columns": ["n"], "rows": [{"n": 1}], "row_count": 1, "statement_count": 2}`), Tool{Kind: "postgres"}))
	if !reflect.DeepEqual(got, decode(t, `{"status": "success", "columns": ["n"], "rows": [{"n": 1}], "row_count": 1, "statement_count": 2,
		"command_1": {"status": "success", "columns": ["n"], "rows": [{"n": 1}], "row_count": 1}}`)) {
		t.Fatalf("postgres data %v", got)
	}
	got = data(Fit(wrap(`{"status": "success", "rows": [], "statement_count": 1}`), Tool{Kind: "postgres"}))
	if c, _ := got.(map[string]any)["command_0"].(map[string]any); c == nil || c["rows"] == nil {
		t.Fatalf("postgres single statement %v", got)
	}
	// Our own shape (command_N present) is left as it is.
	ours := wrap(`{"status": "success", "rows": [], "statement_count": 1, "command_0": {"rows": []}}`)
	if !reflect.DeepEqual(Fit(ours, Tool{Kind: "postgres"}), ours) {
		t.Fatal("our postgres output changed")
	}
	// Other kinds: as they are.
	in := wrap(`{"status": "ok"}`)
	if !reflect.DeepEqual(Fit(in, Tool{Kind: "python"}), in) {
		t.Fatal("python output changed")
	}
}

// TestRustWorkerEvents reads NoETL's Rust worker's ExecutorEvent envelopes
// (noetl/worker src/executor/command.rs, emit_event_via): event_type, step,
// status, created_at, context (with command_id), event_id, worker_id,
// meta.attempts; results inline, by reference, and the shared-memory-only
// fallback.
func TestRustWorkerEvents(t *testing.T) {
	const base = `"execution_id": 7, "step": "fetch", "created_at": "2026-11-27T10:00:00.123456Z", "event_id": 313455890123456789, "worker_id": "rw-1", "meta": {"attempts": 1}`
	tests := []struct {
		name, event, want string
	}{
		{"inline success", `{"event_type": "call.done", "status": "COMPLETED", ` + base + `, "context": {"command_id": "7:fetch:9", "call_index": 0,
			"result": {"status": "success", "context": {"status": "success", "data": {"n": 1}, "duration_ms": 4}}}}`,
			`{"context":{"data":{"n":1},"duration_ms":4,"status":"success"},"status":"success"}`},
		{"a tool that reports its own error", `{"event_type": "call.done", "status": "COMPLETED", ` + base + `, "context": {"command_id": "7:fetch:9",
			"result": {"status": "error", "context": {"status": "error", "error": "exit status 3", "stderr": "boom"}}}}`,
			`{"context":{"error":"exit status 3","status":"error","stderr":"boom"},"status":"error"}`},
		{"staged by reference, no inner status", `{"event_type": "call.done", "status": "COMPLETED", ` + base + `, "context": {"command_id": "7:fetch:9",
			"result": {"status": "success", "context": {"data": {"_ref": "noetl://execution/7/result/fetch/ab12cd34"}},
			"reference": {"kind": "result_ref", "ref": "noetl://execution/7/result/fetch/ab12cd34", "store": "file", "scope": "execution",
			"meta": {"bytes": 200000}, "extracted": {"rows": [{"id": 1}]}}}}}`,
			`{"context":{"status":"success"},"reference":{"logical_uri":"noetl://execution/7/result/fetch/ab12cd34#/data","store_tier":"noetl"},"status":"success"}`},
		{"shared memory only: the step fails saying why", `{"event_type": "call.done", "status": "COMPLETED", ` + base + `, "context": {"command_id": "7:fetch:9",
			"result": {"status": "success", "reference": {"kind": "arrow_ipc", "shm_name": "/noetl-1", "byte_length": 9}}}}`,
			`{"context":{"error":"the worker kept its result in its shared memory (PUT /api/result failed), which this server cannot read","status":"error"},"status":"error"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Read("", decode(t, tt.event))
			if err != nil {
				t.Fatal(err)
			}
			if e.Type != "call.done" || e.Step != "fetch" || e.CommandID() != "7:fetch:9" || e.Attempt() != 1 || e.ClientEventID != "313455890123456789" || e.WorkerID != "rw-1" {
				t.Fatalf("read %+v", e)
			}
			got, raw, err := Result(&e, e.Type)
			if err != nil {
				t.Fatal(err)
			}
			if s := string(jsonx.MustMarshal(got)); s != tt.want || raw {
				t.Fatalf("got %s (raw %v)\nwant %s", s, raw, tt.want)
			}
		})
	}
	// command.completed with the tool's lower-case status and no result.
	e, err := Read("", decode(t, `{"event_type": "command.completed", "status": "error", `+base+`, "context": {"command_id": "7:fetch:9", "status": "error"}}`))
	if err != nil || e.Status != "error" {
		t.Fatalf("%+v %v", e, err)
	}
	if r, _, err := Result(&e, e.Type); r != nil || err != nil {
		t.Fatalf("command.completed carries no result: %v %v", r, err)
	}
}

// TestReadVariables: NoETL's three vars bodies.
func TestReadVariables(t *testing.T) {
	for body, want := range map[string]string{
		`{"token_len": 24}`: `{"token_len":24}/user_defined/`,
		`{"variables": {"a": 1, "b": {"c": 2}}, "var_type": "computed", "source_step": "s"}`:                                    `{"a":1,"b":{"c":2}}/computed/s`,
		`{"variables": [{"var_name": "a", "var_value": [1]}, {"var_name": "b", "var_value": null, "var_type": "step_result"}]}`: `{"a":[1],"b":null}/step_result/`,
	} {
		v, err := ReadVariables(decode(t, body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got := string(jsonx.MustMarshal(v.Values)) + "/" + v.Type + "/" + v.SourceStep; got != want {
			t.Errorf("%s: %s, want %s", body, got, want)
		}
	}
	for body, field := range map[string]string{
		`{}`:                "body",
		`{"variables": {}}`: "variables",
		`{"variables": 5}`:  "variables",
		`{"variables": {"a": 1}, "var_type": "x"}`:                                              "var_type",
		`{"variables": [{"var_value": 1}]}`:                                                     "variables[0].var_name",
		`{"variables": [{"var_name": "a", "var_value": 1}, {"var_name": "a", "var_value": 2}]}`: "variables[1].var_name",
	} {
		_, err := ReadVariables(decode(t, body))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: %v, want a refusal of %s", body, err, field)
		}
	}
}
