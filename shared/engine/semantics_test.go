package engine_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/playbook"
)

func ok(data any) enginetest.Tool {
	return func(*enginetest.Cmd) enginetest.Reply { return enginetest.Reply{Data: data} }
}

// echoArgs answers with the command's rendered args.
func echoArgs(c *enginetest.Cmd) enginetest.Reply {
	return enginetest.Reply{Data: enginetest.Args(c)}
}

// TestStart: dsl.md §4.1 — playbook.started, then start is dispatched without a
// when check.
func TestStart(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    when: "{{ false }}"
    tool: {kind: noop}
`)
	run(t, s, nil)
	types := s.Types("")
	if types[0] != "playbook.started" || types[1] != "step.enter" || s.Log[1].Step != "start" {
		t.Fatalf("log starts %v", types[:2])
	}
	if s.Status() != lifecycle.ExecutionCompleted || s.StepStatus("start") != "completed" {
		t.Fatalf("status %s, start %s", s.Status(), s.StepStatus("start"))
	}
}

// TestCanonicalSequences pins R-R8's event sequences for a linear step with set,
// a loop step, and the end of a run.
func TestCanonicalSequences(t *testing.T) {
	s := sim(t, `
workload: {items: [1, 2]}
workflow:
  - step: start
    tool: {kind: noop}
    next: mid
  - step: mid
    tool: {kind: noop}
    set: {ctx.x: 1}
    next: looped
  - step: looped
    loop: {in: "{{ items }}", iterator: it}
    tool: {kind: noop}
`)
	run(t, s, nil)
	cmd := []string{"command.issued", "command.claimed", "command.started", "call.done", "command.completed"}
	want := []string{"playbook.started", "step.enter"}
	want = append(want, cmd...)
	want = append(want, "step.exit", "step.enter")
	want = append(want, cmd...)
	want = append(want, "ctx.updated", "step.exit", "step.enter")
	want = append(want, cmd...)
	want = append(want, cmd...)
	want = append(want, "step.exit", "playbook.completed")
	if got := s.Types(""); !reflect.DeepEqual(got, want) {
		t.Fatalf("sequence\n got %v\nwant %v", got, want)
	}
	enter := s.Log[s.Index("step.enter", "looped", 0)]
	if enter.Context["iterations_expected"] != int64(2) || enter.Context["iterator"] != "it" {
		t.Errorf("loop step.enter context = %v", enter.Context)
	}
	for i, e := range s.Log {
		if e.Type == "command.issued" && e.Step == "looped" {
			if _, has := e.Meta["iteration_index"]; !has {
				t.Errorf("event %d: loop command without iteration_index: %v", i, e.Meta)
			}
		}
	}
}

// TestDispatchWhen: dsl.md §4.2 — a false when skips the step (no step.enter);
// skips cascade (R-J4).
func TestDispatchWhen(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: [a, b]
  - step: a
    when: "{{ 1 > 2 }}"
    tool: {kind: noop}
    next: after_a
  - step: after_a
    tool: {kind: noop}
  - step: b
    when: "{{ 'yes' }}"
    tool: {kind: noop}
`)
	run(t, s, nil)
	if s.StepStatus("a") != "skipped" || s.Count("step.enter", "a") != 0 || s.StepStatus("after_a") != "skipped" {
		t.Fatalf("a %s (enters %d), after_a %s", s.StepStatus("a"), s.Count("step.enter", "a"), s.StepStatus("after_a"))
	}
	if s.StepStatus("b") != "completed" || s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("b %s, run %s", s.StepStatus("b"), s.Status())
	}
}

// TestWhenStringRule: dsl.md §5 truthiness of a when's final value.
func TestWhenStringRule(t *testing.T) {
	for _, v := range []string{"false", "0", "no", "None", "NULL", "off", ""} {
		s := sim(t, fmt.Sprintf(`
workflow:
  - step: start
    tool: {kind: noop}
    next: a
  - step: a
    when: "%s"
    tool: {kind: noop}
`, v))
		run(t, s, nil)
		if got := s.StepStatus("a"); got != "skipped" {
			t.Errorf("when %q: a is %s, want skipped", v, got)
		}
	}
	s := sim(t, "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: a\n  - step: a\n    when: \"yes\"\n    tool: {kind: noop}\n")
	run(t, s, nil)
	if got := s.StepStatus("a"); got != "completed" {
		t.Errorf("when \"yes\": a is %s, want completed", got)
	}
}

// TestLoopCollections: dsl.md §4.2's collection forms and R-A9's integral floats.
func TestLoopCollections(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		payload map[string]any
		want    []any
		fails   string
	}{
		{"array", "{{ xs }}", map[string]any{"xs": []any{"a", "b"}}, []any{"a", "b"}, ""},
		{"object sorted by key", "{{ xs }}", map[string]any{"xs": map[string]any{"b": int64(2), "a": int64(1)}},
			[]any{map[string]any{"key": "a", "value": int64(1)}, map[string]any{"key": "b", "value": int64(2)}}, ""},
		{"integer", "{{ 3 }}", nil, []any{int64(0), int64(1), int64(2)}, ""},
		{"integral float (R-A9)", "{{ 2.0 }}", nil, []any{int64(0), int64(1)}, ""},
		{"null", "{{ none }}", nil, []any{}, ""},
		{"literal list", "", nil, []any{int64(5), int64(6)}, ""},
		{"string fails", "{{ 'abc' }}", nil, nil, "expected a list"},
		{"bool fails", "{{ true }}", nil, nil, "must be a list"},
		{"fractional fails", "{{ 1.5 }}", nil, nil, "not a whole number"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := fmt.Sprintf("%q", c.in)
			if c.in == "" {
				in = "[5, 6]"
			}
			s := sim(t, `
workflow:
  - step: start
    loop: {in: `+in+`, iterator: x}
    tool: {kind: noop, message: "{{ x }}"}
`)
			s.Default = func(c *enginetest.Cmd) enginetest.Reply {
				return enginetest.Reply{Data: c.Payload["iteration"].(map[string]any)["item"]}
			}
			run(t, s, c.payload)
			if c.fails != "" {
				if s.Status() != lifecycle.ExecutionFailed || !strings.Contains(s.Snapshot().Error, c.fails) {
					t.Fatalf("status %s error %q, want failure containing %q", s.Status(), s.Snapshot().Error, c.fails)
				}
				return
			}
			if got := s.Result("start"); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("result %#v, want %#v", got, c.want)
			}
		})
	}
}

// TestLoopSequential: iterations strictly one after another, results in order
// (dsl.md §4.2, §4.5).
func TestLoopSequential(t *testing.T) {
	s := sim(t, `
workload: {numbers: [10, 20, 30]}
workflow:
  - step: start
    loop: {in: "{{ numbers }}", iterator: n, spec: {mode: sequential, max_in_flight: 50}}
    tool: {kind: noop, input: {v: "{{ n }}"}}
`)
	s.Default = func(c *enginetest.Cmd) enginetest.Reply {
		return enginetest.Reply{Data: map[string]any{"doubled": enginetest.Args(c)["v"].(int64) * 2}}
	}
	maxInFlight := 0
	s.Observe = func(_ engine.Event, _ *engine.Outcome, _ []byte) {
		n := 0
		for _, c := range s.Commands {
			if c.Status == "PENDING" || c.Status == "CLAIMED" {
				n++
			}
		}
		maxInFlight = max(maxInFlight, n)
	}
	run(t, s, nil)
	if maxInFlight != 1 {
		t.Errorf("sequential loop had %d commands in flight (max_in_flight is ignored in sequential mode, R-A9)", maxInFlight)
	}
	want := []any{map[string]any{"doubled": int64(20)}, map[string]any{"doubled": int64(40)}, map[string]any{"doubled": int64(60)}}
	if got := s.Result("start"); !reflect.DeepEqual(got, want) {
		t.Fatalf("result %v", got)
	}
	// Each iteration is issued only after the previous one completed.
	for i := 1; i < 3; i++ {
		if s.Index("command.issued", "start", i) < s.Index("command.completed", "start", i-1) {
			t.Errorf("iteration %d issued before %d completed", i, i-1)
		}
	}
}

