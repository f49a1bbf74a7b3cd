package api_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api/apitest"
)

// TestVariables: NoETL's three body shapes set variables of a running
// execution, each set one ctx.updated event in its log; GET reads them back
// (masked to users under secret-named keys, whole to workers); an ended
// execution's variables are a conflict.
func TestVariables(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	exec := itoa(f.exec)
	bodies := []map[string]any{
		{"token_len": int64(24)}, // the Rust worker's set_var
		{"variables": map[string]any{"who": map[string]any{"name": "ann"}, "db_password": "vars-pw-5e5"}, "var_type": "computed", "source_step": "start"},
		{"variables": []any{map[string]any{"var_name": "ctx.count", "var_value": int64(3)}}},
	}
	for _, b := range bodies {
		r := must(t, a, 200, call{method: "POST", target: "/api/vars/" + exec, token: apitest.WorkerToken, body: b})
		if r.str("status") != "ok" || r.str("event_id") == "" {
			t.Fatalf("set %v: %s", b, r.Body)
		}
	}
	one := must(t, a, 200, call{method: "GET", target: "/api/vars/" + exec + "/token_len", token: apitest.WorkerToken})
	if one.json["value"] != int64(24) || one.json["var_value"] != int64(24) {
		t.Fatalf("one: %s", one.Body)
	}
	nested := must(t, a, 200, call{method: "GET", target: "/api/vars/" + exec + "/who.name", token: apitest.APIToken})
	if nested.json["value"] != "ann" {
		t.Fatalf("nested: %s", nested.Body)
	}
	must(t, a, 404, call{method: "GET", target: "/api/vars/" + exec + "/unset", token: apitest.APIToken})
	all := must(t, a, 200, call{method: "GET", target: "/api/vars/" + exec, token: apitest.APIToken})
	vars, _ := all.json["variables"].(map[string]any)
	pw, _ := vars["db_password"].(map[string]any)
	if pw["value"] != "[REDACTED]" || strings.Contains(string(all.Body), "vars-pw-5e5") {
		t.Errorf("users see a secret-named variable: %s", all.Body)
	}
	count, _ := vars["count"].(map[string]any)
	if count["value"] != int64(3) || all.json["count"] == int64(0) {
		t.Errorf("list: %s", all.Body)
	}
	if w := must(t, a, 200, call{method: "GET", target: "/api/vars/" + exec + "/db_password", token: apitest.WorkerToken}); w.json["value"] != "vars-pw-5e5" {
		t.Errorf("a worker gets the value its steps get: %s", w.Body)
	}
	ev := must(t, a, 200, call{method: "GET", target: "/api/executions/" + exec + "/events?event_type=ctx.updated", token: apitest.APIToken})
	if got, _ := ev.json["events"].([]any); len(got) != 3 {
		t.Errorf("ctx.updated events: %s", ev.Body)
	}
	// Refusals.
	must(t, a, 422, call{method: "POST", target: "/api/vars/" + exec, token: apitest.WorkerToken, body: map[string]any{"workload": int64(1)}})
	must(t, a, 422, call{method: "POST", target: "/api/vars/" + exec, token: apitest.WorkerToken, body: map[string]any{}})
	must(t, a, 200, call{method: "POST", target: "/api/executions/" + exec + "/cancel", token: apitest.APIToken, body: map[string]any{}})
	r := must(t, a, 409, call{method: "POST", target: "/api/vars/" + exec, token: apitest.WorkerToken, body: map[string]any{"late": true}})
	if !strings.Contains(r.str("error"), "CANCELLED") {
		t.Errorf("late set: %s", r.Body)
	}
}

// TestStagedResults: PUT /api/result keeps a result under a noetl://
// reference of its execution (secret-named keys masked), resolve reads it
// back as it was put, an unknown reference is 404 and a malformed one 422,
// and a body over the API's limit but under the route's is accepted.
func TestStagedResults(t *testing.T) {
	f := newFixture(t, apitest.Options{MaxBodyBytes: 32 << 10})
	a := f.s.API
	exec := itoa(f.exec)
	rows := make([]any, 2000)
	for i := range rows {
		rows[i] = map[string]any{"id": int64(i), "name": strings.Repeat("r", 40)}
	}
	data := map[string]any{"status": "success", "data": map[string]any{"rows": rows, "count": int64(2000)}, "password": "staged-pw-1"}
	r := must(t, a, 200, call{method: "PUT", target: "/api/result/" + exec, token: apitest.WorkerToken,
		body: map[string]any{"name": "fetch/all", "data": data, "scope": "execution", "source_step": "fetch/all"}})
	ref := r.str("ref")
	if !strings.HasPrefix(ref, "noetl://execution/"+exec+"/result/fetch%2Fall/") || r.str("store") != "file" || r.json["bytes"].(int64) < 32<<10 || len(r.str("sha256")) != 64 {
		t.Fatalf("put: %s", r.Body)
	}
	got := must(t, a, 200, call{method: "GET", target: "/api/result/resolve?ref=" + url.QueryEscape(ref), token: apitest.WorkerToken})
	d, _ := got.json["data"].(map[string]any)
	if d["count"] != int64(2000) || got.json["password"] != "[REDACTED]" {
		t.Fatalf("resolved: count %v password %v", d["count"], got.json["password"])
	}
	must(t, a, 404, call{method: "GET", target: "/api/result/resolve?ref=" + url.QueryEscape("noetl://execution/"+exec+"/result/x/00112233aabb"), token: apitest.WorkerToken})
	must(t, a, 422, call{method: "GET", target: "/api/result/resolve?ref=" + url.QueryEscape("file:///etc/passwd"), token: apitest.WorkerToken})
	// Unknown references in NoETL's namespace are 404, as NoETL answers them (issue 30).
	for _, ref := range []string{"noetl://execution/" + exec + "/manifest/x/00112233aabb", "noetl://execution/" + exec + "/result/x/not-hex"} {
		must(t, a, 404, call{method: "GET", target: "/api/result/resolve?ref=" + url.QueryEscape(ref), token: apitest.WorkerToken})
	}
	must(t, a, 422, call{method: "PUT", target: "/api/result/" + exec, token: apitest.WorkerToken, body: map[string]any{"name": "x", "data": int64(1), "scope": "forever"}})
	must(t, a, 404, call{method: "PUT", target: "/api/result/" + unknownExec, token: apitest.WorkerToken, body: map[string]any{"name": "x", "data": int64(1)}})
}
