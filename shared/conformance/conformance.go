// Package conformance locates the NoETL conformance data (../shared/conformance
// beside the project) for tests, per R-C1. The data is read in place and never
// copied into the project.
package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// EnvDir overrides the folder's location.
const EnvDir = "NOETL_CONFORMANCE_DIR"

// Locate returns the conformance folder: $NOETL_CONFORMANCE_DIR, else
// ../shared/conformance resolved from the module root (the directory holding
// go.mod above start), not from the package directory (R-C1).
func Locate(start string) (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		return d, nil
	}
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "conformance"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", start)
		}
		dir = parent
	}
}

// Dir returns the conformance folder for a test. When it is missing the test fails
// if CI is set and is skipped with a message otherwise (R-C1).
func Dir(tb testing.TB) string {
	tb.Helper()
	wd, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	d, err := Locate(wd)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(d); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("conformance folder %s is missing and CI is set (R-C1): %v", d, err)
		}
		tb.Skipf("conformance folder %s not found; set %s to run this test (R-C1)", d, EnvDir)
	}
	return d
}

// Playbook returns the path of a conformance playbook.
func Playbook(tb testing.TB, name string) string {
	return filepath.Join(Dir(tb), "playbooks", name)
}

// Subset reports whether want is contained in got, the way R-C2 matches README
// results: maps by key (got may have more), everything else equal after
// normalising want to the jsonx convention (so 42 matches int64(42)).
func Subset(want, got any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		return reflect.DeepEqual(jsonx.Normalize(want), got)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range wm {
		if !Subset(v, gm[k]) {
			return false
		}
	}
	return true
}