// TestLoopParallel: up to max_in_flight at a time; results in index order even
// when iterations finish out of order (dsl.md §4.2, §4.5).
func TestLoopParallel(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    loop: {in: "{{ 10 }}", iterator: i, spec: {mode: parallel, max_in_flight: 3}}
    tool: {kind: noop, input: {i: "{{ i }}"}}
`)
	s.Default = func(c *enginetest.Cmd) enginetest.Reply { return enginetest.Reply{Data: enginetest.Args(c)["i"]} }
	if err := s.Start(nil); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Pending()); n != 3 {
		t.Fatalf("parallel loop issued %d at start, want max_in_flight 3", n)
	}
	// Finish the newest pending first, so completion order differs from index order.
	for {
		p := s.Pending()
		if len(p) == 0 {
			break
		}
		if len(p) > 3 {
			t.Fatalf("%d in flight > max_in_flight", len(p))
		}
		c := p[len(p)-1]
		if err := s.Claim(c, "w"); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(c, enginetest.Reply{Data: enginetest.Args(c)["i"]}); err != nil {
			t.Fatal(err)
		}
	}
	invariants(t, s)
	want := []any{}
	for i := range 10 {
		want = append(want, int64(i))
	}
	if got := s.Result("start"); !reflect.DeepEqual(got, want) {
		t.Fatalf("result %v", got)
	}
}

// TestEmptyLoop: an empty loop completes at once with [] and routing goes on
// (NoETL leaves it hanging).
func TestEmptyLoop(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    loop: {in: [], iterator: x}
    tool: {kind: noop}
    set: {ctx.count: "{{ output | length }}"}
    next: after
  - step: after
    tool: {kind: noop}
`)
	run(t, s, nil)
	if got := s.Result("start"); !reflect.DeepEqual(got, []any{}) {
		t.Fatalf("empty loop result %#v", got)
	}
	if s.Count("command.issued", "start") != 0 || s.StepStatus("after") != "completed" || s.Snapshot().Ctx["count"] != int64(0) {
		t.Fatalf("after %s, ctx %v", s.StepStatus("after"), s.Snapshot().Ctx)
	}
}

// TestToolOutcomeFails: dsl.md §4.3 / R-R2 / R-R3 — only the envelope status
// fails a command; a data field named status does not.
func TestToolOutcomeFails(t *testing.T) {
	body := `
workflow:
  - step: start
    tool: {kind: noop}
    next: after
  - step: after
    tool: {kind: noop}
`
	cases := []struct {
		name   string
		reply  enginetest.Reply
		status string
	}{
		{"error envelope then command.completed", enginetest.Reply{Status: "error", Error: "Traceback...\nValueError: boom"}, lifecycle.ExecutionFailed},
		{"timeout envelope", enginetest.Reply{Status: "timeout"}, lifecycle.ExecutionFailed},
		{"command.failed", enginetest.Reply{Fail: true, Error: "worker crashed"}, lifecycle.ExecutionFailed},
		{"data status failed is data (R-R2)", enginetest.Reply{Data: map[string]any{"status": "failed"}}, lifecycle.ExecutionCompleted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := sim(t, body)
			s.Tools = map[string]enginetest.Tool{"start": func(*enginetest.Cmd) enginetest.Reply { return c.reply }}
			run(t, s, nil)
			if s.Status() != c.status {
				t.Fatalf("status %s, want %s (log %v)", s.Status(), c.status, s.Types(""))
			}
			if c.status == lifecycle.ExecutionFailed && s.Count("step.enter", "after") != 0 {
				t.Fatalf("a failed step must not route")
			}
		})
	}
}

// TestRetry: dsl.md §4.4 and R-L6 — same command id, attempt + 1, command.retry
// with the backoff delay; no second command.issued.
func TestRetry(t *testing.T) {
	for _, c := range []struct {
		backoff string
		delays  []float64
	}{
		{"fixed", []float64{2, 2, 2}},
		{"linear", []float64{2, 4, 5}},      // 6 capped by max_delay 5
		{"exponential", []float64{2, 4, 5}}, // 8 capped by max_delay 5
	} {
		t.Run(c.backoff, func(t *testing.T) {
			s := sim(t, `
workflow:
  - step: start
    retry: {max_attempts: 4, delay: 2, backoff: `+c.backoff+`, max_delay: 5}
    tool: {kind: noop}
`)
			attempts := 0
			s.Default = func(cmd *enginetest.Cmd) enginetest.Reply {
				attempts++
				if cmd.Attempt < 4 {
					return enginetest.Reply{Status: "error", Error: "flaky"}
				}
				return enginetest.Reply{Data: "finally"}
			}
			t0 := s.Clock
			run(t, s, nil)
			if s.Status() != lifecycle.ExecutionCompleted || attempts != 4 || s.Count("command.issued", "") != 1 {
				t.Fatalf("status %s attempts %d issued %d", s.Status(), attempts, s.Count("command.issued", ""))
			}
			var delays []float64
			var ids []string
			at := t0
			for _, e := range s.Log {
				if e.Type == "command.retry" {
					delays = append(delays, e.Meta["delay_seconds"].(float64))
					ids = append(ids, e.CommandID)
					want := at.Add(time.Duration(e.Meta["delay_seconds"].(float64) * float64(time.Second)))
					if e.Meta["available_at"] != want.UTC().Format(time.RFC3339Nano) {
						t.Errorf("available_at %v, want trigger time + delay %v", e.Meta["available_at"], want)
					}
					at = want
				}
			}
			if !reflect.DeepEqual(delays, c.delays) {
				t.Errorf("delays %v, want %v", delays, c.delays)
			}
			if ids[0] != ids[1] || ids[1] != ids[2] || ids[0] != s.Log[s.Index("command.issued", "start", 0)].CommandID {
				t.Errorf("retries must reuse the command id: %v", ids)
			}
			if st := s.Snapshot().Steps["start"]; st.Attempts != 4 {
				t.Errorf("attempts = %d", st.Attempts)
			}
		})
	}
}

