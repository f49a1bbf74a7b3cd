package pipeline

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// R-R4: merge map data in order (later wins), labels win, non-map data only under its
// label; single keeps the plain data.
func TestResultShape(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		script  map[string][]toolresult.Envelope
		want    string
	}{
		{
			name:    "R-R4 later items win, labels win over data keys",
			payload: `{"tool_config": [{"a": {"kind": "t"}}, {"b": {"kind": "t"}}]}`,
			script: map[string][]toolresult.Envelope{
				"a": {ok(map[string]any{"x": int64(1), "y": int64(1), "b": "from a"})},
				"b": {ok(map[string]any{"y": int64(2)})},
			},
			want: `{"x": 1, "y": 2, "a": {"x": 1, "y": 1, "b": "from a"}, "b": {"y": 2}}`,
		},
		{
			name:    "R-R4 non-map data appears only under its label",
			payload: `{"tool_config": [{"a": {"kind": "t"}}, {"b": {"kind": "t"}}, {"c": {"kind": "t"}}]}`,
			script: map[string][]toolresult.Envelope{
				"a": {ok([]any{int64(1), int64(2)})},
				"b": {ok("text")},
				"c": {ok(nil)},
			},
			want: `{"a": [1, 2], "b": "text", "c": null}`,
		},
		{
			name:    "R-R4 single keeps its plain data, no label key",
			payload: `{"single": true, "tool_config": [{"fetch": {"kind": "t", "spec": {"policy": {"rules": []}}}}]}`,
			script:  map[string][]toolresult.Envelope{"fetch": {ok(map[string]any{"v": int64(7)})}},
			want:    `{"v": 7}`,
		},
		{
			name:    "R-R4 single with list data stays a list",
			payload: `{"single": true, "tool_config": [{"fetch": {"kind": "t"}}]}`,
			script:  map[string][]toolresult.Envelope{"fetch": {ok([]any{"a"})}},
			want:    `["a"]`,
		},
		{
			name:    "R-R4 NoETL {name, kind} item form is accepted",
			payload: `{"tool_config": [{"name": "a", "kind": "t"}]}`,
			script:  map[string][]toolresult.Envelope{"a": {ok(map[string]any{"k": "v"})}},
			want:    `{"k": "v", "a": {"k": "v"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := run(t, tt.payload, tt.script)
			wantStatus(t, e.out, toolresult.StatusSuccess)
			sameJSON(t, "data", e.out.Data, tt.want)
		})
	}
}

// R-R5, R-W1: ctx. writes become _context_updates (prefix dropped, nested path kept);
// iter. and bare keys stay local.
func TestContextUpdates(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		want    string
	}{
		{
			name: "R-R5 ctx keys reported without prefix, nested path kept",
			payload: `{"tool_config": [{"a": {"kind": "t", "set": {
				"ctx.n": "{{ output.ran }}", "ctx.config.timeout": 30, "iter.local": 1, "bare": 2}}}]}`,
			want: `{"ran": "a", "a": {"ran": "a"}, "_context_updates": {"n": "a", "config.timeout": 30}}`,
		},
		{
			name:    "R-R5 no ctx writes: no _context_updates key",
			payload: `{"tool_config": [{"a": {"kind": "t", "set": {"iter.x": 1, "y": 2}}}]}`,
			want:    `{"ran": "a", "a": {"ran": "a"}}`,
		},
		{
			name:    "R-R5 single with updates: added to the plain data",
			payload: `{"single": true, "tool_config": [{"a": {"kind": "t", "set": {"ctx.k": "{{ output.ran }}"}}}]}`,
			want:    `{"ran": "a", "_context_updates": {"k": "a"}}`,
		},
		{
			name: "R-R5 later writes to one key win",
			payload: `{"tool_config": [{"a": {"kind": "t", "set": {"ctx.k": 1}}},
				{"b": {"kind": "t", "set": {"ctx.k": 2}}}]}`,
			want: `{"ran": "b", "a": {"ran": "a"}, "b": {"ran": "b"}, "_context_updates": {"k": 2}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := run(t, tt.payload, nil)
			wantStatus(t, e.out, toolresult.StatusSuccess)
			sameJSON(t, "data", e.out.Data, tt.want)
		})
	}
}

// R-W1 and worker.md §3: what each item renders against.
func TestRunningContext(t *testing.T) {
	payload := `{
		"args": {"s": "step", "shared": "from args"},
		"render_context": {"ctx": {"keep": 1, "a": 1}, "iter": {"i": 5}, "execution_id": "77", "workload": {"w": "W"}},
		"tool_config": [
			{"first": {"kind": "t", "set": {
				"iter.x": "{{ output.ran }}",
				"ctx.y.z": 2,
				"bare": "{{ output.ran }}",
				"ctx.a": 2,
				"ctx.b": "{{ ctx.a }}"}}},
			{"second": {"kind": "echo", "input": {
				"x": "{{ iter.x }}", "i": "{{ iter.i }}", "yz": "{{ ctx.y.z }}", "keep": "{{ ctx.keep }}",
				"bare": "{{ bare }}", "label": "{{ first.ran }}", "prev": "{{ _prev.ran }}",
				"results": "{{ _results.first.ran }}", "eid": "{{ execution_id }}", "w": "{{ workload.w }}",
				"arg": "{{ args.s }}", "a": "{{ ctx.a }}", "b": "{{ ctx.b }}", "mixed": "n={{ ctx.y.z }}",
				"shared": "from item"}}}
		]}`
	e := run(t, payload, nil)
	wantStatus(t, e.out, toolresult.StatusSuccess)
	d := e.out.Data.(map[string]any)
	sameJSON(t, "R-W1 second item's input", d["second"], `{
		"x": "first", "i": 5, "yz": 2, "keep": 1, "bare": "first", "label": "first", "prev": "first",
		"results": "first", "eid": "77", "w": "W", "arg": "step", "a": 2, "b": 1, "mixed": "n=2",
		"s": "step", "shared": "from item"}`)
	// R-W3 simultaneous: ctx.b saw ctx.a as it was before the set (1), not 2.
	sameJSON(t, "R-R5 updates", d["_context_updates"], `{"y.z": 2, "a": 2, "b": 1}`)
}

