package engine_test

import (
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/eventtype"
)

// TestExecutionVariables: a variable set from outside the playbook (POST
// /api/vars writes a ctx.updated event) is folded into the durable context,
// and the next step's templates read it as NoETL's playbooks do: ctx.x, x,
// and the older vars.x. A workload key named vars keeps its own meaning.
func TestExecutionVariables(t *testing.T) {
	s := sim(t, `
workload: {greeting: hi}
workflow:
  - step: start
    tool: {kind: noop}
    next: use
  - step: use
    tool:
      kind: noop
      input: {a: "{{ ctx.token_len }}", b: "{{ token_len }}", c: "{{ vars.token_len }}", d: "{{ vars.who.name }}"}
`)
	if err := s.Start(nil); err != nil {
		t.Fatal(err)
	}
	// The variable arrives while start runs, before it completes.
	if err := s.Post(engine.Event{Type: eventtype.CtxUpdated, Status: "CONTEXT",
		Context: map[string]any{"step": "start", "values": map[string]any{"token_len": int64(24), "who": map[string]any{"name": "ann"}}}}); err != nil {
		t.Fatal(err)
	}
	var input map[string]any
	s.Tools = map[string]enginetest.Tool{"use": func(c *enginetest.Cmd) enginetest.Reply {
		input, _ = c.Payload["args"].(map[string]any)
		return enginetest.Reply{}
	}}
	if err := s.RunToEnd(100); err != nil {
		t.Fatal(err)
	}
	invariants(t, s)
	if input["a"] != int64(24) || input["b"] != int64(24) || input["c"] != int64(24) || input["d"] != "ann" {
		t.Fatalf("the next step's input: %v", input)
	}

	// A workload key named vars wins over the alias.
	s = sim(t, `
workload: {vars: {token_len: mine}}
workflow:
  - step: start
    tool: {kind: noop, input: {c: "{{ vars.token_len }}"}}
`)
	s.Tools = map[string]enginetest.Tool{"start": func(c *enginetest.Cmd) enginetest.Reply {
		input, _ = c.Payload["args"].(map[string]any)
		return enginetest.Reply{}
	}}
	run(t, s, nil)
	if input["c"] != "mine" {
		t.Fatalf("workload vars: %v", input)
	}
}