// TestRetryClasses: R-L3 — expired leases retry up to max(max_attempts, 3);
// retry.on narrows the classes.
func TestRetryClasses(t *testing.T) {
	t.Run("expired retried three times by default", func(t *testing.T) {
		s := sim(t, "workflow:\n  - step: start\n    tool: {kind: noop}\n")
		n := 0
		s.Default = func(*enginetest.Cmd) enginetest.Reply { n++; return enginetest.Reply{Expire: true} }
		run(t, s, nil)
		if n != 3 || s.Status() != lifecycle.ExecutionFailed || !strings.Contains(s.Snapshot().Error, "lease expired") {
			t.Fatalf("attempts %d status %s error %q", n, s.Status(), s.Snapshot().Error)
		}
	})
	t.Run("expired then success", func(t *testing.T) {
		s := sim(t, "workflow:\n  - step: start\n    tool: {kind: noop}\n")
		s.Default = func(c *enginetest.Cmd) enginetest.Reply {
			if c.Attempt == 1 {
				return enginetest.Reply{Expire: true}
			}
			return enginetest.Reply{Data: c.Attempt}
		}
		run(t, s, nil)
		if s.Status() != lifecycle.ExecutionCompleted || s.Result("start") != int64(2) {
			t.Fatalf("status %s result %v", s.Status(), s.Result("start"))
		}
	})
	t.Run("error not retried by default", func(t *testing.T) {
		s := sim(t, "workflow:\n  - step: start\n    tool: {kind: noop}\n")
		n := 0
		s.Default = func(*enginetest.Cmd) enginetest.Reply { n++; return enginetest.Reply{Status: "error"} }
		run(t, s, nil)
		if n != 1 {
			t.Fatalf("attempts %d, want 1 (max_attempts defaults to 1)", n)
		}
	})
	t.Run("on excludes timeout", func(t *testing.T) {
		s := sim(t, "workflow:\n  - step: start\n    retry: {max_attempts: 3, on: [error]}\n    tool: {kind: noop}\n")
		n := 0
		s.Default = func(*enginetest.Cmd) enginetest.Reply { n++; return enginetest.Reply{Status: "timeout"} }
		run(t, s, nil)
		if n != 1 || s.Status() != lifecycle.ExecutionFailed {
			t.Fatalf("attempts %d status %s", n, s.Status())
		}
	})
	t.Run("retry_on_status", func(t *testing.T) {
		s := sim(t, "workflow:\n  - step: start\n    retry: {max_attempts: 3, retry_on_status: [503]}\n    tool: {kind: noop}\n")
		n := 0
		s.Default = func(*enginetest.Cmd) enginetest.Reply {
			n++
			code := int64(503)
			if n == 2 {
				code = 404
			}
			return enginetest.Reply{Status: "error", Data: map[string]any{"status_code": code}}
		}
		run(t, s, nil)
		if n != 2 {
			t.Fatalf("attempts %d, want 2 (503 retried, 404 not)", n)
		}
	})
}

// TestRenderErrorNotRetried: R-L6 — render errors at dispatch are deterministic.
func TestRenderErrorNotRetried(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    retry: {max_attempts: 5}
    tool: {kind: noop, message: "{{ 1 // 0 }}"}
`)
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed || s.Count("command.issued", "") != 0 || !strings.Contains(s.Snapshot().Error, "tool:") {
		t.Fatalf("status %s issued %d error %q", s.Status(), s.Count("command.issued", ""), s.Snapshot().Error)
	}
}

// TestStepResults: dsl.md §4.5 — single tool → data; loop → list in index order;
// failed iterations with on_error continue → {error} entries.
func TestStepResults(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: looped
  - step: looped
    spec: {on_error: continue}
    loop: {in: [1, 2, 3], iterator: x, spec: {mode: parallel}}
    tool: {kind: noop, input: {x: "{{ x }}"}}
`)
	s.Tools = map[string]enginetest.Tool{
		"start": ok(map[string]any{"a": 1}),
		"looped": func(c *enginetest.Cmd) enginetest.Reply {
			if enginetest.Args(c)["x"] == int64(2) {
				return enginetest.Reply{Status: "error", Error: "two is bad"}
			}
			return enginetest.Reply{Data: enginetest.Args(c)["x"]}
		},
	}
	run(t, s, nil)
	if !reflect.DeepEqual(s.Result("start"), map[string]any{"a": int64(1)}) {
		t.Errorf("start result %v", s.Result("start"))
	}
	want := []any{int64(1), map[string]any{"error": "two is bad"}, int64(3)}
	if got := s.Result("looped"); !reflect.DeepEqual(got, want) || s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("loop result %v (status %s)", got, s.Status())
	}
}

// TestNoETLStepViews: docs/noetl-playbooks.md — under its own name a loop step is
// NoETL's loop aggregate (results, data, count, stats; a kept failed iteration
// counts as failed) while output and steps.<name>.result stay the list; a pipeline
// step has NoETL's results (label → data); an object is its own data.
func TestNoETLStepViews(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: looped
  - step: looped
    spec: {on_error: continue}
    loop: {in: [1, 2, 3], iterator: x}
    tool: {kind: noop, input: {x: "{{ x }}"}}
    set: {ctx.out_len: "{{ output | length }}"}
    next: piped
  - step: reader
    tool:
      kind: noop
      input:
        stats: "{{ looped.stats }}"
        data_len: "{{ looped.data | length }}"
        results_first: "{{ looped.results[0] }}"
        count: "{{ looped.count }}"
        steps_len: "{{ steps.looped.result | length }}"
        out_len: "{{ ctx.out_len }}"
        own_data: "{{ start.data.rows[1] }}"
        piped: "{{ piped.results.second.n }}"
  - step: piped
    tool:
      - first: {kind: noop}
      - second: {kind: noop}
    next: reader
`)
	s.Tools = map[string]enginetest.Tool{
		"start": func(*enginetest.Cmd) enginetest.Reply {
			return enginetest.Reply{Data: map[string]any{"rows": []any{"a", "b"}}}
		},
		"looped": func(c *enginetest.Cmd) enginetest.Reply {
			if enginetest.Args(c)["x"] == int64(2) {
				return enginetest.Reply{Status: "error", Error: "two is bad"}
			}
			return enginetest.Reply{Data: enginetest.Args(c)["x"]}
		},
		"reader": echoArgs,
		"piped":  ok(map[string]any{"first": map[string]any{"n": 1}, "second": map[string]any{"n": 2}, "n": 2}),
	}
	run(t, s, nil)
	want := map[string]any{"piped": int64(2), "stats": map[string]any{"total": int64(3), "success": int64(2), "failed": int64(1)},
		"data_len": int64(3), "results_first": int64(1), "count": int64(3), "steps_len": int64(3), "out_len": int64(3),
		"own_data": "b"}
	if got := s.Result("reader"); !reflect.DeepEqual(got, want) {
		t.Fatalf("reader saw %v\nwant %v", got, want)
	}
	if got := s.Result("looped"); !reflect.DeepEqual(got, []any{int64(1), map[string]any{"error": "two is bad"}, int64(3)}) {
		t.Fatalf("the stored loop result is the list: %v", got)
	}
}

// TestLoopIterationFailure: a loop fails if an iteration fails after its retries;
// a sequential loop stops issuing (R-W3).
func TestLoopIterationFailure(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    loop: {in: [1, 2, 3], iterator: x}
    tool: {kind: noop, input: {x: "{{ x }}"}}
`)
	s.Default = func(c *enginetest.Cmd) enginetest.Reply {
		if enginetest.Args(c)["x"] == int64(2) {
			return enginetest.Reply{Status: "error", Error: "bad item"}
		}
		return enginetest.Reply{Data: 1}
	}
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed || s.Count("command.issued", "start") != 2 {
		t.Fatalf("status %s, issued %d (iteration 3 must not run)", s.Status(), s.Count("command.issued", "start"))
	}
	if !strings.Contains(s.Snapshot().Error, "iteration 1: bad item") {
		t.Errorf("error %q", s.Snapshot().Error)
	}
}

