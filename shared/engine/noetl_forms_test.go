package engine_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// The forms below come from NoETL's public playbook corpus (issue 12); each test
// runs one through the engine to show it maps onto the engine's semantics, not
// only that it registers.

// TestEntryStep: without a step named start the first step is the entry (NoETL's
// rule); executor.spec.entry_step names another.
func TestEntryStep(t *testing.T) {
	s := sim(t, `
workflow:
  - step: validate
    tool: {kind: noop}
    next: done
  - step: done
    tool: {kind: noop}
`)
	run(t, s, nil)
	if s.Log[1].Type != "step.enter" || s.Log[1].Step != "validate" || s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("entry %s %s, status %s", s.Log[1].Type, s.Log[1].Step, s.Status())
	}

	s = sim(t, `
executor: {profile: auto, spec: {entry_step: begin, no_next_is_error: false}}
workflow:
  - step: start
    tool: {kind: noop}
  - step: begin
    tool: {kind: noop}
`)
	run(t, s, nil)
	if s.Log[1].Step != "begin" || s.StepStatus("start") != engine.StepPending {
		t.Fatalf("entry %s, start %s", s.Log[1].Step, s.StepStatus("start"))
	}
}

// TestToolSpecKnobs: knobs under tool.spec (python spec: {input, code}, http spec:
// {method, url}) reach the worker as if written on the tool; policy stays in spec.
func TestToolSpecKnobs(t *testing.T) {
	s := sim(t, `
workload: {base: "http://x"}
workflow:
  - step: start
    tool:
      kind: python
      spec:
        input: {n: "{{ 20 + 1 }}"}
        code: "result = n"
    next: fetch
  - step: fetch
    tool:
      kind: http
      spec:
        method: GET
        url: "{{ base }}/get"
        policy:
          rules:
            - else: {then: {do: continue}}
`)
	var py, http *enginetest.Cmd
	s.Default = func(c *enginetest.Cmd) enginetest.Reply {
		if c.Step == "start" {
			py = c
		} else {
			http = c
		}
		return enginetest.Reply{Data: map[string]any{}}
	}
	run(t, s, nil)
	if py == nil || http == nil {
		t.Fatalf("commands: python %v, http %v", py != nil, http != nil)
	}
	tc := py.Payload["tool_config"].(map[string]any)
	if tc["code"] != "result = n" || enginetest.Args(py)["n"] != int64(21) {
		t.Fatalf("python tool_config %v, args %v", tc, enginetest.Args(py))
	}
	item := http.Payload["tool_config"].(map[string]any)["tasks"].([]any)[0].(map[string]any)
	spec, _ := item["spec"].(map[string]any)
	if item["name"] != "fetch" || item["url"] != "{{ base }}/get" || item["method"] != "GET" || spec["url"] != nil || spec["policy"] == nil {
		t.Fatalf("http item %v", item)
	}
}

// TestTemplatedMaxInFlight: a templated loop.spec.max_in_flight is rendered when
// the loop starts, recorded in step.enter, and bounds the loop from then on.
func TestTemplatedMaxInFlight(t *testing.T) {
	s := sim(t, `
workload: {concurrent: 2}
workflow:
  - step: start
    loop:
      in: "{{ 6 }}"
      iterator: i
      spec: {mode: parallel, max_in_flight: "{{ (concurrent | default(1) | int) or 1 }}"}
    tool: {kind: noop}
`)
	if err := s.Start(nil); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Pending()); n != 2 {
		t.Fatalf("issued %d at start, want the rendered max_in_flight 2", n)
	}
	if got := s.Log[1].Context["max_in_flight"]; got != int64(2) {
		t.Fatalf("step.enter max_in_flight = %v", got)
	}
	for p := s.Pending(); len(p) > 0; p = s.Pending() {
		if len(p) > 2 {
			t.Fatalf("%d in flight > 2", len(p))
		}
		if err := s.Claim(p[0], "w"); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(p[0], enginetest.Reply{Data: 1}); err != nil {
			t.Fatal(err)
		}
	}
	invariants(t, s)
	if s.Status() != lifecycle.ExecutionCompleted || len(s.Result("start").([]any)) != 6 {
		t.Fatalf("status %s result %v", s.Status(), s.Result("start"))
	}

	s = sim(t, `
workload: {concurrent: none}
workflow:
  - step: start
    loop: {in: [1], iterator: i, spec: {mode: parallel, max_in_flight: "{{ concurrent }}"}}
    tool: {kind: noop}
`)
	run(t, s, nil)
	if st := s.Snapshot().Steps["start"]; s.Status() != lifecycle.ExecutionFailed || !strings.Contains(st.Error, "max_in_flight") {
		t.Fatalf("status %s, error %q", s.Status(), st.Error)
	}
}

