package controlplane

import (
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
)

// TestVerifyDifferencesMasked: verify's differences quote values to users;
// a value under a secret-named key is quoted masked, others as they are.
func TestVerifyDifferencesMasked(t *testing.T) {
	live := &engine.Snapshot{Ctx: map[string]any{"db_password": "live-pw-1", "creds": map[string]any{"token": "live-tok-2"}, "n": int64(1)}}
	folded := &engine.Snapshot{Ctx: map[string]any{"db_password": "folded-pw-1", "creds": map[string]any{"token": "folded-tok-2"}, "n": int64(2)}}
	v := verify(live, folded)
	text := strings.Join(v.Differences, "\n")
	if v.Consistent || len(v.Differences) != 3 || strings.Contains(text, "pw-1") || strings.Contains(text, "tok-2") ||
		!strings.Contains(text, "/ctx/n: live 1, folded 2") || !strings.Contains(text, `/ctx/db_password: live "[REDACTED]"`) {
		t.Fatalf("differences:\n%s", text)
	}
}