// TestSetAndRouting: dsl.md §4.6 — set sees output and the step's own name; arcs
// see what set wrote; a skipped or unrun step renders null.
func TestSetAndRouting(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    set:
      ctx.n: "{{ output.n + 1 }}"
      ctx.same: "{{ start.n }}"
      ctx.before: "{{ ctx.n | default('unset') }}"
    next:
      spec: {mode: exclusive}
      arcs:
        - step: big
          when: "{{ ctx.n > 5 }}"
        - step: small
  - step: big
    tool: {kind: noop}
  - step: small
    tool: {kind: noop, input: {big: "{{ big }}", bigdef: "{{ big is defined }}"}}
`)
	s.Tools = map[string]enginetest.Tool{"start": ok(map[string]any{"n": int64(5)}), "small": echoArgs}
	run(t, s, nil)
	ctx := s.Snapshot().Ctx
	if ctx["n"] != int64(6) || ctx["same"] != int64(5) || ctx["before"] != "unset" {
		t.Fatalf("ctx %v (set values are simultaneous, R-W3)", ctx)
	}
	if s.StepStatus("big") != "completed" || s.StepStatus("small") != "skipped" {
		t.Fatalf("big %s small %s: the arc must see ctx.n = 6", s.StepStatus("big"), s.StepStatus("small"))
	}
}

// TestNotRunAndSkippedBindings: R-T3 — a skipped step is defined and null; a step
// that has not run is undefined; R-T8 — {{ step }} is the latest finished visit.
func TestNotRunAndSkippedBindings(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next:
      arcs:
        - step: skipped_one
          when: "{{ false }}"
        - step: probe
  - step: skipped_one
    tool: {kind: noop}
  - step: never
    tool: {kind: noop}
  - step: probe
    tool:
      kind: noop
      input:
        skipped_defined: "{{ skipped_one is defined }}"
        skipped_value: "{{ skipped_one }}"
        never_defined: "{{ never is defined }}"
        never_value: "{{ never | default('dflt') }}"
`)
	s.Tools = map[string]enginetest.Tool{"probe": echoArgs}
	run(t, s, nil)
	want := map[string]any{"skipped_defined": true, "skipped_value": nil, "never_defined": false, "never_value": "dflt"}
	if got := s.Result("probe"); !reflect.DeepEqual(got, want) {
		t.Fatalf("bindings %v, want %v", got, want)
	}
}

// TestFailureWaitsForRunning: dsl.md §4.7 and R-R9 — nothing new is dispatched,
// pending commands are cancelled, running ones finish and record step.exit, and
// playbook.failed comes once nothing runs, with failed_steps in seq order.
func TestFailureWaitsForRunning(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: [a, b, c]
  - step: a
    tool: {kind: noop}
    next: after_a
  - step: b
    tool: {kind: noop}
    next: after_b
  - step: c
    retry: {max_attempts: 2, delay: 60}
    tool: {kind: noop}
  - step: after_a
    tool: {kind: noop}
  - step: after_b
    tool: {kind: noop}
`)
	if err := s.Start(nil); err != nil {
		t.Fatal(err)
	}
	s.Step() // start
	p := s.Pending()
	if len(p) != 3 {
		t.Fatalf("want a, b, c pending, got %d", len(p))
	}
	a, b, c := p[0], p[1], p[2]
	// b is claimed and running; c fails once and has a retry scheduled.
	must(t, s.Claim(b, "w2"))
	must(t, s.Claim(c, "w3"))
	must(t, s.Finish(c, enginetest.Reply{Status: "error", Error: "c flaked"}))
	if s.Count("command.retry", "c") != 1 {
		t.Fatalf("c should have a retry scheduled")
	}
	// a fails fatally.
	must(t, s.Claim(a, "w1"))
	must(t, s.Finish(a, enginetest.Reply{Status: "error", Error: "a broke"}))
	if s.Status() != lifecycle.ExecutionFailing {
		t.Fatalf("status %s, want FAILING while b runs", s.Status())
	}
	if s.Commands[c.ID].Status != "CANCELLED" {
		t.Errorf("the scheduled retry of c must be cancelled, is %s", s.Commands[c.ID].Status)
	}
	// b's late completion is recorded as step.exit but routes nowhere.
	must(t, s.Finish(b, enginetest.Reply{Data: "b done"}))
	invariants(t, s)
	if s.Status() != lifecycle.ExecutionFailed {
		t.Fatalf("status %s", s.Status())
	}
	if s.StepStatus("b") != "completed" || s.Count("step.enter", "after_b") != 0 || s.Count("step.enter", "after_a") != 0 {
		t.Fatalf("b %s, after_b entered %d", s.StepStatus("b"), s.Count("step.enter", "after_b"))
	}
	last := s.Log[len(s.Log)-1]
	if last.Type != "playbook.failed" || last.Context["error"] != "a broke" || !reflect.DeepEqual(last.Context["failed_steps"], []any{"a"}) {
		t.Fatalf("last event %s %v", last.Type, last.Context)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestOnErrorContinue: dsl.md §4.7 — the step completes with {error} and routing
// goes on; error is bound in set and arcs.
func TestOnErrorContinue(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    spec: {on_error: continue}
    tool: {kind: noop}
    set: {ctx.err: "{{ error }}"}
    next: [{step: handler, when: "{{ error is not none }}"}]
  - step: handler
    tool: {kind: noop}
`)
	s.Tools = map[string]enginetest.Tool{"start": func(*enginetest.Cmd) enginetest.Reply {
		return enginetest.Reply{Status: "error", Error: "boom"}
	}}
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionCompleted || s.StepStatus("handler") != "completed" {
		t.Fatalf("status %s handler %s", s.Status(), s.StepStatus("handler"))
	}
	if !reflect.DeepEqual(s.Result("start"), map[string]any{"error": "boom"}) || s.Snapshot().Ctx["err"] != "boom" {
		t.Fatalf("result %v ctx %v", s.Result("start"), s.Snapshot().Ctx)
	}
}

// TestJoins: dsl.md §4.8, R-J3 — a join dispatches once, after every predecessor
// that can still reach it finished, with at least one arc fired.
func TestJoins(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: {spec: {mode: inclusive}, arcs: [{step: left}, {step: right}, {step: skipped_branch, when: "{{ false }}"}]}
  - step: left
    tool: {kind: noop}
    next: join
  - step: right
    tool: {kind: noop}
    next: deeper
  - step: deeper
    tool: {kind: noop}
    next: join
  - step: skipped_branch
    tool: {kind: noop}
    next: join
  - step: join
    tool: {kind: noop}
`)
	run(t, s, nil)
	if s.Count("step.enter", "join") != 1 {
		t.Fatalf("join entered %d times", s.Count("step.enter", "join"))
	}
	enter := s.Index("step.enter", "join", 0)
	if enter < s.Index("step.exit", "left", 0) || enter < s.Index("step.exit", "deeper", 0) || enter < s.Index("step.skipped", "skipped_branch", 0) {
		t.Fatalf("join entered at %d before its predecessors finished", enter)
	}
}

// TestSkipCascade: R-J4 — skips cascade through chains so joins after a branch
// never wait forever and the run reaches end (NoETL bug).
func TestSkipCascade(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: {arcs: [{step: high, when: "{{ false }}"}, {step: low}]}
  - step: high
    tool: {kind: noop}
    next: high2
  - step: high2
    tool: {kind: noop}
    next: high3
  - step: high3
    tool: {kind: noop}
    next: end
  - step: low
    tool: {kind: noop}
    next: end
  - step: end
    tool: {kind: noop}
`)
	run(t, s, nil)
	for _, st := range []string{"high", "high2", "high3"} {
		if s.StepStatus(st) != "skipped" {
			t.Errorf("%s is %s, want skipped", st, s.StepStatus(st))
		}
	}
	if s.StepStatus("end") != "completed" || s.Count("step.enter", "end") != 1 {
		t.Fatalf("end %s entered %d", s.StepStatus("end"), s.Count("step.enter", "end"))
	}
}

// TestCycles: dsl.md §4.9 — arcs to an earlier step or to itself start new
// visits (NoETL hangs on self-arcs).
func TestCycles(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.i: 0}
    next: tick
  - step: tick
    tool: {kind: noop}
    set: {ctx.i: "{{ ctx.i + 1 }}"}
    next:
      - {step: tick, when: "{{ ctx.i < 3 }}"}
      - {step: tock, when: "{{ ctx.i >= 3 }}"}
  - step: tock
    tool: {kind: noop}
    set: {ctx.j: "{{ (ctx.j | default(0)) + 1 }}"}
    next: [{step: start2, when: "{{ ctx.j < 2 }}"}]
  - step: start2
    tool: {kind: noop}
    set: {ctx.i: 0}
    next: tick
