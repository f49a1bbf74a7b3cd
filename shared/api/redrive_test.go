package api_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/controlplane"
)

// TestRedriveRequests: the redrive routes' answers to what they refuse (409
// naming the status, 422 naming the field, 413 over the bulk limit) and
// bulk's per-execution answers: each id once, a second redrive refused.
func TestRedriveRequests(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	exec := strconv.FormatInt(f.exec, 10)
	one := func(want int, body any, text string) {
		t.Helper()
		r := must(t, a, want, call{method: "POST", target: "/api/executions/" + exec + "/redrive", token: apitest.APIToken, body: body})
		if !strings.Contains(r.str("error"), text) {
			t.Errorf("redrive %v: %q, want it to name %q", body, r.str("error"), text)
		}
	}
	one(409, map[string]any{}, "is RUNNING")
	must(t, a, 200, call{method: "POST", target: "/api/executions/" + exec + "/cancel", token: apitest.APIToken, body: map[string]any{}})
	one(422, map[string]any{"version": int64(0)}, "version:")
	one(422, map[string]any{"version": int64(9)}, "version: playbook tests/three has no version 9")

	bulk := func(want int, ids []any) result {
		t.Helper()
		return must(t, a, want, call{method: "POST", target: "/api/executions/redrive", token: apitest.APIToken,
			body: map[string]any{"executions": ids}})
	}
	if r := bulk(422, []any{}); !strings.HasPrefix(r.str("error"), "executions:") {
		t.Errorf("an empty bulk redrive: %q, want it to name executions", r.str("error"))
	}
	// The request's bound is the control plane's (wire's max tag = MaxRedriveBatch).
	many := make([]any, controlplane.MaxRedriveBatch+1)
	for i := range many {
		many[i] = exec
	}
	if r := bulk(413, many); !strings.Contains(r.str("error"), strconv.Itoa(controlplane.MaxRedriveBatch)) {
		t.Errorf("%d ids: %q, want the limit of %d named", len(many), r.str("error"), controlplane.MaxRedriveBatch)
	}
	r := bulk(200, []any{exec, exec, unknownExec})
	items, _ := r.json["executions"].([]any)
	if r.json["redriven"] != int64(1) || r.json["refused"] != int64(1) || len(items) != 2 {
		t.Fatalf("bulk redrive of a cancelled, the same again and an unknown execution: %s", r.Body)
	}
	first, second := items[0].(map[string]any), items[1].(map[string]any)
	if first["outcome"] != "redriven" || first["redriven"].(map[string]any)["previous_status"] != "CANCELLED" ||
		second["outcome"] != "refused" || second["code"] != int64(404) {
		t.Fatalf("bulk answers: %s", r.Body)
	}
	one(409, map[string]any{}, "is RUNNING")
	// A version number names a version of one playbook: executions of two are refused whole.
	reg := must(t, a, 200, call{method: "POST", target: "/api/catalog/register", token: apitest.APIToken,
		body: map[string]any{"content": strings.Replace(apitest.ThreeSteps, "tests/three", "tests/other", 1)}})
	other := must(t, a, 200, call{method: "POST", target: "/api/execute", token: apitest.APIToken, body: map[string]any{"path": reg.str("path")}})
	r = must(t, a, 422, call{method: "POST", target: "/api/executions/redrive", token: apitest.APIToken,
		body: map[string]any{"executions": []any{exec, other.json["execution_id"]}, "version": int64(1)}})
	if msg := r.str("error"); !strings.HasPrefix(msg, "executions:") || !strings.Contains(msg, "tests/three") || !strings.Contains(msg, "tests/other") {
		t.Errorf("a bulk redrive of two playbooks under a version: %q, want both paths named", msg)
	}
	r = bulk(200, []any{exec})
	if item := r.json["executions"].([]any)[0].(map[string]any); item["code"] != int64(409) || !strings.Contains(item["error"].(string), "RUNNING") {
		t.Fatalf("a second bulk redrive: %s", r.Body)
	}
	if n := len(f.s.Pending(t, f.exec)); n != 1 {
		t.Errorf("%d pending commands after the redrive, want start's one", n)
	}
}
