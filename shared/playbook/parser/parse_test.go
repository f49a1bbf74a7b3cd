package parser_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

// TestParseStepFields covers every field of dsl.md §2.
func TestParseStepFields(t *testing.T) {
	pb := parse(t, `
workbook:
  - name: shared_tool
    tool: {kind: python, code: "result = 1", input: {a: 1, b: 2}}
workflow:
  - step: start
    desc: entry point
    input: {who: "{{ workload.name }}"}
    tool: {kind: noop, input: {who: tool-wins}}
    set:
      ctx.total: "{{ output.n }}"
      ctx.config.timeout: 30
      plain: x
    retry: {max_attempts: 4, delay: 2, backoff: exponential, max_delay: 10, on: [error]}
    timeout: 120
    spec: {next_mode: inclusive, on_error: continue, max_visits: 7}
    next: [{step: loop_step}, {step: wb, when: "{{ false }}"}]
  - step: loop_step
    when: "{{ ctx.total > 0 }}"
    args: {x: 1}
    loop:
      in: "{{ workload.items }}"
      iterator: item
      spec: {mode: parallel, max_in_flight: 3}
    tool:
      kind: http
      url: "http://x/{{ item }}"
      retry: {max_attempts: 2}
    timeout_seconds: 9
  - step: wb
    tool: {kind: workbook, name: shared_tool, input: {b: 20}}
  - step: pipe
    tool:
      - name: first
        kind: python
        code: "result = 1"
      - second: {kind: noop}
`)
	start := pb.Step("start")
	if start.Desc != "entry point" || start.Input == nil || start.Tool.Kind != "noop" {
		t.Fatalf("start = %+v", start)
	}
	paths := []string{}
	for _, s := range start.Set {
		paths = append(paths, s.Path)
	}
	if !reflect.DeepEqual(paths, []string{"total", "config.timeout", "plain"}) {
		t.Errorf("set paths = %v (R-T9: ctx. prefix dropped, dots nest)", paths)
	}
	want := playbook.Retry{MaxAttempts: 4, Delay: 2, Backoff: "exponential", MaxDelay: 10, On: []string{"error"}}
	if !reflect.DeepEqual(start.Retry, want) {
		t.Errorf("retry = %+v", start.Retry)
	}
	if start.Timeout != 120 || start.OnError != "continue" || start.MaxVisits != 7 {
		t.Errorf("timeout/on_error/max_visits = %d %s %d", start.Timeout, start.OnError, start.MaxVisits)
	}
	if start.Next.Mode != "inclusive" || len(start.Next.Arcs) != 2 || start.Next.Arcs[1].When == nil {
		t.Errorf("next = %+v", start.Next)
	}
	ls := pb.Step("loop_step")
	if ls.When == nil || ls.Input == nil || ls.Loop.Iterator != "item" || ls.Loop.Mode != "parallel" || ls.Loop.MaxInFlight != 3 {
		t.Errorf("loop_step = %+v loop %+v", ls, ls.Loop)
	}
	if ls.Retry.MaxAttempts != 2 || ls.Timeout != 9 {
		t.Errorf("tool-level retry / timeout_seconds alias: %+v %d", ls.Retry, ls.Timeout)
	}
	if ls.Next != nil {
		t.Errorf("a step without next is a leaf")
	}
	wb := pb.Step("wb")
	if wb.Tool.Kind != "python" || !reflect.DeepEqual(wb.Tool.Raw["input"], map[string]any{"a": int64(1), "b": int64(20)}) {
		t.Errorf("workbook resolved to %+v (inputs merged, the step wins)", wb.Tool.Raw)
	}
	pipe := pb.Step("pipe")
	if len(pipe.Pipeline) != 2 || pipe.Pipeline[0].Label != "first" || pipe.Pipeline[1].Label != "second" || pipe.ToolKind() != "task_sequence" {
		t.Errorf("pipeline = %+v", pipe.Pipeline)
	}
}