`)
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("status %s", s.Status())
	}
	if n := s.Count("step.enter", "tick"); n != 6 {
		t.Fatalf("tick visited %d times, want 6", n)
	}
	if st := s.Snapshot().Steps["tick"]; st.Visits != 6 {
		t.Fatalf("visits = %d", st.Visits)
	}
}

// TestMaxVisits: R-J8 — exceeding max_visits fails the playbook regardless of
// on_error, naming the step and the limit.
func TestMaxVisits(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    spec: {max_visits: 4, on_error: continue}
    tool: {kind: noop}
    next: start
`)
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed || s.Count("step.enter", "start") != 4 {
		t.Fatalf("status %s enters %d", s.Status(), s.Count("step.enter", "start"))
	}
	if e := s.Snapshot().Error; !strings.Contains(e, `"start"`) || !strings.Contains(e, "max_visits (4)") {
		t.Fatalf("error %q must name the step and the limit", e)
	}
}

// TestCompletion: dsl.md §4.10, R-R7, R-R11 — several leaves complete when the
// last finishes; the result is the final ctx; never-reached steps stay pending.
func TestCompletion(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.a: 1}
    next: [leaf1, leaf2]
  - step: leaf1
    tool: {kind: noop}
  - step: leaf2
    tool: {kind: noop}
    set: {ctx.b: 2}
  - step: island
    tool: {kind: noop}
`)
	run(t, s, nil)
	last := s.Log[len(s.Log)-1]
	if last.Type != "playbook.completed" || !reflect.DeepEqual(last.Context["result"], map[string]any{"a": int64(1), "b": int64(2)}) {
		t.Fatalf("last %s %v", last.Type, last.Context)
	}
	if s.StepStatus("island") != "pending" || s.Count("step.skipped", "island") != 0 {
		t.Fatalf("island %s (R-R11, R-W4: never dispatched nor skipped)", s.StepStatus("island"))
	}
	if s.Count("playbook.completed", "") != 1 {
		t.Fatal("completed twice")
	}
}

// TestCancel: dsl.md §4.11, R-R10 — every command in flight is cancelled; late
// results are recorded and ignored.
func TestCancel(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: [a, b]
  - step: a
    tool: {kind: noop}
    next: c
  - step: b
    tool: {kind: noop}
  - step: c
    tool: {kind: noop}
`)
	must(t, s.Start(nil))
	s.Step()
	p := s.Pending()
	must(t, s.Claim(p[0], "w"))
	must(t, s.Post(engine.Event{Type: "playbook.cancelled", Status: "CANCELLED", Context: map[string]any{"reason": "user"}}))
	if s.Status() != lifecycle.ExecutionCancelled {
		t.Fatalf("status %s", s.Status())
	}
	for _, c := range p {
		if s.Commands[c.ID].Status != "CANCELLED" {
			t.Errorf("command %s is %s", c.ID, s.Commands[c.ID].Status)
		}
	}
	n := len(s.Log)
	must(t, s.Finish(p[0], enginetest.Reply{Data: "late"}))
	invariants(t, s)
	if s.Status() != lifecycle.ExecutionCancelled || len(s.Log) != n+2 || s.Count("step.enter", "c") != 0 {
		t.Fatalf("late result changed the run: status %s, %d new events", s.Status(), len(s.Log)-n)
	}
	for _, st := range []string{"a", "b"} {
		if s.StepStatus(st) != "cancelled" {
			t.Errorf("%s is %s", st, s.StepStatus(st))
		}
	}
}

// TestDeterminism: dsl.md §4.12 — the same inputs give the same log, byte for
// byte, whatever Go's map order does.
func TestDeterminism(t *testing.T) {
	body := `
workload: {m: {z: 1, a: 2, k: 3}}
workflow:
  - step: start
    tool: {kind: noop, input: {m: "{{ m }}"}}
    set: {ctx.x: "{{ m | keys }}", ctx.y: "{{ m | items }}"}
    next: {spec: {mode: inclusive}, arcs: [{step: a}, {step: b}, {step: c}]}
  - step: a
    loop: {in: "{{ m }}", iterator: kv, spec: {mode: parallel}}
    tool: {kind: noop, input: {kv: "{{ kv }}"}}
    next: j
  - step: b
    tool: {kind: noop}
    next: j
  - step: c
    tool: {kind: noop}
    next: j
  - step: j
    tool: {kind: noop}
`
	var first string
	for i := range 5 {
		s := sim(t, body)
		s.Default = echoArgs
		run(t, s, nil)
		got := fmt.Sprint(s.Log)
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("run %d differs", i)
		}
	}
}

// TestSequentialLoopContext: R-W3 — a sequential iteration's _context_updates
// apply before the next iteration renders; R-R5 strips them from the result.
func TestSequentialLoopContext(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    loop: {in: [1, 2, 3], iterator: x}
    tool: {kind: noop, input: {seen: "{{ ctx.total | default(0) }}", x: "{{ x }}"}}
`)
	s.Default = func(c *enginetest.Cmd) enginetest.Reply {
		a := enginetest.Args(c)
		total := a["seen"].(int64) + a["x"].(int64)
		return enginetest.Reply{Data: map[string]any{"total": total, "_context_updates": map[string]any{"total": total}}}
	}
	run(t, s, nil)
	want := []any{map[string]any{"total": int64(1)}, map[string]any{"total": int64(3)}, map[string]any{"total": int64(6)}}
	if got := s.Result("start"); !reflect.DeepEqual(got, want) {
		t.Fatalf("result %v", got)
	}
	if s.Snapshot().Ctx["total"] != int64(6) {
		t.Fatalf("ctx %v", s.Snapshot().Ctx)
	}
}

// TestContextUpdatesBeforeSet: R-R5 — _context_updates apply as ctx.updated
// before the step's own set, and are stripped from the stored result.
func TestContextUpdatesBeforeSet(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.doubled: "{{ ctx.counter * 2 }}"}
`)
	s.Default = ok(map[string]any{"v": 1, "_context_updates": map[string]any{"counter": int64(21), "config.timeout": int64(30)}})
	run(t, s, nil)
	ctx := s.Snapshot().Ctx
	if ctx["counter"] != int64(21) || ctx["doubled"] != int64(42) || !reflect.DeepEqual(ctx["config"], map[string]any{"timeout": int64(30)}) {
		t.Fatalf("ctx %v", ctx)
	}
	if !reflect.DeepEqual(s.Result("start"), map[string]any{"v": int64(1)}) {
		t.Fatalf("result %v still has _context_updates", s.Result("start"))
	}
	if s.Count("ctx.updated", "start") != 2 {
		t.Fatalf("want two ctx.updated (updates, then set)")
	}
}

// TestEventBinding: R-W2 — event.name is loop.done for loops, step.exit otherwise.
func TestEventBinding(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.e1: "{{ event.name }}"}
    next: [{step: lp, when: "{{ event.name == 'step.exit' and event.step == 'start' }}"}]
  - step: lp
    loop: {in: [1], iterator: x}
    tool: {kind: noop}
    set: {ctx.e2: "{{ event.name }}", ctx.n: "{{ output | length }}"}
