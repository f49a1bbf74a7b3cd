package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/noetl-go/noetl/"

// linked maps each package of the module (its path inside the module) to
// what it links: go list's Deps, every package it imports directly or not.
func linked(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		m[strings.TrimPrefix(f[0], module)] = f[1:]
	}
	return m
}

// TestLayers holds the layering docs/architecture.md ("Layers and arrows")
// describes: the running engine links no YAML reader, the engine and the
// pipeline reach nothing under shared/tools, the leaf vocabularies import
// nothing of ours, and no function binary nor product package links a
// development-only package (the test fixtures apitest and cptest excepted:
// they start a throwaway stack).
func TestLayers(t *testing.T) {
	t.Parallel()
	deps := linked(t)
	ours := func(d string) bool { return strings.HasPrefix(d, module) }
	dev := func(d string) bool { return strings.HasPrefix(d, module+"shared/dev/") }
	rules := []struct {
		applies func(pkg string) bool
		banned  func(dep string) bool
		why     string
	}{
		{func(p string) bool { return p == "shared/engine" }, func(d string) bool { return d == "gopkg.in/yaml.v3" },
			"reading YAML is shared/playbook/parser's job"},
		{func(p string) bool { return p == "shared/engine" || p == "shared/pipeline" },
			func(d string) bool { return strings.HasPrefix(d, module+"shared/tools") },
			"tool kinds and the result envelope are the leaves shared/toolkind and shared/toolresult"},
		{func(p string) bool {
			return p == "shared/jsonx" || p == "shared/ids" || p == "shared/eventtype" || p == "shared/toolkind" || p == "shared/toolresult"
		}, ours, "a leaf vocabulary imports nothing of ours"},
		{func(p string) bool { return strings.HasPrefix(p, "functions/") }, dev, "shared/dev is development only"},
		{func(p string) bool {
			return strings.HasPrefix(p, "shared/") && !strings.HasPrefix(p, "shared/dev/") &&
				p != "shared/api/apitest" && p != "shared/controlplane/cptest"
		}, dev, "shared/dev is development only: the product's packages stand below it"},
	}
	for _, r := range rules {
		n := 0
		for pkg, ds := range deps {
			if !r.applies(pkg) {
				continue
			}
			n++
			for _, d := range ds {
				if r.banned(d) {
					t.Errorf("%s links %s: %s", pkg, d, r.why)
				}
			}
		}
		if n == 0 {
			t.Errorf("no package is subject to the rule %q: a package moved?", r.why)
		}
	}
}