func TestParseDefaults(t *testing.T) {
	pb := parse(t, `
workflow:
  - step: start
    loop: {in: [1, 2], iterator: x}
    tool: {kind: noop}
`)
	s := pb.Start()
	if s.Timeout != playbook.DefaultTimeout || s.OnError != "fail" || s.MaxVisits != 1000 {
		t.Errorf("defaults: timeout %d on_error %s max_visits %d", s.Timeout, s.OnError, s.MaxVisits)
	}
	if !reflect.DeepEqual(s.Retry, playbook.Retry{MaxAttempts: 1, Delay: 1, Backoff: "fixed", MaxDelay: 300, On: []string{"error", "timeout", "expired"}}) {
		t.Errorf("retry defaults = %+v", s.Retry)
	}
	// R-A9: max_in_flight defaults to 100; sequential is the default mode.
	if s.Loop.Mode != "sequential" || s.Loop.MaxInFlight != 100 {
		t.Errorf("loop defaults = %+v", s.Loop)
	}
}

// TestParseNextShapes covers the four shapes of dsl.md §3 and R-J9's modes.
func TestParseNextShapes(t *testing.T) {
	steps := `
  - step: a
    tool: {kind: noop}
  - step: b
    tool: {kind: noop}
`
	cases := []struct {
		name, next, stepSpec string
		mode                 string
		targets              []string
	}{
		{"router with mode", `{spec: {mode: inclusive}, arcs: [{step: a}, {step: b}]}`, "", "inclusive", []string{"a", "b"}},
		{"router without mode is exclusive (R-J9)", `{arcs: [{step: a}, {step: b}]}`, "", "exclusive", []string{"a", "b"}},
		{"router mode beats next_mode (R-J9)", `{spec: {mode: exclusive}, arcs: [{step: a}]}`, "spec: {next_mode: inclusive}", "exclusive", []string{"a"}},
		{"router without mode takes next_mode", `{arcs: [{step: a}]}`, "spec: {next_mode: inclusive}", "inclusive", []string{"a"}},
		{"list of maps defaults to inclusive", `[{step: a, when: "{{ true }}"}, {step: b}]`, "", "inclusive", []string{"a", "b"}},
		{"list of maps honours next_mode", `[{step: a}, {step: b}]`, "spec: {next_mode: exclusive}", "exclusive", []string{"a", "b"}},
		{"list of strings", `[a, b]`, "", "inclusive", []string{"a", "b"}},
		{"string", `a`, "", "inclusive", []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pb := parse(t, "workflow:\n  - step: start\n    tool: {kind: noop}\n    "+c.stepSpec+"\n    next: "+c.next+"\n"+steps)
			n := pb.Start().Next
			var got []string
			for _, a := range n.Arcs {
				got = append(got, a.To)
			}
			if n.Mode != c.mode || !reflect.DeepEqual(got, c.targets) {
				t.Fatalf("mode %s targets %v, want %s %v", n.Mode, got, c.mode, c.targets)
			}
		})
	}
}

