package engine_test

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
)

// TestStoredResultsInOneRound: a decision that reads many stored results asks
// for all of them at once, whether one template, a set block's entries, a
// command's input and config, or the steps view reads them; the simulator's
// count of rounds (NeedRetries) is one for the whole run. Before, each round
// loaded one key and the callers gave up after three or four.
func TestStoredResultsInOneRound(t *testing.T) {
	const chain = `
workflow:
  - step: start
    tool: {kind: noop}
    next: a1
  - {step: a1, tool: {kind: noop}, next: a2}
  - {step: a2, tool: {kind: noop}, next: a3}
  - {step: a3, tool: {kind: noop}, next: a4}
  - {step: a4, tool: {kind: noop}, next: a5}
  - {step: a5, tool: {kind: noop}, next: a6}
  - {step: a6, tool: {kind: noop}, next: a7}
`
	const oneTemplate = `
  - {step: a7, tool: {kind: noop}, next: final}
  - step: final
    tool: {kind: noop, input: {v1: "{{ a1.v }}", v2: "{{ a2.v }}", v3: "{{ a3.v }}", v4: "{{ a4.v }}", v5: "{{ a5.v }}", v6: "{{ a6.v }}"}}
`
	want := map[string]any{"v1": int64(1), "v2": int64(2), "v3": int64(3), "v4": int64(4), "v5": int64(5), "v6": int64(6)}
	cases := []struct {
		name string
		tail string // a7 and final
		ref  bool   // results stored by reference instead of in the step_result table
		// got is what final saw, from its command's args or the context.
		got func(s *enginetest.Sim) any
	}{{
		name: "one template",
		tail: oneTemplate,
		got:  func(s *enginetest.Sim) any { return s.Result("final") },
	}, {
		name: "one template, by reference",
		ref:  true,
		tail: oneTemplate,
		got:  func(s *enginetest.Sim) any { return s.Result("final") },
	}, {
		name: "the steps view",
		tail: `
  - {step: a7, tool: {kind: noop}, next: final}
  - step: final
    tool: {kind: noop, input: {v1: "{{ steps.a1.result.v }}", v2: "{{ steps.a2.result.v }}", v3: "{{ steps.a3.result.v }}",
      v4: "{{ steps.a4.result.v }}", v5: "{{ steps.a5.result.v }}", v6: "{{ steps.a6.result.v }}"}}
`,
		got: func(s *enginetest.Sim) any { return s.Result("final") },
	}, {
		name: "a set block's entries",
		tail: `
  - step: a7
    tool: {kind: noop}
    set: {v1: "{{ a1.v }}", v2: "{{ a2.v }}", v3: "{{ a3.v }}", v4: "{{ a4.v }}", v5: "{{ a5.v }}", v6: "{{ a6.v }}"}
    next: final
  - {step: final, tool: {kind: noop}}
`,
		got: func(s *enginetest.Sim) any {
			out := map[string]any{}
			for k := range want {
				out[k] = s.Snapshot().Ctx[k]
			}
			return out
		},
	}, {
		name: "a step's input and its tool's config",
		tail: `
  - {step: a7, tool: {kind: noop}, next: final}
  - step: final
    input: {v1: "{{ a1.v }}", v2: "{{ a2.v }}", v3: "{{ a3.v }}"}
    tool: {kind: http, url: "http://h/{{ a4.v }}/{{ a5.v }}/{{ a6.v }}"}
`,
		got: func(s *enginetest.Sim) any {
			for _, c := range s.Commands {
				if c.Step != "final" {
					continue
				}
				tc := c.Payload["tool_config"].(map[string]any)
				out := maps.Clone(enginetest.Args(c))
				var v4, v5, v6 int64
				if _, err := fmt.Sscanf(tc["url"].(string), "http://h/%d/%d/%d", &v4, &v5, &v6); err != nil {
					return err
				}
				out["v4"], out["v5"], out["v6"] = v4, v5, v6
				return out
			}
			return nil
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := sim(t, chain+tc.tail)
			s.Engine = engine.New(engine.Config{InlineResultBytes: 512})
			pad := strings.Repeat("x", 600) // over the inline limit: stored outside the snapshot
			s.Default = func(c *enginetest.Cmd) enginetest.Reply {
				var n int
				if _, err := fmt.Sscanf(c.Step, "a%d", &n); err != nil {
					return echoArgs(c)
				}
				r := enginetest.Reply{Data: map[string]any{"v": n, "pad": pad}}
				if tc.ref {
					r.Ref = "file:///results/" + c.Step + ".json"
				}
				return r
			}
			run(t, s, nil)
			if got := tc.got(s); !reflect.DeepEqual(got, want) {
				t.Fatalf("final saw %v, want %v", got, want)
			}
			if s.NeedRetries != 1 {
				t.Fatalf("the engine asked for stored results in %d rounds; want all six in one", s.NeedRetries)
			}
		})
	}
}

// TestRounds: the rule every caller of Handle follows between rounds.
func TestRounds(t *testing.T) {
	key := func(i int) engine.ResultKey {
		return engine.ResultKey{Kind: engine.KindStepResult, Step: fmt.Sprintf("a%d", i), Visit: 1, Index: -1}
	}
	need := func(ks ...engine.ResultKey) error { return &engine.NeedResultsError{Keys: ks} }
	var r engine.Rounds
	if keys, err := r.Next(nil); keys != nil || err != nil {
		t.Fatalf("a decision made: %v, %v", keys, err)
	}
	other := errors.New("boom")
	if _, err := r.Next(other); err != other {
		t.Fatalf("another error is returned as it is: %v", err)
	}
	if keys, err := r.Next(need(key(1), key(2))); err != nil || !reflect.DeepEqual(keys, []engine.ResultKey{key(1), key(2)}) {
		t.Fatalf("first round: %v, %v", keys, err)
	}
	if keys, err := r.Next(need(key(2), key(3))); err != nil || !reflect.DeepEqual(keys, []engine.ResultKey{key(3)}) {
		t.Fatalf("a round asking for one new key loads that one: %v, %v", keys, err)
	}
	_, err := r.Next(need(key(1), key(3)))
	if err == nil || !strings.Contains(err.Error(), "result/a1#1[-1], result/a3#1[-1]") || !strings.Contains(err.Error(), "loaded before") {
		t.Fatalf("a round asking only for loaded keys must fail naming them: %v", err)
	}

	var many engine.Rounds
	for i := range engine.MaxRounds {
		if _, err := many.Next(need(key(100 + i))); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
	}
	_, err = many.Next(need(key(0)))
	if err == nil || !strings.Contains(err.Error(), "result/a0#1[-1]") || !strings.Contains(err.Error(), "MaxRounds") {
		t.Fatalf("past MaxRounds the error names the keys: %v", err)
	}
}
