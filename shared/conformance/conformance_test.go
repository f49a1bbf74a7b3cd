package conformance

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLocateFromModuleRoot(t *testing.T) {
	t.Setenv(EnvDir, "")
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Locate(deep)
	if err != nil || got != filepath.Join(root, "..", "shared", "conformance") {
		t.Fatalf("Locate = %q, %v", got, err)
	}
	t.Setenv(EnvDir, "/elsewhere")
	if got, _ := Locate(deep); got != "/elsewhere" {
		t.Fatalf("override ignored: %q", got)
	}
}