func TestParseArcSetAndArgs(t *testing.T) {
	pb := parse(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: [{step: a, set: {ctx.x: "{{ 1 }}"}, args: {y: 2}}]
  - step: a
    tool: {kind: noop}
`)
	arc := pb.Start().Next.Arcs[0]
	if len(arc.Set) != 2 || arc.Set[0].Path != "x" || arc.Set[1].Path != "y" {
		t.Fatalf("arc set = %+v (args are a transient set, R-J9)", arc.Set)
	}
}

// TestParseErrors checks each registration error names its path (dsl.md §1).
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, body, path, msg string
	}{
		{"unknown entry_step", "executor: {spec: {entry_step: begin}}\nworkflow:\n  - step: first\n    tool: {kind: noop}\n", "executor.spec.entry_step", `entry_step names unknown step "begin"`},
		{"empty workflow", "workflow: []\n", "workflow", "has no steps"},
		{"duplicate step", "workflow:\n  - step: start\n    tool: {kind: noop}\n  - step: start\n    tool: {kind: noop}\n", "workflow[1].step", `duplicate step "start"`},
		{"unknown step", "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: {arcs: [{step: ned}]}\n", "workflow[0].next.arcs[0].step", `unknown step "ned"`},
		{"unknown string target", "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: ned\n", "workflow[0].next", `unknown step "ned"`},
		{"bad template", "workflow:\n  - step: start\n    tool: {kind: noop, message: \"{{ a + }}\"}\n", "workflow[0].tool.message", "{{ a + }}"},
		{"bad when template", "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: [{step: start, when: \"{{ (x }}\"}]\n", "workflow[0].next[0].when", "(x"},
		{"unknown filter", "workflow:\n  - step: start\n    tool: {kind: noop, message: \"{{ x | nope }}\"}\n", "workflow[0].tool.message", "nope"},
		{"set tag", "workflow:\n  - step: start\n    tool: {kind: noop, message: \"{% set x = 1 %}\"}\n", "workflow[0].tool.message", "set"},
		{"case block", "workflow:\n  - step: start\n    tool: {kind: noop}\n    case: [{when: x}]\n", "workflow[0].case", "case: blocks are not supported"},
		{"legacy then arcs", "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: [{step: start, then: [x]}]\n", "workflow[0].next[0].then", "legacy then/else"},
		{"legacy then router", "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: {then: start}\n", "workflow[0].next.then", "legacy then/else"},
		{"no tool", "workflow:\n  - step: start\n", "workflow[0].tool", "has no tool"},
		{"unknown kind", "workflow:\n  - step: start\n    tool: {kind: teleport}\n", "workflow[0].tool.kind", `unknown tool kind "teleport"`},
		{"no kind", "workflow:\n  - step: start\n    tool: {code: x}\n", "workflow[0].tool.kind", "tool needs a kind"},
		{"input and args", "workflow:\n  - step: start\n    input: {a: 1}\n    args: {a: 1}\n    tool: {kind: noop}\n", "workflow[0].args", "args is an alias"},
		{"retry twice", "workflow:\n  - step: start\n    retry: {max_attempts: 2}\n    tool: {kind: noop, retry: {max_attempts: 3}}\n", "workflow[0].tool.retry", "both on the step and inside tool"},
		{"iterator iter", "workflow:\n  - step: start\n    loop: {in: [1], iterator: iter}\n    tool: {kind: noop}\n", "workflow[0].loop.iterator", "other than iter, _index and _total"},
		{"admit without allow", "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: a\n  - step: a\n    spec: {policy: {admit: {rules: [{when: x, then: {}}]}}}\n    tool: {kind: noop}\n", "workflow[1].spec.policy.admit.rules[0].then", "allow"},
		{"spec knob twice", "workflow:\n  - step: start\n    tool: {kind: python, code: x, spec: {code: y}}\n", "workflow[0].tool.spec.code", "both on the tool and under tool.spec"},
		{"templated max_in_flight", "workflow:\n  - step: start\n    loop: {in: [1], iterator: x, spec: {mode: parallel, max_in_flight: \"{{ 1 + }}\"}}\n    tool: {kind: noop}\n", "workflow[0].loop.spec.max_in_flight", "{{ 1 + }}"},
		{"max_in_flight over the limit", "workflow:\n  - step: start\n    loop: {in: [1], iterator: x, spec: {mode: parallel, max_in_flight: 1001}}\n    tool: {kind: noop}\n", "workflow[0].loop.spec.max_in_flight", "loop max_in_flight is 1001, more than 1000 (limit playbook.MaxLoopInFlight)"},
		{"row_concurrency over the limit", "workflow:\n  - step: start\n    loop: {cursor: {kind: postgres, auth: a, claim: x}, iterator: r, spec: {mode: cursor, max_in_flight: 100, frame: {row_concurrency: 11}}}\n    tool: {kind: noop}\n", "workflow[0].loop.spec.frame.row_concurrency", "loop max_in_flight × loop.spec.frame.row_concurrency is 1100, more than 1000 (limit playbook.MaxLoopInFlight)"},
		{"set conflict", "workflow:\n  - step: start\n    tool: {kind: noop}\n    set: {ctx.a: 1, a: 2}\n", "workflow[0].set.a", "write the same name"},
		{"set nested conflict", "workflow:\n  - step: start\n    tool: {kind: noop}\n    set: {ctx.a: 1, ctx.a.b: 2}\n", "workflow[0].set.ctx.a.b", "write the same name"},
		{"set reserved", "workflow:\n  - step: start\n    tool: {kind: noop}\n    set: {ctx.workload: 1}\n", "workflow[0].set.ctx.workload", "reserved"},
		{"wrong apiVersion", "", "apiVersion", "noetl.io/v2"},
		{"loop without in", "workflow:\n  - step: start\n    loop: {iterator: x}\n    tool: {kind: noop}\n", "workflow[0].loop.in", "loop needs in"},
		{"loop without iterator", "workflow:\n  - step: start\n    loop: {in: [1]}\n    tool: {kind: noop}\n", "workflow[0].loop.iterator", "loop needs iterator"},
		{"cursor mode without cursor", "workflow:\n  - step: start\n    loop: {iterator: r, spec: {mode: cursor, frame: {max_rows: 1}}}\n    tool: {kind: noop}\n", "workflow[0].loop.cursor", "needs loop.cursor"},
		{"cursor and in", "workflow:\n  - step: start\n    loop: {in: [1], cursor: {kind: postgres, auth: a, claim: x}, iterator: r, spec: {mode: cursor}}\n    tool: {kind: noop}\n", "workflow[0].loop.cursor", "not both"},
		{"cursor in parallel mode", "workflow:\n  - step: start\n    loop: {cursor: {kind: postgres, auth: a, claim: x}, iterator: r, spec: {mode: parallel}}\n    tool: {kind: noop}\n", "workflow[0].loop.cursor", "needs spec.mode: cursor"},
		{"cursor without claim", "workflow:\n  - step: start\n    loop: {cursor: {kind: postgres, auth: a}, iterator: r, spec: {mode: cursor}}\n    tool: {kind: noop}\n", "workflow[0].loop.cursor.claim", "UPDATE … RETURNING"},
		{"frame process", "workflow:\n  - step: start\n    loop: {cursor: {kind: postgres, auth: a, claim: x}, iterator: r, spec: {mode: cursor, frame: {process: batch}}}\n    tool: {kind: noop}\n", "workflow[0].loop.spec.frame.process", "row or frame"},
		{"bad loop mode", "workflow:\n  - step: start\n    loop: {in: [1], iterator: x, spec: {mode: sideways}}\n    tool: {kind: noop}\n", "workflow[0].loop.spec.mode", "sequential, parallel or cursor"},
		{"bad next_mode", "workflow:\n  - step: start\n    spec: {next_mode: some}\n    tool: {kind: noop}\n", "workflow[0].spec.next_mode", "exclusive or inclusive"},
		{"bad on_error", "workflow:\n  - step: start\n    spec: {on_error: ignore}\n    tool: {kind: noop}\n", "workflow[0].spec.on_error", "fail or continue"},
		{"max_visits zero", "workflow:\n  - step: start\n    spec: {max_visits: 0}\n    tool: {kind: noop}\n", "workflow[0].spec.max_visits", "≥ 1"},
		{"templated timeout", "workflow:\n  - step: start\n    timeout: \"{{ x }}\"\n    tool: {kind: noop}\n", "workflow[0].timeout", "templates are not rendered here"},
		{"python without code", "workflow:\n  - step: start\n    tool: {kind: python}\n", "workflow[0].tool", "exactly one of code and script"},
		{"unknown workbook", "workflow:\n  - step: start\n    tool: {kind: workbook, name: nope}\n", "workflow[0].tool.name", `unknown workbook entry "nope"`},
		{"bad retry on", "workflow:\n  - step: start\n    retry: {on: [sometimes]}\n    tool: {kind: noop}\n", "workflow[0].retry.on", "error, timeout or expired"},
		{"policy unknown do", "workflow:\n  - step: start\n    tool: {kind: noop, spec: {policy: {rules: [{else: {then: {do: dance}}}]}}}\n", "workflow[0].tool.spec.policy.rules[0].else.then.do", `unknown action "dance" (want continue, retry, fail, break or jump)`},
		{"duplicate yaml key", "workflow:\n  - step: start\n    tool: {kind: noop}\n    tool: {kind: noop}\n", "workflow[0].tool", "duplicate key"},
		// Policy rules are checked by the worker's grammar (pipeline.CheckRule); its findings
		// land at this playbook's paths.
		{"policy negative delay", "workflow:\n  - step: start\n    tool: {kind: noop, spec: {policy: {rules: [{else: {do: retry, delay: -1}}]}}}\n", "workflow[0].tool.spec.policy.rules[0].else.delay", "expected seconds ≥ 0, got -1"},
		{"policy set key ctx alone", "workflow:\n  - step: start\n    tool: {kind: noop, spec: {policy: {rules: [{when: \"{{ true }}\", then: {set: {ctx: 1}}}]}}}\n", "workflow[0].tool.spec.policy.rules[0].then.set", `key "ctx" needs a name after it`},
		{"policy set bad template", "workflow:\n  - step: start\n    tool: {kind: noop, spec: {policy: {rules: [{else: {do: continue, set: {ctx.x: \"{{ 1 +\"}}}]}}}\n", `workflow[0].tool.spec.policy.rules[0].else.set["ctx.x"]`, "unterminated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := header + c.body
			if c.name == "wrong apiVersion" {
				src = strings.Replace(header, "noetl.io/v2", "noetl.io/v1", 1) + "workflow:\n  - step: start\n    tool: {kind: noop}\n"
			}
			pb, ds := parser.Parse([]byte(src))
			if pb != nil {
				t.Errorf("a playbook with errors must not be returned")
			}
			if _, ok := find(ds, playbook.SeverityError, c.path, c.msg); !ok {
				t.Fatalf("want error at %q containing %q, got:\n%v", c.path, c.msg, ds)
			}
		})
	}
}

func TestParseMetadataErrors(t *testing.T) {
	_, ds := parser.Parse([]byte("apiVersion: noetl.io/v2\nkind: Workflow\nmetadata: {}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n"))
	for _, want := range []struct{ path, msg string }{
		{"kind", `kind must be "Playbook"`}, {"metadata.name", "required"}, {"metadata.path", "required"},
	} {
		if _, ok := find(ds, playbook.SeverityError, want.path, want.msg); !ok {
			t.Errorf("missing error %v in %v", want, ds)
		}
	}
	for _, src := range []string{"", "- just a list", "{{{"} {
		_, ds := parser.Parse([]byte(src))
		if !ds.HasErrors() {
			t.Errorf("Parse(%q) reported no error", src)
		}
	}
}

// TestParseReportsEveryError: registration reports all problems, not the first.
func TestParseReportsEveryError(t *testing.T) {
	ds := diagnose(`
workflow:
  - step: start
    tool: {kind: teleport}
    next: [{step: nowhere}]
  - step: start
    tool: {kind: noop}
  - step: other
    tool: {kind: noop, message: "{{ 1 + }}"}
`)
	if n := len(ds.Errors()); n < 4 {
		t.Fatalf("want ≥ 4 errors, got %d:\n%v", n, ds)
	}
	for _, d := range ds.Errors() {
		if d.Path == "" || d.Line == 0 {
			t.Errorf("diagnostic without path or line: %+v", d)
		}
	}
}

// TestParseWarnings: unknown keys are warnings, never silently dropped (dsl.md §1).
func TestParseWarnings(t *testing.T) {
	cases := []struct {
		name, body, path, msg string
	}{
		{"unknown step key", "workflow:\n  - step: start\n    tool: {kind: noop}\n    vars: {a: 1}\n", "workflow[0].vars", `unknown key "vars"`},
		{"unknown top key", "executer: {x: 1}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n", "executer", `unknown key "executer"`},
		{"unknown executor key", "executor: {x: 1}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n", "executor.x", `unknown key "x" in executor`},
		{"no start: first step is the entry", "workflow:\n  - step: first\n    tool: {kind: noop}\n", "workflow", `the first step, "first", is the entry`},
		{"step name with slash", "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: a/b\n  - step: a/b\n    tool: {kind: noop}\n", "workflow[1].step", `steps['a/b'].result`},
		{"step named like a binding", "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: error\n  - step: error\n    tool: {kind: noop}\n", "workflow[1].step", "steps.error.result"},
		{"iterator named like a binding", "workflow:\n  - step: start\n    loop: {in: [1], iterator: playbook_path}\n    tool: {kind: noop}\n", "workflow[0].loop.iterator", "hides the template binding"},
		{"token() (R-N1)", "workflow:\n  - step: start\n    tool: {kind: http, url: x, headers: {Authorization: \"Bearer {{ token(g) }}\"}}\n", "workflow[0].tool.headers.Authorization", "token() is not supported"},
		{"libs list", "workflow:\n  - step: start\n    tool: {kind: python, code: x, libs: [psycopg2-binary]}\n", "workflow[0].tool.libs", "never installs packages"},
		{"frame without cursor", "workflow:\n  - step: start\n    loop: {in: [1], iterator: r, spec: {frame: {max_rows: 1}}}\n    tool: {kind: noop}\n", "workflow[0].loop.spec.frame", "only applies to cursor loops"},
		{"unknown tool key", "workflow:\n  - step: start\n    tool: {kind: http, url: x, verbs: 1}\n", "workflow[0].tool.verbs", `unknown key "verbs"`},
		{"unknown arc key", "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: [{step: start, weight: 1}]\n", "workflow[0].next[0].weight", `unknown key "weight"`},
		{"noetl-only kind (R-N1)", "workflow:\n  - step: start\n    tool: {kind: snowflake, query: x}\n", "workflow[0].tool.kind", "not supported"},
		{"cursor kind (R-N1)", "workflow:\n  - step: start\n    loop: {cursor: {kind: redis, auth: r, claim: x}, iterator: r, spec: {mode: cursor}}\n    tool: {kind: noop}\n", "workflow[0].loop.cursor.kind", "cursor kind redis is not supported"},
		{"cursor without mode", "workflow:\n  - step: start\n    loop: {cursor: {kind: postgres, auth: a, claim: x, y: 1}, iterator: r}\n    tool: {kind: noop}\n", "workflow[0].loop.cursor.y", `unknown key "y" in loop.cursor`},
		{"frame knob", "workflow:\n  - step: start\n    loop: {cursor: {kind: postgres, auth: a, claim: x}, iterator: r, spec: {mode: cursor, frame: {max_rowz: 1}}}\n    tool: {kind: noop}\n", "workflow[0].loop.spec.frame.max_rowz", `unknown key "max_rowz"`},
		{"unreachable step (R-W4)", "workflow:\n  - step: start\n    tool: {kind: noop}\n  - step: island\n    tool: {kind: noop}\n", "workflow[1]", "never be reached"},
		{"code braces that are no template", "workflow:\n  - step: start\n    tool: {kind: python, code: \"x = '{{ 1 + }}'\"}\n", "workflow[0].tool.code", "runs as written"},
		{"literal desc (R-T6)", "workflow:\n  - step: start\n    desc: \"{{ a }}\"\n    tool: {kind: noop}\n", "workflow[0].desc", "never rendered"},
		{"start when", "workflow:\n  - step: start\n    when: \"{{ false }}\"\n    tool: {kind: noop}\n", "workflow[0].when", "without checking when"},
		{"arc cond (R-J9)", "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: [{step: start, cond: x}]\n", "workflow[0].next[0].cond", "ignored"},
		{"policy then without when", "workflow:\n  - step: start\n    tool: {kind: noop, spec: {policy: {rules: [{then: {do: fail}}]}}}\n", "workflow[0].tool.spec.policy.rules[0]", "always matches"},
		{"policy unknown action key", "workflow:\n  - step: start\n    tool: {kind: noop, spec: {policy: {rules: [{else: {then: {do: fail, why: x}}}]}}}\n", "workflow[0].tool.spec.policy.rules[0].else.then.why", `unknown key "why" in a policy action`},
		{"workload reserved key (R-W5)", "workload: {ctx: 1}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n", "workload.ctx", "shadowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ds := diagnose(c.body)
			if ds.HasErrors() {
				t.Fatalf("unexpected errors: %v", ds.Errors())
			}
			if _, ok := find(ds, playbook.SeverityWarning, c.path, c.msg); !ok {
				t.Fatalf("want warning at %q containing %q, got:\n%v", c.path, c.msg, ds)
			}
		})
	}
}

// TestParseAliases covers R-N2 and R-W7 aliases.
func TestParseAliases(t *testing.T) {
	pb, ds := parser.Parse([]byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t, path: /lead/slash, version: 1.0, labels: {n: 1, b: true}}
workflow:
  - step: start
    retry: {retry_on: [timeout], backoff_seconds: 3, retry_on_status: [503]}
    tool:
      kind: postgres
      connection_string: "postgresql://x"
      credential: pg_local
      command: SELECT 1
    next: [b]
  - step: b
    tool:
      kind: python
      timeout_seconds: 5
      libs: {np: numpy, pd: {from: pandas, import: DataFrame}}
      code: "result = 1"
`))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if pb.Metadata.Path != "lead/slash" || pb.Metadata.Version != "1.0" {
		t.Errorf("metadata = %+v (leading / stripped, version opaque)", pb.Metadata)
	}
	if _, ok := find(ds, playbook.SeverityWarning, "metadata.path", "leading /"); !ok {
		t.Errorf("no warning for the leading /: %v", ds)
	}
	s := pb.Start()
	if !reflect.DeepEqual(s.Retry.On, []string{"timeout"}) || s.Retry.Delay != 3 || !reflect.DeepEqual(s.Retry.OnStatus, []int64{503}) {
		t.Errorf("retry aliases: %+v", s.Retry)
	}
	if s.Tool.Raw["connection"] != "postgresql://x" || s.Tool.Raw["auth"] != "pg_local" {
		t.Errorf("connection_string/credential aliases: %v", s.Tool.Raw)
	}
	if pb.Step("b").Timeout != 5 {
		t.Errorf("tool timeout_seconds should be the step timeout, got %d", pb.Step("b").Timeout)
	}
}

