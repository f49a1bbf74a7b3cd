package noetlwire

import (
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
