package tools

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/toolkind"
)

// TestToolsReadEveryTableKey: the table in shared/toolkind is what the engine
// accepts at register, so each key it lists for a kind must be read by that kind's
// tool here (a listed key no tool reads is a setting silently dropped). The other
// direction holds by construction: tools read keys only through keyNames, which
// refuses a key the table does not list. input/args are read by the pipeline.
func TestToolsReadEveryTableKey(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	// The noop tool lives in a package of its own, pure, for the what-if.
	pure, err := filepath.Glob("noop/*.go")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, pure...)
	read := map[string]map[string]bool{} // kind constant name → keys
	note := func(kindExpr ast.Expr, key string) {
		sel, ok := kindExpr.(*ast.SelectorExpr)
		if !ok {
			return
		}
		if read[sel.Sel.Name] == nil {
			read[sel.Sel.Name] = map[string]bool{}
		}
		read[sel.Sel.Name][key] = true
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			fn, _ := call.Fun.(*ast.Ident)
			switch {
			case fn == nil:
			case fn.Name == "keyNames" && len(call.Args) == 2:
				if lit, ok := call.Args[1].(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(lit.Value)
					note(call.Args[0], s)
				} else {
					t.Errorf("%s: keyNames with a computed key: write the key literally so this test can see it", fset.Position(call.Pos()))
				}
			case fn.Name == "envField" && len(call.Args) == 2:
				note(call.Args[1], "env")
			case fn.Name == "processSettings" && len(call.Args) == 3:
				note(call.Args[2], "env")
			}
			return true
		})
	}
	consts := map[string]string{toolkind.Python: "Python", toolkind.HTTP: "HTTP", toolkind.Postgres: "Postgres",
		toolkind.Shell: "Shell", toolkind.Noop: "Noop", toolkind.Playbook: "Playbook", toolkind.DuckDB: "DuckDB", toolkind.NATS: "NATS",
		toolkind.Artifact: "Artifact", toolkind.Transfer: "Transfer"}
	for _, name := range toolkind.SupportedNames() {
		kd, _ := toolkind.Lookup(name)
		var missing []string
		for _, key := range kd.Keys {
			if key.Name != "input" && !read[consts[kd.Name]][key.Name] {
				missing = append(missing, key.Name)
			}
		}
		if len(missing) > 0 {
			t.Errorf("the %s tool never reads %s, which the table lists (the engine accepts it)", kd.Name, strings.Join(missing, ", "))
		}
		for key := range read[consts[kd.Name]] {
			if !slices.ContainsFunc(kd.Keys, func(k toolkind.Key) bool { return k.Name == key }) {
				t.Errorf("the %s tool reads %q, which the table does not list", kd.Name, key)
			}
		}
	}
}