// The item handed to Exec: config rendered (python code too, as NoETL renders it),
// set/spec/input removed, python's Context the running context, input
// = args merged under the item's input (item wins).
func TestExecItem(t *testing.T) {
	payload := `{
		"args": {"a": 1, "b": 1},
		"render_context": {"workload": {"u": "http://x"}},
		"tool_config": [{"p": {"kind": "python", "code": "x = '{{ workload.u }}'",
			"url": "{{ workload.u }}/y", "headers": {"h": ["{{ workload.u }}"]}, "n": 3,
			"input": {"b": 2, "c": "{{ workload.u }}"},
			"set": {"ctx.q": 1}, "spec": {"policy": {"rules": [{"else": {"do": "continue"}}]}}}}]}`
	e := run(t, payload, nil)
	wantStatus(t, e.out, toolresult.StatusSuccess)
	if len(e.f.calls) != 1 {
		t.Fatalf("calls = %d", len(e.f.calls))
	}
	it := e.f.calls[0]
	if it.Label != "p" || it.Kind != "python" || it.Attempt != 1 {
		t.Errorf("item = %s/%s attempt %d", it.Label, it.Kind, it.Attempt)
	}
	if u := it.Context["workload"]; !reflect.DeepEqual(u, map[string]any{"u": "http://x"}) {
		t.Errorf("python's context: workload = %v", u)
	}
	sameJSON(t, "config", it.Config, `{"kind": "python", "code": "x = 'http://x'",
		"url": "http://x/y", "headers": {"h": ["http://x"]}, "n": 3}`)
	sameJSON(t, "input", it.Input, `{"a": 1, "b": 2, "c": "http://x"}`)

	// args is an alias of input; with no own input the item still gets the step args.
	e = run(t, `{"args": {"a": 1}, "tool_config": [{"p": {"kind": "t", "args": {"b": "{{ args.a }}"}}}, {"q": {"kind": "t"}}]}`, nil)
	sameJSON(t, "args alias", e.f.calls[0].Input, `{"a": 1, "b": 1}`)
	sameJSON(t, "no own input", e.f.calls[1].Input, `{"a": 1}`)
	if _, has := e.f.calls[0].Config["args"]; has {
		t.Error("args left in config")
	}
}

// Exec mutating what it got, and the caller's payload, stay isolated.
func TestIsolation(t *testing.T) {
	p := obj(t, `{"args": {"a": {"deep": 1}}, "render_context": {"ctx": {"c": {"d": 1}}},
		"tool_config": [{"x": {"kind": "t", "input": {"v": "{{ ctx.c }}"}, "set": {"ctx.c.d": 2}}},
		{"y": {"kind": "echo", "input": {"d": "{{ ctx.c.d }}"}}}]}`)
	before := string(jsonx.MustMarshal(p))
	mutating := func(_ context.Context, it Item) toolresult.Envelope {
		it.Input["a"].(map[string]any)["deep"] = "mutated"
		it.Input["v"] = "mutated"
		return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: it.Input}
	}
	out := Run(context.Background(), p, Options{Exec: mutating, Now: func() time.Time { return fixedNow }})
	wantStatus(t, out, toolresult.StatusSuccess)
	if after := string(jsonx.MustMarshal(p)); after != before {
		t.Errorf("payload mutated:\n before %s\n after  %s", before, after)
	}
	sameJSON(t, "y saw ctx.c.d", out.Data.(map[string]any)["y"].(map[string]any)["d"], `2`)
}

// R-R6: rule selection.
func TestPolicyRules(t *testing.T) {
	errOut := failed("boom", map[string]any{"partial": int64(1)})
	tests := []struct {
		name    string
		rules   string
		outcome toolresult.Envelope
		status  string
		runsB   int    // how many times the next item ran
		updates string // expected _context_updates ("" = none)
	}{
		{"R-R6 first match wins", `[{"when": "{{ true }}", "then": {"do": "continue", "set": {"ctx.r": 1}}},
			{"when": "{{ true }}", "then": {"do": "fail", "set": {"ctx.r": 2}}}]`, errOut, toolresult.StatusSuccess, 1, `{"r": 1}`},
		{"R-R6 false when skipped", `[{"when": "{{ output.status == 'success' }}", "then": {"do": "fail"}},
			{"when": "{{ output.error.message == 'boom' }}", "then": {"do": "continue", "set": {"ctx.r": 2}}}]`, errOut, toolresult.StatusSuccess, 1, `{"r": 2}`},
		{"R-R6 else with then", `[{"when": "{{ false }}", "then": {"do": "fail"}}, {"else": {"then": {"do": "continue", "set": {"ctx.r": "else"}}}}]`,
			errOut, toolresult.StatusSuccess, 1, `{"r": "else"}`},
		{"R-W6 else shorthand {do, set}", `[{"else": {"do": "continue", "set": {"ctx.r": "short"}}}]`, errOut, toolresult.StatusSuccess, 1, `{"r": "short"}`},
		{"R-R6 no match on error fails", `[{"when": "{{ false }}", "then": {"do": "continue"}}]`, errOut, toolresult.StatusError, 0, ""},
		{"R-R6 no match on success continues", `[{"when": "{{ false }}", "then": {"do": "fail"}}]`, ok(map[string]any{}), toolresult.StatusSuccess, 1, ""},
		{"R-R6 no rules on error fails", `[]`, errOut, toolresult.StatusError, 0, ""},
		{"R-T1 when: mixed text false is false", `[{"when": "{{ 'fal' }}se", "then": {"do": "fail"}}]`, ok(map[string]any{}), toolresult.StatusSuccess, 1, ""},
		{"then without do continues", `[{"when": "{{ true }}", "then": {"set": {"ctx.r": 3}}}]`, errOut, toolresult.StatusSuccess, 1, `{"r": 3}`},
		{"then without when always matches", `[{"then": {"do": "fail"}}]`, ok(map[string]any{}), toolresult.StatusError, 0, ""},
		{"R-R6 fail on a success fails", `[{"when": "{{ output.data.bad }}", "then": {"do": "fail"}}]`,
			ok(map[string]any{"bad": true}), toolresult.StatusError, 0, ""},
		{"R-R6 then.set applies even when the rule fails", `[{"else": {"do": "fail", "set": {"ctx.why": "{{ output.error.message }}"}}}]`,
			errOut, toolresult.StatusError, 0, `{"why": "boom"}`},
		{"R-R6 timeout with no match fails as timeout", `[]`,
			toolresult.Envelope{Status: toolresult.StatusTimeout, Error: &toolresult.ErrorInfo{Message: "took too long"}}, toolresult.StatusTimeout, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := `{"tool_config": [{"a": {"kind": "t", "spec": {"policy": {"rules": ` + tt.rules + `}}}}, {"b": {"kind": "t"}}]}`
			e := run(t, payload, map[string][]toolresult.Envelope{"a": {tt.outcome}})
			wantStatus(t, e.out, tt.status)
			if got := e.f.count("b"); got != tt.runsB {
				t.Errorf("b ran %d times, want %d", got, tt.runsB)
			}
			upd, has := e.out.Data.(map[string]any)["_context_updates"]
			if tt.updates == "" {
				if has {
					t.Errorf("unexpected _context_updates %v", upd)
				}
			} else {
				sameJSON(t, "_context_updates", upd, tt.updates)
			}
		})
	}
}

