package parser_test

import (
	"strings"
	"testing"
)

// TestPlaybookLiteralNULRefused: YAML writes a NUL as \0, \x00 or \u0000; a
// playbook holding one in any value or key (workload, tool config, python
// code, step name) is refused at parse with the path, since the workload,
// commands and events that would carry it cannot be stored.
func TestPlaybookLiteralNULRefused(t *testing.T) {
	for _, tc := range []struct{ name, body, path, msg string }{
		{"workload value", "workload:\n  greeting: \"hi\\0\"\n" + noopWorkflow, "workload.greeting",
			`contains a NUL character (\u0000) at byte 2, which cannot be stored`},
		{"workload key", "workload:\n  list:\n    - {\"a\\x00b\": 1}\n" + noopWorkflow, `workload.list[0]["a\x00b"]`,
			`the key contains a NUL character (\u0000) at byte 1`},
		{"tool config", "workflow:\n  - step: start\n    tool: {kind: shell, command: \"printf '\\u0000'\"}\n", "workflow[0].tool.command",
			`contains a NUL character (\u0000) at byte 8`},
		{"python code", "workflow:\n  - step: start\n    tool:\n      kind: python\n      code: \"def main():\\n  return '\\0'\\n\"\n",
			"workflow[0].tool.code", `contains a NUL character (\u0000) at byte 22`},
		{"step name", "workflow:\n  - step: \"st\\0art\"\n    tool: {kind: noop}\n", "workflow[0].step", "at byte 2"},
		{"anchored", "workload:\n  a: &x \"\\0\"\n  b: *x\n" + noopWorkflow, "workload.a", "at byte 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := expansionError(t, header+tc.body)
			if d.Path != tc.path || !strings.Contains(d.Message, tc.msg) || strings.ContainsRune(d.Path+d.Message, 0) || d.Line == 0 {
				t.Fatalf("diagnostic %+v, want path %s and %q", d, tc.path, tc.msg)
			}
		})
	}
}
