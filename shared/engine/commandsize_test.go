package engine_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// issuedContext is the payload of the first command.issued of step.
func issuedContext(t *testing.T, s *enginetest.Sim, step string) map[string]any {
	t.Helper()
	for _, ev := range s.Log {
		if ev.Type == eventtype.CommandIssued && ev.Step == step {
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
	s.Items = map[string]enginetest.ItemTool{"read": func(it pipeline.Item) toolresult.Envelope {
		seen = it.Input
		return toolresult.Envelope{Status: "success", Data: it.Input}
	}}
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionCompleted {
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
		if n := s.Count(eventtype.CommandIssued, "reader"); n != 0 {
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
		wantStatus, after := lifecycle.ExecutionFailed, engine.StepPending
		if onError != "" {
			wantStatus, after = lifecycle.ExecutionCompleted, engine.StepCompleted
		}
		if s.Status() != wantStatus || s.StepStatus("after") != after {
			t.Fatalf("%s: status %s, after %s; want %s, %s", onError, s.Status(), s.StepStatus("after"), wantStatus, after)
		}
	}
}

// TestCommandParts: with a result store (Config.PartRef), a command over
// engine.CommandInlineBytes has its large values put there as parts, carried
// as references the worker loads (pipeline.ResolveRefs), so it is issued
// small and runs with its whole input; a command that cannot be made small
// enough (many values, none large) still fails at dispatch naming the key.
func TestCommandParts(t *testing.T) {
	src := `
workflow:
  - step: start
    tool: {kind: noop}
    next: reader
  - step: reader
    tool: {kind: python, code: "result = 1", input: {blob: "{{ start.blob }}", small: 1}}
`
	s := sim(t, src)
	s.Engine = engine.New(engine.Config{PartRef: func(id int64, name, hash string) string {
		return fmt.Sprintf("noetl://execution/%d/result/%s/%s", id, name, hash)
	}})
	blob := strings.Repeat("b", engine.MaxCommandBytes+1)
	s.Tools = map[string]enginetest.Tool{
		"start": func(*enginetest.Cmd) enginetest.Reply { return enginetest.Reply{Data: map[string]any{"blob": blob}} },
		"reader": func(c *enginetest.Cmd) enginetest.Reply {
			b, _ := jsonx.Marshal(c.Payload)
			if len(b) > engine.CommandInlineBytes {
				return enginetest.Reply{Status: "error", Error: fmt.Sprintf("the command carries %d bytes", len(b))}
			}
			payload := jsonx.Clone(c.Payload).(map[string]any)
			if _, err := pipeline.ResolveRefs(context.Background(), payload, func(_ context.Context, uri string) (any, error) {
				return s.Results[engine.ResultKey{Kind: engine.KindReference, Index: -1, URI: uri}], nil
			}); err != nil {
				return enginetest.Reply{Status: "error", Error: err.Error()}
			}
			args := payload["args"].(map[string]any)
			tc := payload["tool_config"].(map[string]any)["args"].(map[string]any)
			return enginetest.Reply{Data: map[string]any{"n": int64(len(args["blob"].(string))), "tc": int64(len(tc["blob"].(string))), "small": args["small"]}}
		},
	}
	run(t, s, nil)
	if want := map[string]any{"n": int64(len(blob)), "tc": int64(len(blob)), "small": int64(1)}; !reflect.DeepEqual(s.Result("reader"), want) {
		t.Fatalf("reader ran with %v (status %s), want its whole input %v", s.Result("reader"), s.Status(), want)
	}
	m, _ := issuedContext(t, s, "reader")["args"].(map[string]any)["blob"].(map[string]any)
	load, _ := m[pipeline.RefLoadKey].(map[string]any)
	if uri, _ := load["uri"].(string); !strings.HasPrefix(uri, "noetl://execution/4242/result/reader.args.blob/") || load["part"] != true {
		t.Fatalf("reader's command carries blob as %v, want a part's reference", load)
	}

	// Many values, none large enough to be a part: not made small enough.
	many := "workflow:\n  - step: start\n    tool:\n      kind: python\n      code: \"result = 1\"\n      input:\n"
	for i := range 100 {
		many += fmt.Sprintf("        k%d: \"{{ 'x' * 50000 }}\"\n", i)
	}
	s = sim(t, many)
	s.Engine = engine.New(engine.Config{PartRef: func(id int64, name, hash string) string { return "noetl://x/" + hash }})
	run(t, s, nil)
	if msg := s.Snapshot().Steps["start"].Error; s.Status() != lifecycle.ExecutionFailed ||
		!regexp.MustCompile(`^command: \d+ bytes of JSON, over the limit of 4194304 \(engine.MaxCommandBytes, 4 MiB\); args is \d+ bytes`).MatchString(msg) {
		t.Fatalf("status %s, error %q: want the step failed naming args and the sizes", s.Status(), msg)
	}
}