`)
	run(t, s, nil)
	ctx := s.Snapshot().Ctx
	if ctx["e1"] != "step.exit" || ctx["e2"] != "loop.done" || ctx["n"] != int64(1) {
		t.Fatalf("ctx %v (R-A9: a loop's set runs once with output = the list)", ctx)
	}
}

// TestLoopWhenOnce: R-A9 — when is evaluated once per step, not per iteration.
func TestLoopWhenOnce(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: lp
  - step: lp
    when: "{{ ctx.stop is not defined }}"
    loop: {in: [1, 2, 3], iterator: x}
    tool: {kind: noop}
`)
	s.Tools = map[string]enginetest.Tool{"lp": ok(map[string]any{"_context_updates": map[string]any{"stop": true}})}
	run(t, s, nil)
	if s.Snapshot().Ctx["stop"] != true || s.Count("command.issued", "lp") != 3 {
		t.Fatalf("issued %d, want all 3 iterations", s.Count("command.issued", "lp"))
	}
}

// TestWorkloadTemplating: R-W5 — string workload values with templates render once
// at start; payload values are data and never rendered; job.uuid is stable.
func TestWorkloadTemplating(t *testing.T) {
	pb := parse(t, `
workload:
  run_id: "run-{{ execution_id }}"
  from_payload: "{{ payload.x }}"
  job_id: "{{ job.uuid }}"
  literal: "{{ 'rendered unless overridden' }}"
workflow:
  - step: start
    tool: {kind: noop}
`)
	wl, err := pb.PrepareWorkload(99, 7, map[string]any{"x": "{{ raw }}", "literal": "plain"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if wl["run_id"] != "run-99" || wl["from_payload"] != "{{ raw }}" || wl["literal"] != "plain" {
		t.Fatalf("workload %v", wl)
	}
	if wl["job_id"] != playbook.JobUUID(99) || playbook.JobUUID(99) == playbook.JobUUID(100) || len(playbook.JobUUID(99)) != 36 {
		t.Fatalf("job uuid %v", wl["job_id"])
	}
}

// TestUnsupportedKindFailsAtDispatch: R-N1.
func TestUnsupportedKindFailsAtDispatch(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: duck
  - step: duck
    tool: {kind: snowflake, query: select 1}
`)
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed || !strings.Contains(s.Snapshot().Error, "tool kind snowflake is not supported") || s.Count("command.issued", "duck") != 0 {
		t.Fatalf("status %s error %q", s.Status(), s.Snapshot().Error)
	}
}

// TestLedgerMerge: R-J2 — arc set values of several fired arcs merge in firing
// order (later wins) and are transient: visible to the dispatched visit only
// (R-T9), at top level and under ctx.
func TestLedgerMerge(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: {spec: {mode: inclusive}, arcs: [{step: a}, {step: b}]}
  - step: a
    tool: {kind: noop}
    next: [{step: j, set: {ctx.who: a, ctx.only_a: 1}}]
  - step: b
    tool: {kind: noop}
    next: [{step: j, set: {who: b}}]
  - step: j
    tool: {kind: noop, input: {who: "{{ who }}", ctx_who: "{{ ctx.who }}", only_a: "{{ only_a }}"}}
    next: after
  - step: after
    tool: {kind: noop, input: {who: "{{ who | default('gone') }}"}}
`)
	s.Default = echoArgs
	run(t, s, nil)
	if got := s.Result("j"); !reflect.DeepEqual(got, map[string]any{"who": "b", "ctx_who": "b", "only_a": int64(1)}) {
		t.Fatalf("j saw %v", got)
	}
	if got := s.Result("after"); !reflect.DeepEqual(got, map[string]any{"who": "gone"}) {
		t.Fatalf("arc set leaked to the next step: %v", got)
	}
	if _, durable := s.Snapshot().Ctx["who"]; durable {
		t.Fatal("arc set must not become durable")
	}
}

// TestVisitsCoalesce: R-J7 — arcs into a running step are held and start one new
// visit when it ends; visits never overlap.
func TestVisitsCoalesce(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: {spec: {mode: inclusive}, arcs: [{step: slow}, {step: f1}, {step: f2}]}
  - step: f1
    tool: {kind: noop}
    next: slow2
  - step: f2
    tool: {kind: noop}
    next: slow2
  - step: slow
    tool: {kind: noop}
    next: slow2
  - step: slow2
    tool: {kind: noop}
`)
	run(t, s, nil)
	if n := s.Count("step.enter", "slow2"); n != 1 {
		t.Fatalf("slow2 entered %d times", n)
	}
	// Arcs from start and from feeder both land in w's ledger: w waits for feeder
	// (an active ancestor, R-J3) and the two arcs coalesce into one visit.
	s2 := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: {spec: {mode: inclusive}, arcs: [{step: w, set: {from: start}}, {step: feeder}]}
  - step: feeder
    tool: {kind: noop}
    next: [{step: w, set: {from: feeder}}]
  - step: w
    tool: {kind: noop, input: {from: "{{ from }}"}}
`)
	s2.Default = echoArgs
	run(t, s2, nil)
	if s2.Count("step.enter", "w") != 1 || s2.Index("step.enter", "w", 0) < s2.Index("step.exit", "feeder", 0) {
		t.Fatalf("w entered %d times, at %d, feeder exited at %d", s2.Count("step.enter", "w"), s2.Index("step.enter", "w", 0), s2.Index("step.exit", "feeder", 0))
	}
	if got := s2.Result("w"); !reflect.DeepEqual(got, map[string]any{"from": "feeder"}) {
		t.Fatalf("w saw %v: the later arc's set must win (R-J2)", got)
	}
}

// TestFedFromCycleRunsOnce: R-J7 — a step fed from inside a cycle runs once,
// after the cycle ends.
func TestFedFromCycleRunsOnce(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.i: 0}
    next: body
  - step: body
    tool: {kind: noop}
    set: {ctx.i: "{{ ctx.i + 1 }}"}
    next: {spec: {mode: inclusive}, arcs: [{step: body, when: "{{ ctx.i < 4 }}"}, {step: report}]}
  - step: report
    tool: {kind: noop, input: {i: "{{ ctx.i }}"}}
`)
	s.Default = echoArgs
	run(t, s, nil)
	if s.Count("step.enter", "report") != 1 || !reflect.DeepEqual(s.Result("report"), map[string]any{"i": int64(4)}) {
		t.Fatalf("report entered %d, saw %v", s.Count("step.enter", "report"), s.Result("report"))
	}
}

// TestDeadlockBreaker: R-J6 — two waiting steps in each other's ancestor sets are
// dispatched in depth-first preorder instead of hanging.
func TestDeadlockBreaker(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: {spec: {mode: inclusive}, arcs: [{step: x}, {step: y}]}
  - step: x
    tool: {kind: noop}
    next: [{step: y, when: "{{ y is not defined }}"}]
  - step: y
    tool: {kind: noop}
    next: [{step: x, when: "{{ x is not defined }}"}]
`)
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("status %s: %v", s.Status(), s.Types(""))
	}
	if s.Index("step.enter", "x", 0) > s.Index("step.enter", "y", 0) {
		t.Fatal("x comes first in preorder and must be dispatched first")
	}
}

// TestNoOverlapOfSteps and R-S4: seqs are contiguous, the trigger first.
func TestSeqAndTimes(t *testing.T) {
	s := sim(t, "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: b\n  - step: b\n    tool: {kind: noop}\n")
	run(t, s, nil)
	for i := 1; i < len(s.Log); i++ {
		if s.Log[i].Time.Before(s.Log[i-1].Time) {
			t.Fatalf("created_at goes backwards at %d (R-S4)", i)
		}
	}
	ids := map[int64]bool{}
	for _, e := range s.Log {
		if ids[e.ID] {
			t.Fatalf("duplicate event id %d", e.ID)
		}
		ids[e.ID] = true
	}
}

// TestNumbersStayInt: R-T10 — integral values stay int64 end to end, ids above
// 2^53 included.
func TestNumbersStayInt(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop, input: {id: "{{ big }}", sum: "{{ big + 1 }}"}}
    set: {ctx.id: "{{ output.id }}"}