// worker.md §3: continue on an error records the item's data for later items; the
// first failing item fails the pipeline with what ran so far.
func TestContinueAndFail(t *testing.T) {
	t.Run("R-R6 continue on error records data", func(t *testing.T) {
		e := run(t, `{"tool_config": [
			{"a": {"kind": "t", "spec": {"policy": {"rules": [{"else": {"then": {"do": "continue"}}}]}}}},
			{"b": {"kind": "echo", "input": {"seen": "{{ a.partial }}", "prev": "{{ _prev.partial }}"}}}]}`,
			map[string][]toolresult.Envelope{"a": {failed("boom", map[string]any{"partial": int64(1)})}})
		wantStatus(t, e.out, toolresult.StatusSuccess)
		sameJSON(t, "data", e.out.Data, `{"partial": 1, "seen": 1, "prev": 1,
			"a": {"partial": 1}, "b": {"seen": 1, "prev": 1}}`)
	})
	t.Run("worker.md §3 first failing item fails the pipeline", func(t *testing.T) {
		e := run(t, `{"tool_config": [{"a": {"kind": "t"}}, {"b": {"kind": "t"}}, {"c": {"kind": "t"}}]}`,
			map[string][]toolresult.Envelope{"b": {{Status: toolresult.StatusError, Data: map[string]any{"why": "x"}, Error: &toolresult.ErrorInfo{Message: "b broke"},
				Stderr: "trace", ExitCode: new(1)}}})
		wantStatus(t, e.out, toolresult.StatusError)
		if e.out.Error.Message != "b broke" || e.out.Error.Kind != toolresult.KindTool {
			t.Errorf("error = %+v", e.out.Error)
		}
		if e.f.count("c") != 0 {
			t.Error("c ran after b failed")
		}
		// What ran so far, the failing item included; its stderr and exit code ride along.
		sameJSON(t, "data", e.out.Data, `{"ran": "a", "why": "x", "a": {"ran": "a"}, "b": {"why": "x"}}`)
		if e.out.Stderr != "trace" || e.out.ExitCode == nil || *e.out.ExitCode != 1 {
			t.Errorf("stderr/exit = %q/%v", e.out.Stderr, e.out.ExitCode)
		}
	})
	t.Run("failing item's set is not applied, earlier ctx writes are reported", func(t *testing.T) {
		e := run(t, `{"tool_config": [{"a": {"kind": "t", "set": {"ctx.x": 1}}}, {"b": {"kind": "t", "set": {"ctx.y": 2}}}]}`,
			map[string][]toolresult.Envelope{"b": {failed("no", nil)}})
		wantStatus(t, e.out, toolresult.StatusError)
		sameJSON(t, "updates", e.out.Data.(map[string]any)["_context_updates"], `{"x": 1}`)
	})
}

// R-R6 item set vs then.set: then.set sees the envelope, item set sees the data, and the
// item set runs after then.set (it can read what then.set wrote).
func TestSetOutputBinding(t *testing.T) {
	e := run(t, `{"tool_config": [
		{"a": {"kind": "t",
			"spec": {"policy": {"rules": [{"else": {"do": "continue", "set": {"ctx.st": "{{ output.status }}", "ctx.d": "{{ output.data.v }}"}}}]}},
			"set": {"ctx.v": "{{ output.v }}", "ctx.st_seen": "{{ ctx.st }}", "ctx.env_status": "{{ output.status }}"}}}]}`,
		map[string][]toolresult.Envelope{"a": {ok(map[string]any{"v": int64(9)})}})
	wantStatus(t, e.out, toolresult.StatusSuccess)
	sameJSON(t, "updates", e.out.Data.(map[string]any)["_context_updates"],
		`{"st": "success", "d": 9, "v": 9, "st_seen": "success", "env_status": null}`)
}

