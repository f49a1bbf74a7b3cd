package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/noetl-go/noetl/"

// deps lists what a package links (go list -deps), one import path a line.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "./"+pkg)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestLayers holds the layering docs/architecture.md ("Layers and arrows")
// describes: the running engine links no YAML reader, the engine and the
// pipeline reach nothing under shared/tools, the leaf vocabularies import
// nothing of ours, and no function binary links a development-only package.
func TestLayers(t *testing.T) {
	rules := []struct {
		pkgs   []string
		banned func(dep string) bool
		why    string
	}{
		{[]string{"shared/engine"}, func(d string) bool { return d == "gopkg.in/yaml.v3" },
			"reading YAML is shared/playbook/parser's job"},
		{[]string{"shared/engine", "shared/pipeline"}, func(d string) bool { return strings.HasPrefix(d, module+"shared/tools") },
			"tool kinds and the result envelope are the leaves shared/toolkind and shared/toolresult"},
		{[]string{"shared/jsonx", "shared/ids", "shared/eventtype", "shared/toolkind", "shared/toolresult"},
			func(d string) bool { return strings.HasPrefix(d, module) },
			"a leaf vocabulary imports nothing of ours"},
		{[]string{"functions/..."}, func(d string) bool { return strings.HasPrefix(d, module+"shared/dev/") },
			"shared/dev is development only"},
	}
	for _, r := range rules {
		for _, pkg := range r.pkgs {
			for _, d := range deps(t, pkg) {
				if d != module+strings.TrimSuffix(pkg, "/...") && r.banned(d) {
					t.Errorf("%s links %s: %s", pkg, d, r.why)
				}
			}
		}
	}
}
