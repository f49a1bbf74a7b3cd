package config

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestApplyGCDefaults: GOGC 200 unless the environment sets GOGC; on Lambda a
// soft memory limit of 90% of the function's memory unless GOMEMLIMIT is set.
func TestApplyGCDefaults(t *testing.T) {
	prevPercent := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetGCPercent(prevPercent); debug.SetMemoryLimit(prevLimit) })
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

	for _, tc := range []struct {
		name        string
		env         map[string]string
		wantPercent int
		wantLimit   int64
	}{
		{"local, nothing set", map[string]string{}, 200, math.MaxInt64},
		{"GOGC set", map[string]string{"GOGC": "50"}, 100, math.MaxInt64},
		{"Lambda of 512 MB", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, 200, 512 << 20 * 9 / 10},
		{"Lambda with GOMEMLIMIT set", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512", "GOMEMLIMIT": "300MiB"}, 200, math.MaxInt64},
		{"memory size not a number", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots"}, 200, math.MaxInt64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(math.MaxInt64)
			ApplyGCDefaults(env(tc.env))
			// SetGCPercent returns the setting it replaces; a negative
			// limit reads the current one without changing it.
			if got := debug.SetGCPercent(100); got != tc.wantPercent {
				t.Errorf("GC percent %d, want %d", got, tc.wantPercent)
			}
			if got := debug.SetMemoryLimit(-1); got != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", got, tc.wantLimit)
			}
		})
	}
}