`)
	s.Default = echoArgs
	big := int64(1)<<60 + 3
	run(t, s, map[string]any{"big": big})
	r := s.Result("start").(map[string]any)
	if r["id"] != big || r["sum"] != big+1 || s.Snapshot().Ctx["id"] != big {
		t.Fatalf("result %#v ctx %#v", r, s.Snapshot().Ctx)
	}
}

// TestCommandPayload: R-S3 — a single tool ships rendered (python code too, as
// NoETL renders it, with the render context its code names for python's
// `context`); step input
// merges under the tool's (tool wins); a pipeline ships raw items with the values
// its templates read.
func TestCommandPayload(t *testing.T) {
	s := sim(t, `
workload: {name: ada, unused: 1}
workflow:
  - step: start
    input: {who: "{{ name }}", shared: step}
    tool:
      kind: python
      input: {shared: tool, n: "{{ 1 + 1 }}"}
      code: "x = '{{ name }}'"
    next: pipe
  - step: pipe
    input: {a: "{{ name }}"}
    tool:
      - first: {kind: noop, message: "{{ ctx.k }} {{ start.n }}"}
      - second: {kind: noop, message: "{{ first }}"}
`)
	s.Default = echoArgs
	run(t, s, nil)
	issued := s.Log[s.Index("command.issued", "start", 0)]
	tc := issued.Context["tool_config"].(map[string]any)
	if tc["code"] != "x = 'ada'" {
		t.Errorf("code was not rendered: %v", tc["code"])
	}
	if rc := issued.Context["render_context"]; !reflect.DeepEqual(rc, map[string]any{"name": "ada"}) {
		t.Errorf("python's render context: %v, want what its code names (name)", rc)
	}
	if want := map[string]any{"who": "ada", "shared": "tool", "n": int64(2)}; !reflect.DeepEqual(tc["args"], want) || !reflect.DeepEqual(issued.Context["args"], want) {
		t.Errorf("args %v", tc["args"])
	}
	if issued.NodeType != "python" || issued.Meta["tool_kind"] != "python" || issued.Meta["command_id"] != issued.CommandID {
		t.Errorf("meta %v", issued.Meta)
	}
	if !strings.HasPrefix(issued.CommandID, fmt.Sprintf("4242:start:%d", issued.ID)) {
		t.Errorf("command id %s", issued.CommandID)
	}
	p := s.Log[s.Index("command.issued", "pipe", 0)]
	if p.NodeType != "task_sequence" {
		t.Errorf("pipeline kind %s", p.NodeType)
	}
	// NoETL's task_sequence shape: {tasks: [{name, kind, …}], remaining_actions}.
	pc := p.Context["tool_config"].(map[string]any)
	first := pc["tasks"].([]any)[0].(map[string]any)
	if first["message"] != "{{ ctx.k }} {{ start.n }}" || first["kind"] != "noop" || first["name"] != "first" || pc["remaining_actions"] == nil {
		t.Errorf("pipeline items must ship raw: %v", first)
	}
	rc := p.Context["render_context"].(map[string]any)
	if _, has := rc["start"]; !has {
		t.Errorf("render_context lacks start: %v", rc)
	}
	if _, has := rc["unused"]; has {
		t.Errorf("render_context carries workload keys no template reads: %v", rc)
	}
	if !reflect.DeepEqual(p.Context["args"], map[string]any{"a": "ada"}) {
		t.Errorf("pipeline args %v", p.Context["args"])
	}
}

// TestSnapshotActiveOnly: R-S1 — iteration results and items live outside the
// snapshot; a large result is stored by reference and loaded when read (R-S2).
func TestSnapshotActiveOnly(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    loop: {in: "{{ 300 }}", iterator: i}
    tool: {kind: noop, input: {i: "{{ i }}"}}
    next: reader
  - step: reader
    tool: {kind: noop, input: {n: "{{ start.results | length }}", last: "{{ start.results[-1] }}"}}
`)
	s.Engine = engine.New(engine.Config{InlineResultBytes: 512})
	s.Tools = map[string]enginetest.Tool{
		"start":  func(c *enginetest.Cmd) enginetest.Reply { return enginetest.Reply{Data: enginetest.Args(c)["i"]} },
		"reader": echoArgs,
	}
	maxBytes := 0
	s.Observe = func(ev engine.Event, _ *engine.Outcome, b []byte) {
		if len(s.Log) < 1500 {
			maxBytes = max(maxBytes, len(b))
		}
	}
	run(t, s, nil)
	if !reflect.DeepEqual(s.Result("reader"), map[string]any{"n": int64(300), "last": int64(299)}) {
		t.Fatalf("reader saw %v", s.Result("reader"))
	}
	if st := s.Snapshot().Steps["start"]; st.ResultRef == nil || st.Result != nil {
		t.Fatalf("a 300-item result above the inline limit must be stored by reference: %+v", st)
	}
	if maxBytes > 2048 {
		t.Fatalf("snapshot reached %d bytes during the loop", maxBytes)
	}
	if s.NeedRetries == 0 {
		t.Fatal("the engine never asked for stored results")
	}
}

// TestResultByReference: worker.md §1 — a result the worker stored by
// reference is read through the caller (KindReference) when the step ends, for
// a single command and for loop iterations; the log keeps only the reference.
// Templates see NoETL's _ref marker on such a result (its ref is the URI) and
// on no other.
func TestResultByReference(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: each
  - step: each
    loop: {in: "{{ [1, 2] }}", iterator: i}
    tool: {kind: noop, input: {i: "{{ i }}"}}
    next: reader
  - step: reader
    tool: {kind: noop, input: {rows: "{{ start.rows | length }}", second: "{{ each.results[1].v }}",
      ref: "{{ start._ref.ref }}", each_ref: "{{ each._ref is defined }}"}}
`)
	s.Tools = map[string]enginetest.Tool{
		"start": func(*enginetest.Cmd) enginetest.Reply {
			return enginetest.Reply{Data: map[string]any{"rows": []any{1, 2, 3}}, Ref: "file:///results/start.json"}
		},
		"each": func(c *enginetest.Cmd) enginetest.Reply {
			i := enginetest.Args(c)["i"]
			return enginetest.Reply{Data: map[string]any{"v": i}, Ref: fmt.Sprintf("file:///results/each/%v.json", i)}
		},
		"reader": echoArgs,
	}
	run(t, s, nil)
	if want := map[string]any{"rows": int64(3), "second": int64(2), "ref": "file:///results/start.json", "each_ref": false}; !reflect.DeepEqual(s.Result("reader"), want) {
		t.Fatalf("reader saw %v, want %v", s.Result("reader"), want)
	}
	if s.NeedRetries < 3 {
		t.Fatalf("the engine asked for stored results %d times; want one per referenced result (3)", s.NeedRetries)
	}
	for _, ev := range s.Log {
		if ev.Type != eventtype.CallDone || ev.Step == "reader" {
			continue
		}
		r := ev.Result.(map[string]any)
		if _, has := r["context"].(map[string]any)["data"]; has || r["reference"] == nil {
			t.Fatalf("call.done must carry the reference, not the data: %v", r)
		}
	}
}

// TestPipelineResultByReference: a pipeline's result the worker stored by
// reference is read for its _context_updates; without any it stays a
// reference (nothing written to the shard), with some the updates apply and
// the stripped result is what the step keeps (inline when small).
func TestPipelineResultByReference(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: [{name: gen, kind: noop}]
    next: updating
  - step: updating
    tool: [{name: gen, kind: noop}]
    next: reader
  - step: reader
    tool: {kind: noop, input: {status: "{{ start.status }}", ref: "{{ start._ref is defined }}", n: "{{ ctx.n }}", v: "{{ updating.v }}"}}
`)
	s.Tools = map[string]enginetest.Tool{
		"start": func(*enginetest.Cmd) enginetest.Reply {
			return enginetest.Reply{Data: map[string]any{"status": "ok", "items": []any{1, 2}}, Ref: "file:///results/start.json"}
		},
		"updating": func(*enginetest.Cmd) enginetest.Reply {
			return enginetest.Reply{Data: map[string]any{"v": 7, "_context_updates": map[string]any{"n": 3}}, Ref: "file:///results/updating.json"}
		},
		"reader": echoArgs,
	}
	written := map[string]int{}
	s.Observe = func(_ engine.Event, out *engine.Outcome, _ []byte) {
		for _, w := range out.Writes {
			written[w.Key.Step]++
		}
	}
	run(t, s, nil)
	if want := map[string]any{"status": "ok", "ref": true, "n": int64(3), "v": int64(7)}; !reflect.DeepEqual(s.Result("reader"), want) {
		t.Fatalf("reader saw %v, want %v", s.Result("reader"), want)
	}
	if st := s.Snapshot().Steps["start"]; st.ResultRef == nil || st.ResultRef.Kind != engine.KindReference || written["start"] != 0 {
		t.Fatalf("start's result without context updates must stay a reference, nothing written: %+v, %d writes", st.ResultRef, written["start"])
	}
	if st := s.Snapshot().Steps["updating"]; st.ResultRef != nil || !reflect.DeepEqual(s.Result("updating"), map[string]any{"v": int64(7)}) {
		t.Fatalf("updating's result is its own, stripped of its updates: ref %+v, result %v", st.ResultRef, s.Result("updating"))
	}
}

