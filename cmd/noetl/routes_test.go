package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api"
)

func TestRoutesPrintsRoutesJSON(t *testing.T) {
	code, out, errOut := runCLI("routes")
	if code != exitOK || out != string(api.RoutesJSON()) {
		t.Fatalf("exit %d, stdout differs from api.RoutesJSON()\n%s", code, errOut)
	}
}

// TestRoutesWrite: --write regenerates the three derived files in a copy of
// the repository's template, writes only what changed, and a second run
// changes nothing.
func TestRoutesWrite(t *testing.T) {
	tpl, err := os.ReadFile(filepath.Join("..", "..", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// A stale region: one event less, one made up.
	stale := strings.Replace(string(tpl), "            Path: /api/replay/state\n", "            Path: /api/replay/old\n", 1)
	if stale == string(tpl) {
		t.Fatal("template.yaml has no /api/replay/state event to make stale")
	}
	if err := os.WriteFile(filepath.Join(dir, "template.yaml"), []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "openapi.json"), api.OpenAPI(), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("routes", "--write", dir)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for _, want := range []string{"routes.json: written", "openapi.json: up to date", "template.yaml: written"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for name, want := range map[string][]byte{"routes.json": api.RoutesJSON(), "openapi.json": api.OpenAPI(), "template.yaml": tpl} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s after --write differs from the generated one (err %v)", name, err)
		}
	}
	code, out, _ = runCLI("routes", "--write", dir)
	if code != exitOK || strings.Count(out, ": up to date") != 3 {
		t.Errorf("second run: exit %d\n%s", code, out)
	}
}

// TestRoutesWriteRefusesBadTemplate: a template the generator cannot place the
// routes in fails naming the fix, and no file is written.
func TestRoutesWriteRefusesBadTemplate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "template.yaml"), []byte("Resources: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCLI("routes", "--write", dir)
	if code != exitFail || !strings.Contains(errOut, "no region for the routes of") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "routes.json")); !os.IsNotExist(err) {
		t.Errorf("routes.json was written although the template was refused (stat: %v)", err)
	}
	code, _, errOut = runCLI("routes", "--write", filepath.Join(dir, "nope"))
	if code != exitFail || !strings.Contains(errOut, "reading the SAM template") {
		t.Errorf("missing dir: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := runCLI("routes", "stray"); code != exitUsage || !strings.Contains(errOut, "usage: noetl routes") {
		t.Errorf("stray argument: exit %d, stderr %q", code, errOut)
	}
}
