package lifecycle

// The execution statuses, spelled once for the engine's snapshot, the
// execution row, the replay fold and the playbook tool's children. The
// command lifecycle's guards speak of them (a command is claimable while its
// execution is running; the engine cancels pending work while it is failing).
// FAILING is the R-R9 window: a step failed fatally and the engine waits for
// the claimed and running commands before it writes playbook.failed.
const (
	ExecutionRunning   = "RUNNING"
	ExecutionFailing   = "FAILING"
	ExecutionCompleted = "COMPLETED"
	ExecutionFailed    = "FAILED"
	ExecutionCancelled = "CANCELLED"
)

// ExecutionEnded reports whether an execution status is final: nothing runs
// after it but a redrive.
func ExecutionEnded(status string) bool {
	switch status {
	case ExecutionCompleted, ExecutionFailed, ExecutionCancelled:
		return true
	}
	return false
}