// R-R6, R-L9: retry with attempts, delay and backoff through the injected Sleeper.
func TestRetry(t *testing.T) {
	tests := []struct {
		name     string
		then     string
		outcomes []toolresult.Envelope
		status   string
		runs     int
		sleeps   []time.Duration
	}{
		{"R-R6 retry none backoff fixed delay", `{"do": "retry", "attempts": 3, "delay": 0.5, "backoff": "none"}`,
			[]toolresult.Envelope{failed("e1", nil), failed("e2", nil), ok(nil)}, toolresult.StatusSuccess, 3, secs(0.5, 0.5)},
		{"R-R6 retry linear d*k", `{"do": "retry", "attempts": 4, "delay": 2, "backoff": "linear"}`,
			[]toolresult.Envelope{failed("e", nil)}, toolresult.StatusError, 4, secs(2, 4, 6)},
		{"R-R6 retry exponential d*2^(k-1)", `{"do": "retry", "attempts": 5, "delay": 1, "backoff": "exponential"}`,
			[]toolresult.Envelope{failed("e", nil)}, toolresult.StatusError, 5, secs(1, 2, 4, 8)},
		{"retry defaults: 3 attempts, 1s, no backoff", `{"do": "retry"}`,
			[]toolresult.Envelope{failed("e", nil)}, toolresult.StatusError, 3, secs(1, 1)},
		{"retry delays capped at 300s", `{"do": "retry", "attempts": 4, "delay": 100, "backoff": "exponential"}`,
			[]toolresult.Envelope{failed("e", nil)}, toolresult.StatusError, 4, secs(100, 200, 300)},
		{"retry attempts 1 means no retry", `{"do": "retry", "attempts": 1}`,
			[]toolresult.Envelope{failed("e", nil)}, toolresult.StatusError, 1, nil},
		{"retry exhausted on a timeout keeps status timeout", `{"do": "retry", "attempts": 2, "delay": 0}`,
			[]toolresult.Envelope{{Status: toolresult.StatusTimeout, Error: &toolresult.ErrorInfo{Message: "slow"}}}, toolresult.StatusTimeout, 2, secs(0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			payload := `{"tool_config": [{"a": {"kind": "t", "spec": {"policy": {"rules": [
				{"when": "{{ output.status != 'success' }}", "then": ` + tt.then + `}]}}}}]}`
			e := run(t, payload, map[string][]toolresult.Envelope{"a": tt.outcomes})
			wantStatus(t, e.out, tt.status)
			if got := e.f.count("a"); got != tt.runs {
				t.Errorf("runs = %d, want %d", got, tt.runs)
			}
			if !slices.Equal(e.s.got, tt.sleeps) {
				t.Errorf("sleeps = %v, want %v", e.s.got, tt.sleeps)
			}
			// R-L9: one heartbeat per wait between attempts.
			if e.beats != len(tt.sleeps) {
				t.Errorf("heartbeats = %d, want %d", e.beats, len(tt.sleeps))
			}
			for i, c := range e.f.calls {
				if c.Attempt != i+1 {
					t.Errorf("call %d attempt = %d", i, c.Attempt)
				}
			}
			if tt.status != toolresult.StatusSuccess {
				wantErrContains(t, e.out, "retries exhausted after "+attempts(tt.runs))
			}
		})
	}
}

// R-R6: each retry renders afresh, so a counter kept by then.set reaches the next try.
func TestRetryRendersAfresh(t *testing.T) {
	e := run(t, `{"render_context": {"iter": {"tries": 0}}, "tool_config": [{"a": {"kind": "t",
		"input": {"try": "{{ iter.tries }}"},
		"spec": {"policy": {"rules": [{"when": "{{ output.status == 'error' }}",
			"then": {"do": "retry", "attempts": 3, "delay": 0, "set": {"iter.tries": "{{ iter.tries + 1 }}"}}}]}}}}]}`,
		map[string][]toolresult.Envelope{"a": {failed("e1", nil), failed("e2", nil), failed("last one", nil)}})
	wantStatus(t, e.out, toolresult.StatusError)
	var tries []any
	for _, c := range e.f.calls {
		tries = append(tries, c.Input["try"])
	}
	sameJSON(t, "tries", tries, `[0, 1, 2]`)
	// Exhaustion: the last attempt's error, never a re-evaluation loop.
	wantErrContains(t, e.out, "retries exhausted after 3 attempts", "last one")
}

// Exhausting a retry on a successful outcome (polling) fails with a clear error.
func TestRetryExhaustedOnSuccess(t *testing.T) {
	e := run(t, `{"tool_config": [{"poll": {"kind": "t", "spec": {"policy": {"rules": [
		{"when": "{{ not output.data.done }}", "then": {"do": "retry", "attempts": 2, "delay": 3}}]}}}}]}`,
		map[string][]toolresult.Envelope{"poll": {ok(map[string]any{"done": false})}})
	wantStatus(t, e.out, toolresult.StatusError)
	wantErrContains(t, e.out, `item "poll"`, "rules[0]", "retries exhausted after 2 attempts")
	if e.out.Error.Kind != toolresult.KindTool || e.out.Error.Retryable {
		t.Errorf("error = %+v", e.out.Error)
	}
	sameJSON(t, "data keeps the last outcome", e.out.Data, `{"done": false, "poll": {"done": false}}`)
}

