package parser_test

import (
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

const header = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: t, path: tests/t}
`

// parse parses a playbook written as a header plus body and fails on errors.
func parse(t testing.TB, body string) *playbook.Playbook {
	t.Helper()
	pb, diags := parser.Parse([]byte(header + body))
	if diags.HasErrors() {
		t.Fatalf("parse errors:\n%v", diags)
	}
	return pb
}

func diagnose(body string) playbook.Diagnostics {
	_, d := parser.Parse([]byte(header + body))
	return d
}

// find returns the first diagnostic of a severity whose path and message contain
// the given parts.
func find(ds playbook.Diagnostics, sev playbook.Severity, path, msg string) (playbook.Diagnostic, bool) {
	for _, d := range ds {
		if d.Severity == sev && strings.Contains(d.Path, path) && strings.Contains(d.Message, msg) {
			return d, true
		}
	}
	return playbook.Diagnostic{}, false
}

func conformanceDir(t testing.TB) string { return conformance.Dir(t) }
