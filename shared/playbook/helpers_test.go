package playbook_test

import (
	"testing"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

// parse parses a playbook body under a minimal header and fails on errors.
func parse(t testing.TB, body string) *playbook.Playbook {
	t.Helper()
	pb, diags := parser.Parse([]byte("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: tests/t}\n" + body))
	if diags.HasErrors() {
		t.Fatalf("parse errors:\n%v", diags)
	}
	return pb
}