// TestRenderedMaxInFlightBounded: a rendered max_in_flight past
// playbook.MaxLoopInFlight fails the step before any iteration is issued.
func TestRenderedMaxInFlightBounded(t *testing.T) {
	s := sim(t, `
workload: {concurrent: 100000}
workflow:
  - step: start
    loop: {in: "{{ 100000 }}", iterator: i, spec: {mode: parallel, max_in_flight: "{{ concurrent }}"}}
    tool: {kind: noop}
`)
	if err := s.Start(nil); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Pending()); n != 0 {
		t.Fatalf("issued %d commands", n)
	}
	want := "loop max_in_flight: the rendered value is 100000, more than 1000 (limit playbook.MaxLoopInFlight)"
	if st := s.Snapshot().Steps["start"]; s.Status() != lifecycle.ExecutionFailed || !strings.Contains(st.Error, want) {
		t.Fatalf("status %s, error %q", s.Status(), st.Error)
	}
}

// TestAdmitRules: spec.policy.admit is the step's guard; the first matching rule
// decides.
func TestAdmitRules(t *testing.T) {
	body := `
workload: {enabled: %s}
workflow:
  - step: start
    tool: {kind: noop}
    next: gated
  - step: gated
    spec:
      policy:
        admit:
          mode: exclusive
          rules:
            - when: "{{ enabled }}"
              then: {allow: true}
            - else:
                then: {allow: false}
    tool: {kind: noop}
`
	for _, c := range []struct{ enabled, want string }{{"true", engine.StepCompleted}, {"false", engine.StepSkipped}} {
		s := sim(t, strings.Replace(body, "%s", c.enabled, 1))
		run(t, s, nil)
		if s.Status() != lifecycle.ExecutionCompleted || s.StepStatus("gated") != c.want {
			t.Errorf("enabled %s: status %s, gated %s, want %s", c.enabled, s.Status(), s.StepStatus("gated"), c.want)
		}
	}
}

// TestNamesNoETLAccepts: a step named after a playbook path is reached through
// steps[...]; a step named error runs; an iterator named playbook_path wins over
// the binding inside its loop.
func TestNamesNoETLAccepts(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: fixtures/playbooks/hello_world
  - step: fixtures/playbooks/hello_world
    tool: {kind: noop}
    next: error
  - step: error
    input: {prev: "{{ steps['fixtures/playbooks/hello_world'].result }}"}
    tool: {kind: noop}
    next: each
  - step: each
    loop: {in: [a/one, b/two], iterator: playbook_path}
    tool: {kind: noop, input: {path: "{{ playbook_path }}"}}
`)
	s.Default = func(c *enginetest.Cmd) enginetest.Reply {
		switch c.Step {
		case "fixtures/playbooks/hello_world":
			return enginetest.Reply{Data: map[string]any{"hello": "world"}}
		case "error":
			return enginetest.Reply{Data: enginetest.Args(c)["prev"]}
		}
		return enginetest.Reply{Data: enginetest.Args(c)["path"]}
	}
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("status %s", s.Status())
	}
	if got := s.Result("error"); !reflect.DeepEqual(got, map[string]any{"hello": "world"}) {
		t.Fatalf("error step result %v", got)
	}
	if got := s.Result("each"); !reflect.DeepEqual(got, []any{"a/one", "b/two"}) {
		t.Fatalf("loop result %v (the iterator must win over playbook_path)", got)
	}
}

// TestUnsupportedFeaturesFailAtDispatch: token() and cursor loops over a kind we
// do not claim from register with a
// warning (R-N1) and fail their step when dispatched, naming the feature.
func TestUnsupportedFeaturesFailAtDispatch(t *testing.T) {
	cases := []struct{ name, step, want string }{
		{"token", `
  - step: start
    tool: {kind: http, url: "http://x", headers: {Authorization: "Bearer {{ token(google_auth) }}"}}
`, "token() is not supported"},
		{"cursor", `
  - step: start
    loop: {cursor: {kind: mysql, auth: db, claim: "UPDATE q SET s = 1 RETURNING id"}, iterator: row, spec: {mode: cursor, frame: {max_rows: 1}}}
    tool: {kind: noop}
`, "cursor loops over mysql are not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := sim(t, "workload: {google_auth: g}\nworkflow:"+c.step)
			run(t, s, nil)
			st := s.Snapshot().Steps["start"]
			if s.Status() != lifecycle.ExecutionFailed || st == nil || !strings.Contains(st.Error, c.want) {
				t.Fatalf("status %s, step %+v; want failed naming %q", s.Status(), st, c.want)
			}
		})
	}
}