// TestAncestors: R-J1 — anc(S) and back edges, observed through joins: a
// predecessor through a back edge does not hold a join.
func TestAncestors(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.i: 0}
    next: fetch
  - step: fetch
    tool: {kind: noop}
    next: check
  - step: check
    tool: {kind: noop}
    set: {ctx.i: "{{ ctx.i + 1 }}"}
    next:
      - {step: fetch, when: "{{ ctx.i < 4 }}"}
      - {step: done, when: "{{ ctx.i >= 4 }}"}
  - step: done
    tool: {kind: noop}
`)
	run(t, s, nil)
	if s.Count("step.enter", "fetch") != 4 || s.StepStatus("done") != "completed" || s.Count("step.skipped", "") != 0 {
		t.Fatalf("fetch %d done %s skipped %d", s.Count("step.enter", "fetch"), s.StepStatus("done"), s.Count("step.skipped", ""))
	}
}

// TestAttemptsAndVisitsView: steps.<name> exposes status, result, error,
// attempts, visits (dsl.md §5).
func TestAttemptsAndVisitsView(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    retry: {max_attempts: 2, delay: 0}
    tool: {kind: noop}
    next: probe
  - step: probe
    tool: {kind: noop, input: {v: "{{ steps.start }}", p: "{{ steps.probe.status }}"}}
`)
	s.Tools = map[string]enginetest.Tool{
		"start": func(c *enginetest.Cmd) enginetest.Reply {
			if c.Attempt == 1 {
				return enginetest.Reply{Status: "error"}
			}
			return enginetest.Reply{Data: "r"}
		},
		"probe": echoArgs,
	}
	run(t, s, nil)
	want := map[string]any{"v": map[string]any{"status": "completed", "result": "r", "error": nil, "attempts": int64(2), "visits": int64(1)}, "p": "running"}
	if got := s.Result("probe"); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}

// TestLatestFinishedVisit: R-T8 — while a step's next visit runs, {{ step }} is
// the latest finished visit's result.
func TestLatestFinishedVisit(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop, input: {prev: "{{ start | default('none') }}", visits: "{{ steps.start.visits }}"}}
    next: [{step: start, when: "{{ steps.start.visits < 3 }}"}]
`)
	var seen []any
	s.Default = func(c *enginetest.Cmd) enginetest.Reply {
		seen = append(seen, enginetest.Args(c)["prev"])
		return enginetest.Reply{Data: fmt.Sprintf("visit %d", enginetest.Args(c)["visits"])}
	}
	run(t, s, nil)
	if want := []any{"none", "visit 1", "visit 2"}; !reflect.DeepEqual(seen, want) {
		t.Fatalf("saw %v, want %v", seen, want)
	}
}

// TestFinished: the outcome tells the store how a command ended, by its envelope
// (R-R3), and says nothing while a retry is pending.
func TestFinished(t *testing.T) {
	s := sim(t, "workflow:\n  - step: start\n    retry: {max_attempts: 2, delay: 0}\n    tool: {kind: noop}\n")
	var finished []*engine.Finished
	s.Observe = func(ev engine.Event, out *engine.Outcome, _ []byte) {
		switch ev.Type {
		case eventtype.CommandCompleted:
			finished = append(finished, out.Finished)
		case eventtype.CommandClaimed, eventtype.CommandStarted, eventtype.CallDone:
			if out.Finished != nil {
				t.Errorf("%s finished the command: %+v", ev.Type, out.Finished)
			}
		}
	}
	n := 0
	s.Default = func(*enginetest.Cmd) enginetest.Reply {
		n++
		return enginetest.Reply{Status: "error", Error: "bad"}
	}
	run(t, s, nil)
	if len(finished) != 2 || finished[0] != nil || finished[1] == nil || finished[1].OK || finished[1].Class != "error" {
		t.Fatalf("finished = %v", finished)
	}
}

// TestListOfMapsFiresEveryTrueArc: dsl.md §3 — the list-of-maps shape defaults to
// inclusive: every true arc fires and its set is honoured (NoETL fires only the
// first and drops set: NoETL bug).
func TestListOfMapsFiresEveryTrueArc(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next:
      - {step: a, when: "{{ true }}", set: {tag: first}}
      - {step: b, when: "{{ 1 == 1 }}", set: {tag: second}}
      - {step: c, when: "{{ false }}"}
  - step: a
    tool: {kind: noop, input: {tag: "{{ tag }}"}}
  - step: b
    tool: {kind: noop, input: {tag: "{{ tag }}"}}
  - step: c
    tool: {kind: noop}
`)
	s.Default = echoArgs
	run(t, s, nil)
	if s.StepStatus("a") != "completed" || s.StepStatus("b") != "completed" || s.StepStatus("c") != "skipped" {
		t.Fatalf("a %s b %s c %s", s.StepStatus("a"), s.StepStatus("b"), s.StepStatus("c"))
	}
	if s.Result("a").(map[string]any)["tag"] != "first" || s.Result("b").(map[string]any)["tag"] != "second" {
		t.Fatalf("arc sets: a %v b %v", s.Result("a"), s.Result("b"))
	}
}

// TestLeafWithoutNextEndsItsBranch: a step without next ends its branch and
// the execution completes there; a step named end that no arc names is never
// entered. NoETL 4.26 does the same (its own server ran
// root_scripts/test_implicit_end_routing: COMPLETED after start and step1,
// end never issued; docs/noetl-playbooks.md).
func TestLeafWithoutNextEndsItsBranch(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: [{step: step1}]
  - step: step1
    tool: {kind: noop}
  - step: end
    tool: {kind: noop}
`)
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("status %s, want COMPLETED", s.Status())
	}
	if s.Count("step.exit", "step1") != 1 || s.Count("step.enter", "end") != 0 || s.Count("command.issued", "end") != 0 {
		t.Fatalf("step1 exits %d, end entered %d, issued %d: want 1, 0, 0", s.Count("step.exit", "step1"),
			s.Count("step.enter", "end"), s.Count("command.issued", "end"))
	}
}
