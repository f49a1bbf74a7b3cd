package engine_test

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/pipeline"
)

// issuedContext is the payload of the first command.issued of step.
func issuedContext(t *testing.T, s *enginetest.Sim, step string) map[string]any {
	t.Helper()
	for _, ev := range s.Log {
		if ev.Type == engine.EvCommandIssued && ev.Step == step {
			return ev.Context
		}
	}
	t.Fatalf("no command.issued for %s", step)
	return nil
}

// TestCommandsCarryReferences: a step result the worker stored by reference
// reaches a later command's render_context as its reference marker, never as
// its data (what a command carries does not grow with the results its code
// reads), and the worker's side (pipeline.ResolveRefs, which the simulator
// runs as the worker does) sees it whole, with _ref and a pipeline's results
// view.
func TestCommandsCarryReferences(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    next: gen
  - step: gen
    tool:
      - name: make
        kind: python
        code: "result = 1"
    next: reader
  - step: reader
    tool:
      - name: read
        kind: python
        input: {n: "{{ start.count }}", first: "{{ start.items[0] }}", ref: "{{ start._ref.ref }}", made: "{{ gen.results.make.count }}"}
        code: "result = 1"
    next: coder
  - step: coder
    tool: {kind: python, code: "result = context['start']['count']"}
`)
	items := make([]any, 3000)
	for i := range items {
		items[i] = strings.Repeat("x", 100)
	}
	s.Tools = map[string]enginetest.Tool{
		"start": func(*enginetest.Cmd) enginetest.Reply {
			return enginetest.Reply{Data: map[string]any{"count": int64(len(items)), "items": items}, Ref: "file:///results/start.json"}
		},
		"gen": func(*enginetest.Cmd) enginetest.Reply {
			return enginetest.Reply{Data: map[string]any{"make": map[string]any{"count": int64(7)}, "count": int64(7)}, Ref: "file:///results/gen.json"}
		},
		"coder": echoArgs,
	}
	var seen map[string]any
	s.Items = map[string]enginetest.ItemTool{"read": func(it pipeline.Item) pipeline.Envelope {
		seen = it.Input
		return pipeline.Envelope{Status: "success", Data: it.Input}
	}}
	run(t, s, nil)
	if s.Status() != engine.StatusCompleted {
		t.Fatalf("status %s, want COMPLETED", s.Status())
	}
	want := map[string]any{"n": int64(3000), "first": items[0], "ref": "file:///results/start.json", "made": int64(7)}
	for k, v := range want {
		if seen[k] != v {
			t.Fatalf("the pipeline item read %s = %v, want %v (all: %v)", k, seen[k], v, seen)
		}
	}
	for _, step := range []string{"reader", "coder"} {
		rc, _ := issuedContext(t, s, step)["render_context"].(map[string]any)
		m, _ := rc["start"].(map[string]any)
		if m[pipeline.RefLoadKey] == nil || m["items"] != nil {
			t.Fatalf("%s's command carries start with keys %v, want its reference marker", step, slices.Sorted(maps.Keys(m)))
		}
		if ref, _ := m["_ref"].(map[string]any); ref["ref"] != "file:///results/start.json" {
			t.Fatalf("%s's marker has _ref %v", step, m["_ref"])
		}
	}
	rc := issuedContext(t, s, "reader")["render_context"].(map[string]any)
	if load := rc["gen"].(map[string]any)[pipeline.RefLoadKey].(map[string]any); len(load["results"].([]any)) != 1 {
		t.Fatalf("gen's marker must name its pipeline labels: %v", load)
	}
}

// TestCommandTooLarge: a command over engine.MaxCommandBytes fails its step at
// dispatch with an error naming the key and the sizes, not retried (R-L6);
// with on_error: continue the run goes on.
func TestCommandTooLarge(t *testing.T) {
	for _, onError := range []string{"", "spec: {on_error: continue}"} {
		s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: reader
  - step: reader
    retry: {max_attempts: 3, delay: 0}
    `+onError+`
    tool: {kind: python, code: "result = 1", input: {blob: "{{ start.blob }}", small: 1}}
    next: after
  - step: after
    tool: {kind: noop}
`)
		blob := strings.Repeat("b", engine.MaxCommandBytes+1)
		s.Tools = map[string]enginetest.Tool{
			"start": func(*enginetest.Cmd) enginetest.Reply { return enginetest.Reply{Data: map[string]any{"blob": blob}} },
		}
		run(t, s, nil)
		if n := s.Count(engine.EvCommandIssued, "reader"); n != 0 {
			t.Fatalf("%s: reader was issued %d times; a command over the limit is never issued", onError, n)
		}
		st := s.Snapshot().Steps["reader"]
		msg := st.Error
		if onError != "" {
			msg, _ = s.Result("reader").(map[string]any)["error"].(string)
		}
		if !regexp.MustCompile(`^command: \d+ bytes of JSON, over the limit of 4194304 \(engine.MaxCommandBytes, 4 MiB\); args.blob is \d+ bytes`).MatchString(msg) {
			t.Fatalf("%s: reader's error %q must name the key and the sizes", onError, msg)
		}
		wantStatus, after := engine.StatusFailed, engine.StepPending
		if onError != "" {
			wantStatus, after = engine.StatusCompleted, engine.StepCompleted
		}
		if s.Status() != wantStatus || s.StepStatus("after") != after {
			t.Fatalf("%s: status %s, after %s; want %s, %s", onError, s.Status(), s.StepStatus("after"), wantStatus, after)
		}
	}
}
