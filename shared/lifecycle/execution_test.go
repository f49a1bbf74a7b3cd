package lifecycle

import "testing"

// TestExecutionEnded: COMPLETED, FAILED and CANCELLED are final; FAILING
// (R-R9's window) still waits for its running commands.
func TestExecutionEnded(t *testing.T) {
	for status, want := range map[string]bool{ExecutionCompleted: true, ExecutionFailed: true, ExecutionCancelled: true,
		ExecutionRunning: false, ExecutionFailing: false, "": false, "completed": false} {
		if got := ExecutionEnded(status); got != want {
			t.Errorf("ExecutionEnded(%q) = %v, want %v", status, got, want)
		}
	}
}
