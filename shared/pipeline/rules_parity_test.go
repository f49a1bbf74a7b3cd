package pipeline

import (
	"fmt"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// TestPolicyRuleParity: the engine validates policy rules at registration and the
// worker's pipeline parses them again at run time. Until one owner reads them, both
// must accept and refuse the same rules: a rule the engine registers and the worker
// refuses fails every run; one the worker would run but the engine refuses is a
// playbook NoETL accepts and we do not (issue 12).
func TestPolicyRuleParity(t *testing.T) {
	cases := []struct {
		name, rule string
		ok         bool
	}{
		{"when then", `{when: "{{ output.status == 'error' }}", then: {do: fail}}`, true},
		{"else then", `{else: {then: {do: continue}}}`, true},
		{"else shorthand (R-W6)", `{else: {do: continue, set: {ctx.x: 1}}}`, true},
		// NoETL's v10_canonical_example.yaml writes `- else:` with `then:` beside it.
		{"else with then beside it", "{else: null, then: {do: continue, set: {ctx.done: true}}}", true},
		{"else with then and when beside it", `{else: null, when: "{{ true }}", then: {do: fail}}`, false},
		{"else with a body and then beside it", `{else: {do: fail}, then: {do: continue}}`, false},
		{"when then and else", `{when: "{{ true }}", then: {do: fail}, else: {do: continue}}`, false},
		{"unknown do", `{else: {then: {do: explode}}}`, false},
		{"jump without to", `{else: {do: jump}}`, false},
		{"attempts zero", `{else: {do: retry, attempts: 0}}`, false},
		{"bad backoff", `{else: {do: retry, backoff: quadratic}}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: p, path: p}\nworkflow:\n" +
				"  - step: start\n    tool:\n      kind: noop\n      spec:\n        policy:\n          rules:\n            - " + c.rule + "\n"
			pb, diags := engine.Parse([]byte(src))
			engineOK := pb != nil

			var rule any
			if err := yaml.Unmarshal([]byte(c.rule), &rule); err != nil {
				t.Fatalf("bad test rule %s: %v", c.rule, err)
			}
			payload := map[string]any{"tool_config": []any{map[string]any{"a": map[string]any{
				"kind": "noop", "spec": map[string]any{"policy": map[string]any{"rules": []any{jsonx.Normalize(rule)}}}}}}}
			_, err := parsePayload(payload)
			pipelineOK := err == nil

			if engineOK != c.ok || pipelineOK != c.ok {
				t.Errorf("rule %s: engine accepts %v (%s), pipeline accepts %v (%v); want both %v",
					c.rule, engineOK, strings.TrimSpace(fmt.Sprint(diags.Errors())), pipelineOK, err, c.ok)
			}
		})
	}
}
