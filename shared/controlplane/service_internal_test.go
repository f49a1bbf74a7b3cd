package controlplane

import (
	"testing"
	"time"
)

// TestPositiveOr: zero and negative settings get the default, as New's
// `if x <= 0` blocks gave them; a positive one is kept.
func TestPositiveOr(t *testing.T) {
	for _, c := range []struct{ v, want time.Duration }{{-time.Second, time.Minute}, {-1, time.Minute}, {0, time.Minute}, {1, 1}, {time.Hour, time.Hour}} {
		if got := positiveOr(c.v, time.Minute); got != c.want {
			t.Errorf("positiveOr(%v, 1m) = %v, want %v", c.v, got, c.want)
		}
	}
	if got := positiveOr(-256, 256); got != 256 {
		t.Errorf("positiveOr(-256, 256) = %d", got)
	}
}