// R-R6: break stops successfully; jump continues at the target; a jump loop is bounded.
func TestBreakAndJump(t *testing.T) {
	t.Run("R-R6 break stops the pipeline successfully", func(t *testing.T) {
		e := run(t, `{"tool_config": [
			{"a": {"kind": "t", "set": {"ctx.a": 1}, "spec": {"policy": {"rules": [{"else": {"do": "break"}}]}}}},
			{"b": {"kind": "t"}}]}`, map[string][]toolresult.Envelope{"a": {failed("ignored", map[string]any{"k": int64(1)})}})
		wantStatus(t, e.out, toolresult.StatusSuccess)
		if e.f.count("b") != 0 {
			t.Error("b ran after break")
		}
		sameJSON(t, "data", e.out.Data, `{"k": 1, "a": {"k": 1}, "_context_updates": {"a": 1}}`)
	})
	t.Run("R-R6 jump back loops until a rule says continue", func(t *testing.T) {
		e := run(t, `{"render_context": {"iter": {"n": 0}}, "tool_config": [
			{"a": {"kind": "echo", "input": {"n": "{{ iter.n }}"}}},
			{"b": {"kind": "t", "spec": {"policy": {"rules": [
				{"when": "{{ iter.n < 2 }}", "then": {"do": "jump", "to": "a", "set": {"iter.n": "{{ iter.n + 1 }}"}}},
				{"else": {"do": "continue"}}]}}}},
			{"c": {"kind": "echo", "input": {"final": "{{ iter.n }}"}}}]}`, nil)
		wantStatus(t, e.out, toolresult.StatusSuccess)
		if e.f.count("a") != 3 || e.f.count("b") != 3 || e.f.count("c") != 1 {
			t.Errorf("runs a=%d b=%d c=%d, want 3 3 1", e.f.count("a"), e.f.count("b"), e.f.count("c"))
		}
		d := e.out.Data.(map[string]any)
		sameJSON(t, "a's latest data", d["a"], `{"n": 2}`)
		sameJSON(t, "c", d["c"], `{"final": 2}`)
	})
	t.Run("R-R6 jump forward skips items", func(t *testing.T) {
		e := run(t, `{"tool_config": [
			{"a": {"kind": "t", "spec": {"policy": {"rules": [{"else": {"do": "jump", "to": "c"}}]}}}},
			{"b": {"kind": "t"}}, {"c": {"kind": "t"}}]}`, nil)
		wantStatus(t, e.out, toolresult.StatusSuccess)
		if e.f.count("b") != 0 || e.f.count("c") != 1 {
			t.Errorf("b=%d c=%d", e.f.count("b"), e.f.count("c"))
		}
		sameJSON(t, "data", e.out.Data, `{"ran": "c", "a": {"ran": "a"}, "c": {"ran": "c"}}`)
	})
	t.Run("R-R4 merge order follows the latest run", func(t *testing.T) {
		// a runs, b runs, then a again (via jump from b once): a's data is the latest.
		e := run(t, `{"render_context": {"iter": {"j": 0}}, "tool_config": [
			{"a": {"kind": "t"}},
			{"b": {"kind": "t", "spec": {"policy": {"rules": [
				{"when": "{{ iter.j == 0 }}", "then": {"do": "jump", "to": "a", "set": {"iter.j": 1}}},
				{"else": {"do": "break"}}]}}}}]}`,
			map[string][]toolresult.Envelope{
				"a": {ok(map[string]any{"k": "a1"}), ok(map[string]any{"k": "a2"})},
				"b": {ok(map[string]any{"k": "b1"}), ok(map[string]any{"k": "b2"})},
			})
		wantStatus(t, e.out, toolresult.StatusSuccess)
		sameJSON(t, "data", e.out.Data, `{"k": "b2", "a": {"k": "a2"}, "b": {"k": "b2"}}`)
	})
	t.Run("endless jump loop fails after DefaultMaxRuns runs", func(t *testing.T) {
		e := run(t, `{"tool_config": [
			{"a": {"kind": "t"}},
			{"b": {"kind": "t", "spec": {"policy": {"rules": [{"else": {"do": "jump", "to": "a"}}]}}}}]}`, nil)
		wantStatus(t, e.out, toolresult.StatusError)
		if len(e.f.calls) != DefaultMaxRuns {
			t.Errorf("calls = %d, want %d", len(e.f.calls), DefaultMaxRuns)
		}
		wantErrContains(t, e.out, "1000 tool runs", "does not end")
	})
}

