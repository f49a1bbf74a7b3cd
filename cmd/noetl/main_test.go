package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/noetl-go/noetl/shared/conformance"
)

// built is the real binary, linked once for the tests and benchmarks that
// run it: a link with DuckDB's cgo is seconds of CPU.
var built struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.path != "" {
		_ = os.RemoveAll(filepath.Dir(built.path))
	}
	os.Exit(code)
}

// builtBinary returns the path of this command built from the working tree.
func builtBinary(tb testing.TB) string {
	tb.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "noetl-cli-test-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "noetl")
		if out, err := exec.Command("go", "build", "-o", built.path, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if built.err != nil {
		tb.Fatal(built.err)
	}
	return built.path
}

func runCLI(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsage(t *testing.T) {
	cases := []struct {
		args       []string
		code       int
		wantStream string
		want       string
	}{
		{nil, exitUsage, "stderr", "usage: noetl <command>"},
		{[]string{"frobnicate"}, exitUsage, "stderr", `unknown command "frobnicate"`},
		{[]string{"help"}, exitOK, "stdout", "validate"},
		{[]string{"help", "validate"}, exitOK, "stderr", "usage: noetl validate"},
		{[]string{"validate", "-h"}, exitOK, "stderr", "--json"},
		{[]string{"validate"}, exitUsage, "stderr", "name at least one playbook file"},
		{[]string{"validate", "--bogus", "x"}, exitUsage, "stderr", "flag provided but not defined"},
	}
	for _, c := range cases {
		code, out, errOut := runCLI(c.args...)
		got := errOut
		if c.wantStream == "stdout" {
			got = out
		}
		if code != c.code || !strings.Contains(got, c.want) {
			t.Errorf("noetl %v: exit %d, %s %q; want exit %d containing %q", c.args, code, c.wantStream, got, c.code, c.want)
		}
	}
}

func TestValidateAcceptsConformancePlaybooks(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(conformance.Dir(t), "playbooks", "*.yaml"))
	if len(files) != 8 {
		t.Fatalf("found %d conformance playbooks", len(files))
	}
	code, out, errOut := runCLI(append([]string{"validate"}, files...)...)
	if code != exitOK || strings.Count(out, ": ok (") != len(files) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
}

// broken playbooks, each with the path its error must name.
var broken = []struct{ name, body, want string }{
	{"unknown_step", "  - step: start\n    tool: {kind: noop}\n    next: {arcs: [{step: ned}]}\n", `workflow[0].next.arcs[0].step: unknown step "ned"`},
	{"duplicate_step", "  - step: start\n    tool: {kind: noop}\n  - step: start\n    tool: {kind: noop}\n", `workflow[1].step: duplicate step "start"`},
	{"bad_template", "  - step: start\n    tool: {kind: noop, message: \"{{ 1 + }}\"}\n", "workflow[0].tool.message: "},
	{"case_block", "  - step: start\n    tool: {kind: noop}\n    case: [{when: x}]\n", "workflow[0].case: case: blocks are not supported"},
	{"unknown_entry_step", "  - step: begin\n    tool: {kind: noop}\nexecutor: {spec: {entry_step: go}}\n", `executor.spec.entry_step: entry_step names unknown step "go"`},
	{"case_in_router", "  - step: start\n    tool: {kind: noop}\n    next: {case: [{when: x}], arcs: [{step: start}]}\n", "workflow[0].next.case: case: blocks are not supported"},
	{"case_in_arc", "  - step: start\n    tool: {kind: noop}\n    next: [{step: start, case: x}]\n", "workflow[0].next[0].case: case: blocks are not supported"},
	// Whole-value templates are reported at the value's own path.
	{"bad_loop_in", "  - step: start\n    loop: {in: \"{{ 1 + }}\", iterator: i}\n    tool: {kind: noop}\n", "workflow[0].loop.in: "},
	{"bad_set", "  - step: start\n    tool: {kind: noop}\n    set: {a: \"{{ 1 + }}\"}\n", "workflow[0].set.a: "},
	{"bad_arc_set", "  - step: start\n    tool: {kind: noop}\n    next: [{step: start, set: {a: \"{{ 1 + }}\"}}]\n", "workflow[0].next[0].set.a: "},
	// A billion laughs is refused by its expanded size, naming the limit (it ran
	// validate out of memory before).
	{"alias_bomb", "  - step: start\n    tool:\n      kind: noop\n      input:\n        l0: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" +
		"        l1: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n        l2: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
		"        l3: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n        l4: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n" +
		"        l5: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n        l6: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n" +
		"        l7: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n        l8: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n",
		"workflow[0].tool.input.l5[0]: the playbook holds more than 100000 YAML nodes (limit MaxExpandedNodes)"},
}

func writeBroken(t *testing.T) []string {
	dir := t.TempDir()
	var files []string
	for _, b := range broken {
		f := filepath.Join(dir, b.name+".yaml")
		src := "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: b, path: b/" + b.name + "}\nworkflow:\n" + b.body
		if err := os.WriteFile(f, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

func TestValidateRejectsBrokenPlaybooks(t *testing.T) {
	for i, f := range writeBroken(t) {
		code, out, _ := runCLI("validate", f)
		if code != exitFail || !strings.Contains(out, broken[i].want) || !strings.Contains(out, "invalid") {
			t.Errorf("%s: exit %d, output:\n%s\nwant it to contain %q", broken[i].name, code, out, broken[i].want)
		}
	}
}

func TestValidateJSON(t *testing.T) {
	files := writeBroken(t)
	code, out, _ := runCLI("validate", "--json", files[0], filepath.Join(t.TempDir(), "missing.yaml"))
	var reports []fileReport
	if err := json.Unmarshal([]byte(out), &reports); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if code != exitFail || len(reports) != 2 || reports[0].Valid || reports[0].Errors[0].Path != "workflow[0].next.arcs[0].step" {
		t.Fatalf("exit %d reports %+v", code, reports)
	}
	if !strings.Contains(reports[1].Errors[0].Message, "cannot read the file") {
		t.Fatalf("missing file report %+v", reports[1])
	}
}

// TestValidateBinary runs the real binary, as `go run ./cmd/noetl validate` would.
func TestValidateBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := builtBinary(t)
	good := conformance.Playbook(t, "hello_world.yaml")
	if out, err := exec.Command(bin, "validate", good).CombinedOutput(); err != nil {
		t.Fatalf("valid playbook: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "validate", writeBroken(t)[0]).CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != exitFail || !strings.Contains(string(out), "unknown step") {
		t.Fatalf("broken playbook: %v\n%s", err, out)
	}
}

func TestFlagsAfterArguments(t *testing.T) {
	files := writeBroken(t)
	code, out, _ := runCLI("validate", files[0], "--json")
	if code != exitFail || !strings.HasPrefix(strings.TrimSpace(out), "[") {
		t.Fatalf("flags after the file: exit %d\n%s", code, out)
	}
	fs := newFlags("x", io.Discard)
	wait := fs.Bool("wait", false, "")
	set := setFlags{}
	fs.Var(set, "set", "")
	if err := parseInterspersed(fs, []string{"a.yaml", "--set", "k=1", "--wait", "b", "--", "--not-a-flag"}); err != nil {
		t.Fatal(err)
	}
	if !*wait || set["k"] != int64(1) || strings.Join(fs.Args(), " ") != "a.yaml b --not-a-flag" {
		t.Fatalf("wait %v set %v args %q", *wait, set, fs.Args())
	}
}

// TestEverySubcommandHasHelp: `noetl <command> -h` prints the command's usage and
// exits 0; `noetl help <command>` does too.
func TestEverySubcommandHasHelp(t *testing.T) {
	for name := range commands() {
		for _, args := range [][]string{{name, "-h"}, {"help", name}} {
			code, out, errOut := runCLI(args...)
			if code != exitOK || !strings.Contains(out+errOut, "usage: noetl "+name) {
				t.Errorf("noetl %v: exit %d\n%s%s", args, code, out, errOut)
			}
		}
		if code, _, errOut := runCLI(name, "--no-such-flag"); code != exitUsage || !strings.Contains(errOut, "usage: noetl "+name) {
			t.Errorf("noetl %s --no-such-flag: exit %d, want %d with usage\n%s", name, code, exitUsage, errOut)
		}
	}
}

// TestNoArgsCommands: commands that take only flags refuse stray arguments
// with their usage (exit 2) instead of ignoring them.
func TestNoArgsCommands(t *testing.T) {
	for _, cmd := range []string{"worker", "dev", "migrate"} {
		code, _, errOut := runCLI(cmd, "stray")
		if code != exitUsage || !strings.Contains(errOut, `unexpected arguments ["stray"]`) || !strings.Contains(errOut, "usage: noetl "+cmd) {
			t.Errorf("%s stray: exit %d, stderr:\n%s", cmd, code, errOut)
		}
	}
}
