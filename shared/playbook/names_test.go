package playbook_test

import (
	"testing"

	"github.com/noetl-go/noetl/shared/playbook"
)

// TestContextKey: variable names follow the set-key rules.
func TestContextKey(t *testing.T) {
	for key, want := range map[string]string{"x": "x", "ctx.x": "x", "a.b": "a.b", "iter.y": "y"} {
		if got, err := playbook.ContextKey(key); err != nil || got != want {
			t.Errorf("ContextKey(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
	for _, key := range []string{"", "1x", "a-b", "workload", "ctx.steps", "a..b"} {
		if _, err := playbook.ContextKey(key); err == nil {
			t.Errorf("ContextKey(%q) accepted", key)
		}
	}
}
