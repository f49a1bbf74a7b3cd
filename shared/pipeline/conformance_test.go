package pipeline

import (
	"testing"

	"github.com/noetl-go/noetl/shared/toolresult"
)

// The set_variables step of test_vars_template_access.yaml: a one-item pipeline whose
// else rule copies the python data into ctx (R-R4, R-R5, R-R6, R-W6).
func TestConformanceVarsTemplateAccess(t *testing.T) {
	payload := `{"step": "set_variables", "args": {}, "render_context": {"workload": {"greeting": "Hello"}, "execution_id": "1"},
		"tool_config": [{"set_vars_task": {"kind": "python", "input": {},
			"code": "result = {\"counter\": 42, \"message\": \"Template access works!\", \"config\": {\"timeout\": 30, \"retries\": 3}}\n",
			"spec": {"policy": {"rules": [{"else": {"then": {"do": "continue", "set": {
				"ctx.counter": "{{ output.data.counter }}",
				"ctx.message": "{{ output.data.message }}",
				"ctx.config": "{{ output.data.config }}"}}}}]}}}}]}`
	py := ok(map[string]any{"counter": int64(42), "message": "Template access works!",
		"config": map[string]any{"timeout": int64(30), "retries": int64(3)}})
	e := run(t, payload, map[string][]toolresult.Envelope{"set_vars_task": {py}})
	wantStatus(t, e.out, toolresult.StatusSuccess)
	sameJSON(t, "data", e.out.Data, `{
		"counter": 42, "message": "Template access works!", "config": {"timeout": 30, "retries": 3},
		"set_vars_task": {"counter": 42, "message": "Template access works!", "config": {"timeout": 30, "retries": 3}},
		"_context_updates": {"counter": 42, "message": "Template access works!", "config": {"timeout": 30, "retries": 3}}}`)
	if len(e.f.calls) != 1 {
		t.Fatalf("calls = %d", len(e.f.calls))
	}
	if code := e.f.calls[0].Config["code"].(string); code[:9] != "result = " {
		t.Errorf("code changed: %q", code)
	}
}

// The fetch_page step of test_pagination_offset.yaml: a single http tool with a policy
// (R-R4 single, R-R6, R-W6, R-L9).
func TestConformancePaginationPolicy(t *testing.T) {
	payload := `{"single": true, "args": {},
		"render_context": {"ctx": {"offset": 0, "limit": 10}, "workload": {"api_url": "http://127.0.0.1:5555"}},
		"tool_config": [{"fetch_page": {"kind": "http", "url": "{{ workload.api_url }}/api/v1/users", "method": "GET",
			"params": {"offset": "{{ ctx.offset }}", "limit": "{{ ctx.limit }}"},
			"spec": {"policy": {"rules": [
				{"when": "{{ output.status == 'error' and output.error.retryable }}",
				 "then": {"do": "retry", "attempts": 5, "backoff": "exponential", "delay": 1.0}},
				{"when": "{{ output.status == 'error' }}", "then": {"do": "fail"}},
				{"else": {"then": {"do": "continue"}}}]}}}}]}`
	page := map[string]any{"users": []any{map[string]any{"id": int64(1)}}, "has_more": true}

	t.Run("503 twice then 200: success after 3 attempts, sleeps 1s 2s", func(t *testing.T) {
		e := run(t, payload, map[string][]toolresult.Envelope{"fetch_page": {
			failed("HTTP 503", httpResp(503, "busy")),
			failed("HTTP 503", httpResp(503, "busy")),
			ok(httpResp(200, page)),
		}})
		wantStatus(t, e.out, toolresult.StatusSuccess)
		if got := e.f.count("fetch_page"); got != 3 {
			t.Errorf("attempts = %d, want 3", got)
		}
		want := secs(1, 2)
		if len(e.s.got) != 2 || e.s.got[0] != want[0] || e.s.got[1] != want[1] {
			t.Errorf("sleeps = %v, want %v", e.s.got, want)
		}
		if e.beats != 2 {
			t.Errorf("heartbeats = %d, want 2", e.beats)
		}
		// single: the http data itself, no label key.
		sameJSON(t, "data", e.out.Data, `{"status_code": 200, "headers": {}, "body": {"users": [{"id": 1}], "has_more": true}}`)
		sameJSON(t, "params", e.f.calls[2].Config["params"], `{"offset": 0, "limit": 10}`)
		sameJSON(t, "url", e.f.calls[0].Config["url"], `"http://127.0.0.1:5555/api/v1/users"`)
	})
	t.Run("404: fail at once", func(t *testing.T) {
		e := run(t, payload, map[string][]toolresult.Envelope{"fetch_page": {failed("HTTP 404", httpResp(404, "nope"))}})
		wantStatus(t, e.out, toolresult.StatusError)
		if got := e.f.count("fetch_page"); got != 1 {
			t.Errorf("attempts = %d, want 1", got)
		}
		if len(e.s.got) != 0 || e.beats != 0 {
			t.Errorf("sleeps %v heartbeats %d, want none", e.s.got, e.beats)
		}
		if got := *e.out.Error; got != (toolresult.ErrorInfo{Message: "HTTP 404", Kind: toolresult.KindClientError, Status: 404}) {
			t.Errorf("error = %+v", got)
		}
		sameJSON(t, "data", e.out.Data, `{"status_code": 404, "headers": {}, "body": "nope"}`)
	})
	t.Run("503 five times: retries exhausted, sleeps 1 2 4 8", func(t *testing.T) {
		e := run(t, payload, map[string][]toolresult.Envelope{"fetch_page": {failed("HTTP 503", httpResp(503, nil))}})
		wantStatus(t, e.out, toolresult.StatusError)
		if got := e.f.count("fetch_page"); got != 5 {
			t.Errorf("attempts = %d, want 5", got)
		}
		if len(e.s.got) != 4 || e.s.got[3] != secs(8)[0] {
			t.Errorf("sleeps = %v", e.s.got)
		}
		if e.out.Error.Kind != toolresult.KindServerError || e.out.Error.Status != 503 || !e.out.Error.Retryable {
			t.Errorf("error = %+v", e.out.Error)
		}
		wantErrContains(t, e.out, "retries exhausted after 5 attempts", "HTTP 503")
	})
}
