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

func TestSubset(t *testing.T) {
	got := map[string]any{"a": int64(1), "b": map[string]any{"c": "x", "d": true}, "l": []any{int64(1)}}
	for _, c := range []struct {
		want any
		ok   bool
	}{
		{map[string]any{"a": 1}, true},
		{map[string]any{"b": map[string]any{"c": "x"}}, true},
		{map[string]any{"l": []any{1}}, true},
		{map[string]any{"a": "1"}, false},
		{map[string]any{"b": map[string]any{"c": "y"}}, false},
		{map[string]any{"missing": nil}, true},
		{map[string]any{"missing": 0}, false},
		{"scalar", false},
	} {
		if Subset(c.want, got) != c.ok {
			t.Errorf("Subset(%v) = %v, want %v", c.want, !c.ok, c.ok)
		}
	}
}