// R-W6: the rule output's error kind, HTTP status and retryable per outcome.
func TestErrorKinds(t *testing.T) {
	tests := []struct {
		name    string
		kind    string // tool kind
		outcome toolresult.Envelope
		output  string // `output` as rules see it
	}{
		{"R-W6 429 rate_limit retryable", "http", failed("HTTP 429", httpResp(429, nil)),
			`{"status": "error", "error": {"message": "HTTP 429", "kind": "rate_limit", "status": 429, "retryable": true}, "http": {"status": 429}}`},
		{"R-W6 500 server_error retryable", "http", failed("HTTP 500", httpResp(500, nil)),
			`{"status": "error", "error": {"message": "HTTP 500", "kind": "server_error", "status": 500, "retryable": true}, "http": {"status": 500}}`},
		{"R-W6 503 server_error retryable", "http", failed("HTTP 503", httpResp(503, nil)),
			`{"status": "error", "error": {"message": "HTTP 503", "kind": "server_error", "status": 503, "retryable": true}, "http": {"status": 503}}`},
		{"R-W6 401 auth", "http", failed("HTTP 401", httpResp(401, nil)),
			`{"status": "error", "error": {"message": "HTTP 401", "kind": "auth", "status": 401, "retryable": false}, "http": {"status": 401}}`},
		{"R-W6 403 auth", "http", failed("HTTP 403", httpResp(403, nil)),
			`{"status": "error", "error": {"message": "HTTP 403", "kind": "auth", "status": 403, "retryable": false}, "http": {"status": 403}}`},
		{"R-W6 404 client_error", "http", failed("HTTP 404", httpResp(404, nil)),
			`{"status": "error", "error": {"message": "HTTP 404", "kind": "client_error", "status": 404, "retryable": false}, "http": {"status": 404}}`},
		{"R-W6 400 client_error", "http", failed("HTTP 400", httpResp(400, nil)),
			`{"status": "error", "error": {"message": "HTTP 400", "kind": "client_error", "status": 400, "retryable": false}, "http": {"status": 400}}`},
		{"R-W6 http connection error has no status", "http",
			toolresult.Envelope{Status: toolresult.StatusError, Error: &toolresult.ErrorInfo{Message: "refused", Kind: toolresult.KindConnection}},
			`{"status": "error", "error": {"message": "refused", "kind": "connection", "status": null, "retryable": true}, "http": {"status": null}}`},
		{"R-W6 timeout status is kind timeout, retryable", "http",
			toolresult.Envelope{Status: toolresult.StatusTimeout, Error: &toolresult.ErrorInfo{Message: "deadline"}},
			`{"status": "timeout", "error": {"message": "deadline", "kind": "timeout", "status": null, "retryable": true}, "http": {"status": null}}`},
		{"R-W6 python error is kind tool, status null", "python",
			toolresult.Envelope{Status: toolresult.StatusError, Data: map[string]any{"status_code": int64(500)}, Error: &toolresult.ErrorInfo{Message: "ValueError: x", Status: 500}},
			`{"status": "error", "error": {"message": "ValueError: x", "kind": "tool", "status": null, "retryable": false}, "http": {"status": null}}`},
		{"R-W6 http success carries http.status, error null", "http", ok(httpResp(200, "hi")),
			`{"status": "success", "error": null, "http": {"status": 200}}`},
		{"R-R2 a stray error on success is dropped", "python",
			toolresult.Envelope{Status: toolresult.StatusSuccess, Data: "d", Error: &toolresult.ErrorInfo{Message: "ignored"}},
			`{"status": "success", "error": null, "http": {"status": null}}`},
		{"unknown status becomes a tool error", "python", toolresult.Envelope{Status: "weird"},
			`{"status": "error", "error": {"message": "tool returned unknown status \"weird\"", "kind": "tool", "status": null, "retryable": false}, "http": {"status": null}}`},
		{"Exec retryable flag does not override R-R6", "python",
			toolresult.Envelope{Status: toolresult.StatusError, Error: &toolresult.ErrorInfo{Message: "m", Retryable: true}},
			`{"status": "error", "error": {"message": "m", "kind": "tool", "status": null, "retryable": false}, "http": {"status": null}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// then.set captures the rule's output (minus data, checked elsewhere, and
			// response, the same data under NoETL's name).
			payload := `{"tool_config": [{"x": {"kind": "` + tt.kind + `", "spec": {"policy": {"rules": [
				{"else": {"do": "continue", "set": {"ctx.o": "{{ output }}"}}}]}}}}]}`
			e := run(t, payload, map[string][]toolresult.Envelope{"x": {tt.outcome}})
			wantStatus(t, e.out, toolresult.StatusSuccess)
			o := e.out.Data.(map[string]any)["_context_updates"].(map[string]any)["o"].(map[string]any)
			if !reflect.DeepEqual(o["response"], o["data"]) {
				t.Errorf("response %v is not data %v", o["response"], o["data"])
			}
			delete(o, "data")
			delete(o, "response")
			sameJSON(t, "output", o, tt.output)
		})
	}
	// And the failing pipeline's own error carries the same classification.
	e := run(t, `{"tool_config": [{"x": {"kind": "http"}}]}`, map[string][]toolresult.Envelope{"x": {failed("HTTP 502", httpResp(502, nil))}})
	wantStatus(t, e.out, toolresult.StatusError)
	if got := *e.out.Error; got != (toolresult.ErrorInfo{Message: "HTTP 502", Kind: toolresult.KindServerError, Status: 502, Retryable: true}) {
		t.Errorf("pipeline error = %+v", got)
	}
}

// R-L9: policy retries are bounded by ctx; heartbeats between attempts.
func TestDeadline(t *testing.T) {
	retry := `{"tool_config": [{"a": {"kind": "t", "spec": {"policy": {"rules": [
		{"when": "{{ output.status == 'error' }}", "then": {"do": "retry", "attempts": 10, "delay": 5}}]}}}}, {"b": {"kind": "t"}}]}`
	t.Run("R-L9 ctx done during a retry wait gives a timeout envelope", func(t *testing.T) {
		e := runCtx(t, context.Background(), retry, map[string][]toolresult.Envelope{"a": {failed("HTTP 503", nil)}}, 2)
		wantStatus(t, e.out, toolresult.StatusTimeout)
		if e.f.count("a") != 2 || e.f.count("b") != 0 {
			t.Errorf("runs a=%d b=%d, want 2 0", e.f.count("a"), e.f.count("b"))
		}
		if e.beats != 2 || len(e.s.got) != 2 {
			t.Errorf("heartbeats=%d sleeps=%v, want 2 and 2", e.beats, e.s.got)
		}
		if e.out.Error.Kind != toolresult.KindTimeout || !e.out.Error.Retryable {
			t.Errorf("error = %+v", e.out.Error)
		}
		wantErrContains(t, e.out, `item "a"`, "cancelled", "after 2 attempts", "HTTP 503")
	})
	t.Run("R-L9 real deadline with the default sleeper", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		f := &fake{script: map[string][]toolresult.Envelope{"a": {failed("down", nil)}}}
		beats := 0
		// A Run that ignored the deadline would sleep out the retry delay and
		// end with the tool's error, not a timeout.
		out := Run(ctx, obj(t, retry), Options{Exec: f.exec, Heartbeat: func() { beats++ }})
		wantStatus(t, out, toolresult.StatusTimeout)
		wantErrContains(t, out, "deadline reached")
		if beats != 1 || f.count("a") != 1 {
			t.Errorf("heartbeats=%d runs=%d, want 1 1", beats, f.count("a"))
		}
	})
	t.Run("R-L9 ctx already done: nothing runs", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		f := &fake{}
		out := Run(ctx, obj(t, `{"tool_config": [{"a": {"kind": "t"}}]}`), Options{Exec: f.exec})
		wantStatus(t, out, toolresult.StatusTimeout)
		if len(f.calls) != 0 {
			t.Errorf("ran %d items", len(f.calls))
		}
	})
}

// Template errors are deterministic: the pipeline fails at once, naming the place.
func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name    string
		payload string
		parts   []string
		calls   int
	}{
		{"input render error", `{"tool_config": [{"a": {"kind": "t", "input": {"v": "{{ 1 | nosuchfilter }}"}}}]}`,
			[]string{`item "a"`, "input.v", "nosuchfilter"}, 0},
		{"config render error", `{"tool_config": [{"a": {"kind": "t", "url": "{{ 1 / 0 }}"}}]}`,
			[]string{`item "a"`, "url"}, 0},
		{"when render error", `{"tool_config": [{"a": {"kind": "t", "spec": {"policy": {"rules": [{"when": "{{ 1 / 0 }}", "then": {"do": "continue"}}]}}}}]}`,
			[]string{`item "a"`, "spec.policy.rules[0].when"}, 1},
		{"item set render error", `{"tool_config": [{"a": {"kind": "t", "set": {"ctx.x": "{{ 1 / 0 }}"}}}]}`,
			[]string{`item "a"`, "set", "ctx.x"}, 1},
		{"input renders to a non-object", `{"tool_config": [{"a": {"kind": "t", "input": "{{ [1] }}"}}]}`,
			[]string{`item "a"`, "input: expected an object, got array"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := run(t, tt.payload, nil)
			wantStatus(t, e.out, toolresult.StatusError)
			wantErrContains(t, e.out, tt.parts...)
			if len(e.f.calls) != tt.calls {
				t.Errorf("calls = %d, want %d", len(e.f.calls), tt.calls)
			}
		})
	}
}

// Adversarial payloads: an error envelope with a clear message, never a panic, and no
// item runs.
func TestMalformedPayloads(t *testing.T) {
	item := func(body string) string { return `{"tool_config": [{"a": ` + body + `}]}` }
	rules := func(r string) string { return item(`{"kind": "t", "spec": {"policy": {"rules": ` + r + `}}}`) }
	tests := []struct {
		name    string
		payload string
		want    string
	}{
		{"tool_config missing", `{}`, "tool_config is missing"},
		{"tool_config not a list", `{"tool_config": "a"}`, "tool_config: expected a list of items (or {tasks: [...]}), got string"},
		{"tool_config without tasks", `{"tool_config": {"a": {"kind": "t"}}}`, "tool_config.tasks: expected a list of items (or {tasks: [...]}), got null"},
		{"tool_config empty", `{"tool_config": []}`, "no items"},
		{"item not an object", `{"tool_config": ["a"]}`, "tool_config[0]: expected an object"},
		{"item with two keys", `{"tool_config": [{"a": {"kind": "t"}, "b": {"kind": "t"}}]}`, "exactly one key (the label), got keys a, b"},
		{"item with no keys", `{"tool_config": [{}]}`, "exactly one key"},
		{"item body not an object", item(`"python"`), `item "a": expected a tool object, got string`},
		{"item without kind", item(`{"code": "x"}`), `item "a": kind must be a non-empty string, got nothing`},
		{"kind not a string", item(`{"kind": 3}`), "kind must be a non-empty string, got number"},
		{"empty label", `{"tool_config": [{"": {"kind": "t"}}]}`, "label is empty"},
		{"reserved label", `{"tool_config": [{"ctx": {"kind": "t"}}]}`, `label "ctx" is reserved`},
		{"duplicate label", `{"tool_config": [{"a": {"kind": "t"}}, {"a": {"kind": "t"}}]}`, `tool_config[1]: label "a" is also used by tool_config[0]`},
		{"input and args both", item(`{"kind": "t", "input": {}, "args": {}}`), "input or its alias args, not both"},
		{"set not an object", item(`{"kind": "t", "set": [1]}`), "set: expected an object, got array"},
		{"set key ctx alone", item(`{"kind": "t", "set": {"ctx": 1}}`), `key "ctx" needs a name after it`},
		{"set key with empty segment", item(`{"kind": "t", "set": {"ctx..x": 1}}`), `key "ctx..x": empty path segment`},
		{"spec not an object", item(`{"kind": "t", "spec": 1}`), "spec: expected an object"},
		{"rules not a list", rules(`{"when": "x"}`), "policy.rules: expected a list, got object"},
		{"rule not an object", rules(`["retry"]`), "rules[0]: expected an object"},
		{"rule without then or else", rules(`[{"when": "{{ true }}"}]`), "rules[0]: a rule needs then (with when) or else"},
		{"else combined with when", rules(`[{"when": "x", "then": {}, "else": {}}]`), "else cannot be combined"},
		{"else not an object", rules(`[{"else": "continue"}]`), "else: expected an object, got string"},
		{"else with then and shorthand", rules(`[{"else": {"then": {"do": "fail"}, "do": "continue"}}]`), "not both"},
		{"unknown do", rules(`[{"else": {"then": {"do": "explode"}}}]`), `do: unknown action "explode" (want continue, retry, fail, break or jump)`},
		{"do not a string", rules(`[{"else": {"do": true}}]`), "do: expected a string, got boolean"},
		{"then not an object", rules(`[{"when": "x", "then": "retry"}]`), "then: expected an object"},
		{"attempts zero", rules(`[{"else": {"do": "retry", "attempts": 0}}]`), "attempts: expected a whole number ≥ 1"},
		{"attempts fractional", rules(`[{"else": {"do": "retry", "attempts": 1.5}}]`), "attempts: expected a whole number ≥ 1"},
		{"attempts text", rules(`[{"else": {"do": "retry", "attempts": "5"}}]`), `attempts: expected a whole number ≥ 1 (total tries), got "5"`},
		{"negative delay", rules(`[{"else": {"do": "retry", "delay": -1}}]`), "delay: expected seconds ≥ 0, got -1"},
		{"unknown backoff", rules(`[{"else": {"do": "retry", "backoff": "quadratic"}}]`), `backoff: expected none, linear or exponential, got "quadratic"`},
		{"jump without to", rules(`[{"else": {"do": "jump"}}]`), "jump needs to: <item label>"},
		{"jump to unknown label", rules(`[{"else": {"do": "jump", "to": "nowhere"}}]`), `jump target "nowhere" is not a label of this pipeline (labels: a)`},
		{"then.set not an object", rules(`[{"else": {"set": "x"}}]`), "set: expected an object, got string"},
		{"args not an object", `{"args": [1], "tool_config": [{"a": {"kind": "t"}}]}`, "args: expected an object, got array"},
		{"render_context not an object", `{"render_context": "x", "tool_config": [{"a": {"kind": "t"}}]}`, "render_context: expected an object, got string"},
		{"single not a boolean", `{"single": "yes", "tool_config": [{"a": {"kind": "t"}}]}`, "single: expected a boolean"},
		{"single with two items", `{"single": true, "tool_config": [{"a": {"kind": "t"}}, {"b": {"kind": "t"}}]}`, "single is set but there are 2 items"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := run(t, tt.payload, nil)
			wantStatus(t, e.out, toolresult.StatusError)
			wantErrContains(t, e.out, "pipeline: ", tt.want)
			if e.out.Error.Kind != toolresult.KindTool {
				t.Errorf("kind = %q", e.out.Error.Kind)
			}
			if len(e.f.calls) != 0 {
				t.Errorf("%d items ran on a malformed payload", len(e.f.calls))
			}
		})
	}
	t.Run("nil payload", func(t *testing.T) {
		out := Run(context.Background(), nil, Options{Exec: (&fake{}).exec})
		wantStatus(t, out, toolresult.StatusError)
		wantErrContains(t, out, "payload is null")
	})
	t.Run("nil Exec", func(t *testing.T) {
		out := Run(context.Background(), obj(t, `{"tool_config": [{"a": {"kind": "t"}}]}`), Options{})
		wantStatus(t, out, toolresult.StatusError)
		wantErrContains(t, out, "no Exec callback")
	})
	t.Run("non-convention Go values are normalised, not a panic", func(t *testing.T) {
		p := map[string]any{"tool_config": []map[string]any{{"a": map[any]any{"kind": "t", "n": 3}}}}
		f := &fake{}
		out := Run(context.Background(), p, Options{Exec: f.exec})
		wantStatus(t, out, toolresult.StatusSuccess)
		sameJSON(t, "config", f.calls[0].Config, `{"kind": "t", "n": 3}`)
	})
}

// Determinism: overlapping set keys and many labels give the same bytes every run,
// whatever Go's map order is.
func TestDeterminism(t *testing.T) {
	payload := `{"render_context": {"ctx": {}}, "tool_config": [
		{"a": {"kind": "t", "set": {"ctx.m": {"x": 1}, "ctx.m.y": 2, "ctx.m.z.w": 3, "q": 1, "iter.r": 2}}},
		{"b": {"kind": "echo", "input": {"m": "{{ ctx.m }}", "q": "{{ q }}", "r": "{{ iter.r }}"}}},
		{"c": {"kind": "t"}}, {"d": {"kind": "t"}}, {"e": {"kind": "t"}}]}`
	var first string
	for i := range 30 {
		e := run(t, payload, nil)
		wantStatus(t, e.out, toolresult.StatusSuccess)
		got := string(jsonx.MustMarshal(e.out.Data))
		if i == 0 {
			first = got
			sameJSON(t, "b", e.out.Data.(map[string]any)["b"], `{"m": {"x": 1, "y": 2, "z": {"w": 3}}, "q": 1, "r": 2}`)
			sameJSON(t, "updates", e.out.Data.(map[string]any)["_context_updates"], `{"m": {"x": 1}, "m.y": 2, "m.z.w": 3}`)
		} else if got != first {
			t.Fatalf("run %d differs:\n %s\n %s", i, got, first)
		}
	}
}

func TestEnvelopeJSON(t *testing.T) {
	tests := []struct {
		name string
		env  toolresult.Envelope
		want string
	}{
		{"success", toolresult.Envelope{Status: toolresult.StatusSuccess, Data: map[string]any{"a": int64(1)}}, `{"data":{"a":1},"status":"success"}`},
		{"error with null status", toolresult.Envelope{Status: toolresult.StatusError, Error: &toolresult.ErrorInfo{Message: "m", Kind: toolresult.KindTool}},
			`{"data":null,"error":{"kind":"tool","message":"m","retryable":false,"status":null},"status":"error"}`},
		{"error with http status and extras", toolresult.Envelope{Status: toolresult.StatusError, Data: "d", Stderr: "e", ExitCode: new(2), DurationMs: 5,
			Error: &toolresult.ErrorInfo{Message: "HTTP 503", Kind: toolresult.KindServerError, Status: 503, Retryable: true}},
			`{"data":"d","duration_ms":5,"error":{"kind":"server_error","message":"HTTP 503","retryable":true,"status":503},"exit_code":2,"status":"error","stderr":"e"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := jsonx.Marshal(tt.env.Map()) // what the worker reports
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got  %s\nwant %s", b, tt.want)
			}
		})
	}
}

