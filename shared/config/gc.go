package config

import (
	"runtime/debug"
	"strconv"
)

// DefaultGCPercent is the collector's target when GOGC is unset: 200, not
// Go's 100. The server's and the worker's heap is mostly the garbage of one
// request or step (decoded bodies, encoded rows, rendered templates), so
// collecting half as often costs little memory for much less CPU: at
// W=500×K=10 it cut the server's CPU per step by about a sixth and raised
// steps/s by about an eighth, for a peak RSS about a quarter larger
// (docs/step-path.md).
const DefaultGCPercent = 200

// lambdaMemoryPercent is the soft memory limit, as a share of the function's
// memory, that a Lambda gets when GOMEMLIMIT is unset: near it the collector
// runs as often as it must, so the larger target never takes an instance
// past its memory.
const lambdaMemoryPercent = 90

// ApplyGCDefaults sets the garbage collector's defaults for a long-lived
// process (a function, noetl serve/dev/worker): DefaultGCPercent unless GOGC
// is set, and on Lambda (AWS_LAMBDA_FUNCTION_MEMORY_SIZE, in MB) a soft
// memory limit of lambdaMemoryPercent of the function's memory unless
// GOMEMLIMIT is set.
func ApplyGCDefaults(getenv func(string) string) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(DefaultGCPercent)
	}
	if mb, err := strconv.ParseInt(getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), 10, 64); err == nil && mb > 0 && getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(mb << 20 * lambdaMemoryPercent / 100)
	}
}