// TestParseConformancePlaybooks: every NoETL conformance playbook validates.
func TestParseConformancePlaybooks(t *testing.T) {
	dir := filepath.Join(conformanceDir(t), "playbooks")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) != 8 {
		t.Fatalf("want 8 conformance playbooks, found %d in %s", len(files), dir)
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pb, ds := parser.Parse(src)
		if ds.HasErrors() || pb == nil {
			t.Errorf("%s: %v", filepath.Base(f), ds.Errors())
		}
	}
}

// TestParseKeepsLiteralStrings: YAML scalars are not coerced (dsl.md §5).
func TestParseKeepsLiteralStrings(t *testing.T) {
	pb := parse(t, `
workload: {zip: "00123", when: 2024-01-02, n: 12, f: 1.5, big: 9007199254740993}
workflow:
  - step: start
    tool: {kind: noop}
`)
	w := pb.Workload
	if w["zip"] != "00123" || w["when"] != "2024-01-02" || w["n"] != int64(12) || w["f"] != 1.5 || w["big"] != int64(9007199254740993) {
		t.Fatalf("workload = %#v", w)
	}
}

// TestParseLiteralFieldsWarn: R-T6 — every literal field (metadata, desc, names,
// loop.iterator, retry, timeout, spec.*) is never rendered, so a {{ in it is a
// warning at exactly that field's path. Free-text fields warn and register; a
// field whose type or value set cannot hold the text (a number, an enum, a name
// pattern) also fails registration, at the same path.
func TestParseLiteralFieldsWarn(t *testing.T) {
	const start = "workflow:\n  - step: start\n    tool: {kind: noop}\n"
	doc := func(metadata, rest string) string {
		return "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: " + metadata + "\n" + rest
	}
	const md = "{name: t, path: tests/t}"
	step := func(fields string) string {
		return doc(md, "workflow:\n  - step: start\n"+fields+"    tool: {kind: noop}\n")
	}
	cases := []struct {
		name, src, path string
		wantErr         bool   // the value is invalid besides being literal
		errPath         string // where that error is reported, when not at path
	}{
		{"metadata.name", doc("{name: \"t{{ x }}\", path: tests/t}", start), "metadata.name", false, ""},
		{"metadata.path", doc("{name: t, path: \"tests/{{ x }}\"}", start), "metadata.path", false, ""},
		{"metadata.description", doc("{name: t, path: tests/t, description: \"for {{ workload.who }}\"}", start), "metadata.description", false, ""},
		{"metadata.version", doc("{name: t, path: tests/t, version: \"{{ v }}\"}", start), "metadata.version", false, ""},
		{"metadata.labels value", doc("{name: t, path: tests/t, labels: {team: \"{{ team }}\"}}", start), "metadata.labels.team", false, ""},
		{"metadata.labels key", doc("{name: t, path: tests/t, labels: {\"{{ k }}\": v}}", start), "metadata.labels.{{ k }}", false, ""},
		{"step desc", step("    desc: \"runs {{ x }}\"\n"), "workflow[0].desc", false, ""},
		{"step description", step("    description: \"runs {{ x }}\"\n"), "workflow[0].description", false, ""},
		{"workbook name", doc(md, "workbook: [{name: \"w{{ x }}\", tool: {kind: noop}}]\n"+start), "workbook[0].name", false, ""},
		{"tool kind", doc(md, "workflow:\n  - step: start\n    tool: {kind: \"{{ k }}\"}\n"), "workflow[0].tool.kind", true, ""},
		{"pipeline label", doc(md, "workflow:\n  - step: start\n    tool: [{name: \"a{{ x }}\", kind: noop}]\n"), "workflow[0].tool[0].name", true, ""},
		{"loop.iterator", step("    loop: {in: [1], iterator: \"{{ it }}\"}\n"), "workflow[0].loop.iterator", true, ""},
		{"loop.spec.mode", step("    loop: {in: [1], iterator: it, spec: {mode: \"{{ m }}\"}}\n"), "workflow[0].loop.spec.mode", true, ""},
		{"retry.max_attempts", step("    retry: {max_attempts: \"{{ n }}\"}\n"), "workflow[0].retry.max_attempts", true, ""},
		{"retry.delay", step("    retry: {delay: \"{{ n }}\"}\n"), "workflow[0].retry.delay", true, ""},
		{"retry.backoff", step("    retry: {backoff: \"{{ b }}\"}\n"), "workflow[0].retry.backoff", true, ""},
		{"retry.max_delay", step("    retry: {max_delay: \"{{ n }}\"}\n"), "workflow[0].retry.max_delay", true, ""},
		{"retry.on entry", step("    retry: {on: [error, \"{{ c }}\"]}\n"), "workflow[0].retry.on[1]", true, "workflow[0].retry.on"},
		{"retry.retry_on_status entry", step("    retry: {retry_on_status: [\"{{ s }}\"]}\n"), "workflow[0].retry.retry_on_status[0]", true, "workflow[0].retry.retry_on_status"},
		{"tool retry.backoff", doc(md, "workflow:\n  - step: start\n    tool: {kind: noop, retry: {backoff: \"{{ b }}\"}}\n"), "workflow[0].tool.retry.backoff", true, ""},
		{"timeout", step("    timeout: \"{{ n }}\"\n"), "workflow[0].timeout", true, ""},
		{"timeout_seconds", step("    timeout_seconds: \"{{ n }}\"\n"), "workflow[0].timeout_seconds", true, ""},
		{"spec.next_mode", step("    spec: {next_mode: \"{{ m }}\"}\n"), "workflow[0].spec.next_mode", true, ""},
		{"spec.on_error", step("    spec: {on_error: \"{{ m }}\"}\n"), "workflow[0].spec.on_error", true, ""},
		{"spec.max_visits", step("    spec: {max_visits: \"{{ n }}\"}\n"), "workflow[0].spec.max_visits", true, ""},
		{"next spec.mode", doc(md, "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: {spec: {mode: \"{{ m }}\"}, arcs: [{step: start}]}\n"), "workflow[0].next.spec.mode", true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, ds := parser.Parse([]byte(c.src))
			var warned int
			for _, d := range ds.Warnings() {
				if d.Path == c.path && strings.Contains(d.Message, "never rendered") && strings.Contains(d.Message, "R-T6") {
					warned++
				}
			}
			if warned != 1 {
				t.Errorf("want exactly one R-T6 warning at %q, got %d in:\n%v", c.path, warned, ds)
			}
			if !c.wantErr && ds.HasErrors() {
				t.Errorf("a template in a free-text literal field must not fail registration:\n%v", ds.Errors())
			}
			if c.wantErr {
				errPath := c.path
				if c.errPath != "" {
					errPath = c.errPath
				}
				found := false
				for _, d := range ds.Errors() {
					found = found || d.Path == errPath
				}
				if !found {
					t.Errorf("want an error at %q (the value is invalid as written), got:\n%v", errPath, ds)
				}
			}
		})
	}
	// Templated fields (R-T6) hold {{ freely: none of these warns.
	ds := diagnose(`workload: {w: 1}
workflow:
  - step: start
    when: "{{ true }}"
    input: {a: "{{ w }}"}
    loop: {in: "{{ [1] }}", iterator: it}
    tool: {kind: noop, message: "{{ it }}"}
    set: {ctx.x: "{{ output }}"}
    next: [{step: start, when: "{{ false }}", set: {y: "{{ x }}"}}]
`)
	for _, d := range ds {
		if strings.Contains(d.Message, "R-T6") {
			t.Errorf("templated field warned as literal: %v", d)
		}
	}
}

// TestParseDocuments: one playbook per file; an empty trailing document is fine.
func TestParseDocuments(t *testing.T) {
	body := header + "workflow:\n  - step: start\n    tool: {kind: noop}\n"
	if pb, ds := parser.Parse([]byte(body + "---\n")); pb == nil {
		t.Fatalf("a closing --- refused: %v", ds)
	}
	pb, ds := parser.Parse([]byte(body + "---\napiVersion: noetl.io/v2\nkind: Credential\n"))
	if _, ok := find(ds, playbook.SeverityError, "", "more than one YAML document"); pb != nil || !ok {
		t.Fatalf("a second document accepted: %v", ds)
	}
}
