package pipeline_test

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

// TestPolicyRuleParity: the engine validates policy rules at registration and the
// worker's pipeline reads them at run time, both through pipeline's one grammar
// (issue 13). They must accept and refuse the same rules: a rule the engine registers
// and the worker refuses fails every run; one the worker would run but the engine
// refuses is a playbook NoETL accepts and we do not (issue 12). warn names a rule
// the engine registers with a warning that says this (the worker has no one to tell).
func TestPolicyRuleParity(t *testing.T) {
	cases := []struct {
		name, rule string
		ok         bool
		warn       string
	}{
		{"when then", `{when: "{{ output.status == 'error' }}", then: {do: fail}}`, true, ""},
		{"else then", `{else: {then: {do: continue}}}`, true, ""},
		{"else shorthand (R-W6)", `{else: {do: continue, set: {ctx.x: 1}}}`, true, ""},
		// NoETL's v10_canonical_example.yaml writes `- else:` with `then:` beside it.
		{"else with then beside it", "{else: null, then: {do: continue, set: {ctx.done: true}}}", true, ""},
		{"else with then and when beside it", `{else: null, when: "{{ true }}", then: {do: fail}}`, false, ""},
		{"else with a body and then beside it", `{else: {do: fail}, then: {do: continue}}`, false, ""},
		{"when then and else", `{when: "{{ true }}", then: {do: fail}, else: {do: continue}}`, false, ""},
		// The copies disagreed here (issue 13): the worker always ran it as unconditional;
		// the engine refused it. Both now accept it, the engine with a warning.
		{"then without when", `{then: {do: fail}}`, true, "always matches"},
		{"when without then", `{when: "{{ true }}"}`, false, ""},
		{"neither when, then nor else", `{do: fail}`, false, ""},
		{"rule not an object", `fail`, false, ""},
		{"else null alone", `{else: null}`, false, ""},
		{"else then with a shorthand key beside", `{else: {then: {do: fail}, do: continue}}`, false, ""},
		{"unknown rule key", `{when: "{{ true }}", then: {do: fail}, unless: x}`, true, "unknown key"},
		{"unknown action key", `{else: {then: {do: fail, why: x}}}`, true, "unknown key"},
		{"set only", `{when: "{{ true }}", then: {set: {ctx.x: 1}}}`, true, ""},
		{"empty action", `{when: "{{ true }}", then: {}}`, false, ""},
		{"action not an object", `{when: "{{ true }}", then: fail}`, false, ""},
		{"unknown do", `{else: {then: {do: explode}}}`, false, ""},
		{"do not a string", `{else: {then: {do: 1}}}`, false, ""},
		{"jump with to", `{else: {do: jump, to: a}}`, true, ""},
		{"jump without to", `{else: {do: jump}}`, false, ""},
		{"jump to empty", `{else: {do: jump, to: ""}}`, false, ""},
		{"retry with every knob", `{else: {do: retry, attempts: 4, delay: 0.5, backoff: exponential}}`, true, ""},
		{"backoff fixed", `{else: {do: retry, backoff: fixed}}`, true, ""},
		{"attempts zero", `{else: {do: retry, attempts: 0}}`, false, ""},
		{"attempts fractional", `{else: {do: retry, attempts: 1.5}}`, false, ""},
		{"attempts text", `{else: {do: retry, attempts: "5"}}`, false, ""},
		{"negative delay", `{else: {do: retry, delay: -1}}`, false, ""},
		{"delay text", `{else: {do: retry, delay: "2"}}`, false, ""},
		{"bad backoff", `{else: {do: retry, backoff: quadratic}}`, false, ""},
		{"set not an object", `{else: {do: continue, set: [1]}}`, false, ""},
		{"set key ctx alone", `{else: {do: continue, set: {ctx: 1}}}`, false, ""},
		{"set key with an empty segment", `{else: {do: continue, set: {ctx..x: 1}}}`, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p, path: p}\nworkflow:\n" +
				"  - step: start\n    tool:\n      kind: noop\n      spec:\n        policy:\n          rules:\n            - " + c.rule + "\n"
			pb, diags := parser.Parse([]byte(src))
			engineOK := pb != nil

			var rule any
			if err := yaml.Unmarshal([]byte(c.rule), &rule); err != nil {
				t.Fatalf("bad test rule %s: %v", c.rule, err)
			}
			// Item label "a" so a jump has a target in the pipeline as in the playbook.
			payload := map[string]any{"tool_config": []any{map[string]any{"a": map[string]any{
				"kind": "noop", "spec": map[string]any{"policy": map[string]any{"rules": []any{jsonx.Normalize(rule)}}}}}}}
			err := pipeline.ParsePayload(payload)
			pipelineOK := err == nil

			if engineOK != c.ok || pipelineOK != c.ok {
				t.Errorf("rule %s: engine accepts %v (%s), pipeline accepts %v (%v); want both %v",
					c.rule, engineOK, strings.TrimSpace(fmt.Sprint(diags.Errors())), pipelineOK, err, c.ok)
			}
			if c.warn != "" {
				found := false
				for _, d := range diags {
					found = found || d.Severity == playbook.SeverityWarning && strings.Contains(d.Message, c.warn) &&
						strings.HasPrefix(d.Path, "workflow[0].tool.spec.policy.rules[0]")
				}
				if !found {
					t.Errorf("rule %s: no warning containing %q at the rule's path; diagnostics: %v", c.rule, c.warn, diags)
				}
			}
		})
	}
}
