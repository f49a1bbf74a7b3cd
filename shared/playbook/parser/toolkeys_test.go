package parser_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/toolkind"
)

// TestToolKeysFollowTheTable: the register-time validator accepts, for each supported
// kind, exactly the keys of the one table the tools read through (shared/toolkind):
// every name and alias registers without an unknown-key warning, also under tool.spec
// where the table allows it, and a key outside it warns that it is ignored. http's
// data is such a key: the validator once listed it, but no tool reads it (issue 13).
func TestToolKeysFollowTheTable(t *testing.T) {
	for _, name := range toolkind.SupportedNames() {
		kd, _ := toolkind.Lookup(name)
		for _, key := range kd.Keys {
			for _, name := range key.Names() {
				for _, where := range []string{"tool", "spec"} {
					body := fmt.Sprintf("{kind: %s, %s: 1}", kd.Name, name)
					if where == "spec" {
						body = fmt.Sprintf("{kind: %s, spec: {%s: 1}}", kd.Name, name)
					}
					ds := diagnose("workflow:\n  - step: start\n    tool: " + body + "\n")
					for _, d := range ds {
						if strings.Contains(d.Message, "unknown key") {
							t.Errorf("%s %s (%s): %v", kd.Name, name, where, d)
						}
					}
				}
			}
		}
	}
	for _, c := range []struct{ kind, key string }{{"http", "data"}, {"shell", "url"}, {"noop", "code"}} {
		ds := diagnose(fmt.Sprintf("workflow:\n  - step: start\n    tool: {kind: %s, %s: 1}\n", c.kind, c.key))
		if _, ok := find(ds, playbook.SeverityWarning, "workflow[0].tool."+c.key, fmt.Sprintf("unknown key %q", c.key)); !ok {
			t.Errorf("%s tool with %s: want an unknown-key warning, got %v", c.kind, c.key, ds)
		}
	}
}

// TestRenamedAliasesTwice: the aliases the table renames (shared/toolkind,
// Key.Renamed) are refused beside their key with the table's message, in either
// order; connection_string beside connection is taken (the later one wins).
func TestRenamedAliasesTwice(t *testing.T) {
	for _, c := range []struct{ tool, path, msg string }{
		{"{kind: postgres, auth: a, credential: b, query: x}", "tool.credential", "give either auth or credential"},
		{"{kind: postgres, credential: b, auth: a, query: x}", "tool.credential", "give either auth or credential"},
		{"{kind: http, url: u, endpoint: e}", "tool.endpoint", "give the http url once"},
		{"{kind: http, endpoint: e, url: u}", "tool.endpoint", "give the http url once"},
		{"{kind: noop, input: {a: 1}, args: {a: 2}}", "tool.args", "give tool input once"},
	} {
		ds := diagnose("workflow:\n  - step: start\n    tool: " + c.tool + "\n")
		if _, ok := find(ds, playbook.SeverityError, c.path, c.msg); !ok {
			t.Errorf("%s: want error %q at %s, got %v", c.tool, c.msg, c.path, ds)
		}
	}
	pb, ds := parser.Parse([]byte(header + "workflow:\n  - step: start\n    tool: {kind: postgres, connection: a, connection_string: b, query: x}\n"))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if raw := pb.Start().Tool.Raw; raw["connection"] != "b" || raw["connection_string"] != nil {
		t.Errorf("raw %v, want connection b (connection_string renamed, written later)", raw)
	}
}