// TestRenderBudgetPerItem: an item's config and input templates share one render
// budget (tmpl.Budget), so many templates cannot multiply it; past it the item
// fails with the budget named and does not run.
func TestRenderBudgetPerItem(t *testing.T) {
	input := map[string]any{}
	for i := range 20 {
		input[fmt.Sprintf("k%02d", i)] = "{{ 'x' * 1000000 }}"
	}
	payload := jsonx.MustMarshal(map[string]any{"tool_config": []any{map[string]any{"a": map[string]any{"kind": "t", "input": input}}}})
	e := run(t, string(payload), nil)
	wantStatus(t, e.out, toolresult.StatusError)
	wantErrContains(t, e.out, `item "a"`, "input.k16", "render budget exceeded", "limit MaxRenderBytes")
	if len(e.f.calls) != 0 {
		t.Errorf("calls = %d, want 0", len(e.f.calls))
	}
	delete(input, "k19")
	for i := range 10 {
		delete(input, fmt.Sprintf("k%02d", i))
	}
	payload = jsonx.MustMarshal(map[string]any{"tool_config": []any{map[string]any{"a": map[string]any{"kind": "t", "input": input}}}})
	if e = run(t, string(payload), nil); len(e.f.calls) != 1 {
		t.Fatalf("9 MB of input: %+v", e.out)
	}
}

// An http item's policy rules read the body's members through output.data as
// well as the answer's own (test_fetch_load reads output.data.meta and
// output.data.entry; other NoETL playbooks read output.data.data, the body).
func TestPolicyOutputReadsHTTPBody(t *testing.T) {
	body := map[string]any{"meta": map[string]any{"page": int64(1), "totalPages": int64(3)},
		"entry": []any{"a", "b"}, "status_code": "the body's own"}
	e := run(t, `{"tool_config": [{"fetch": {"kind": "http", "spec": {"policy": {"rules": [{"else": {"then": {"do": "continue", "set": {
		"ctx.more": "{{ output.data.meta.page < output.data.meta.totalPages }}",
		"ctx.records": "{{ output.data.entry | length }}",
		"ctx.code": "{{ output.data.status_code }}",
		"ctx.body_page": "{{ output.data.body.meta.page }}"}}}}]}}}}]}`,
		map[string][]toolresult.Envelope{"fetch": {ok(httpResp(200, body))}})
	wantStatus(t, e.out, toolresult.StatusSuccess)
	sameJSON(t, "_context_updates", e.out.Data.(map[string]any)["_context_updates"],
		`{"more": true, "records": 2, "code": 200, "body_page": 1}`)
	// The item's result is the answer as the tool gave it, without the body's members.
	if _, leaked := e.out.Data.(map[string]any)["fetch"].(map[string]any)["meta"]; leaked {
		t.Errorf("the body view leaked into the item's result: %v", e.out.Data)
	}
}
