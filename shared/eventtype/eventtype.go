// Package eventtype is the vocabulary of an execution's event log: the event
// types the engine writes and folds (events.md §3) and the reading of NoETL's
// older spellings onto them. The engine, the control plane, replay and the
// local gateway's metrics name event types through it; it imports nothing.
package eventtype

// Event types (events.md §3). Workers' and NoETL's legacy spellings are folded
// onto these by Canonical.
const (
	PlaybookStarted   = "playbook.started"
	PlaybookCompleted = "playbook.completed"
	PlaybookFailed    = "playbook.failed"
	PlaybookCancelled = "playbook.cancelled"
	StepEnter         = "step.enter"
	StepSkipped       = "step.skipped"
	StepExit          = "step.exit"
	CtxUpdated        = "ctx.updated"
	CommandIssued     = "command.issued"
	CommandClaimed    = "command.claimed"
	CommandStarted    = "command.started"
	CallDone          = "call.done"
	CallError         = "call.error"
	CommandCompleted  = "command.completed"
	CommandFailed     = "command.failed"
	CommandExpired    = "command.expired"
	CommandRetry      = "command.retry"
	CommandCancelled  = "command.cancelled"
	// LoopClaimed records what a cursor loop's claim returned (context:
	// visit, claimed rows, the loop's new total, drained).
	LoopClaimed = "loop.claimed"
	// PlaybookRedriven reopens a FAILED or CANCELLED execution under a
	// version (context: version, catalog_id, previous_version,
	// previous_status, kept: the loop iterations kept per step, arc_sets:
	// the completed steps' last visits' arc sets, entered: the arcs that
	// started the last visits of the other steps); steps that
	// completed keep their results (docs/redrive.md).
	PlaybookRedriven = "playbook.redriven"
	// StepRerouted records the arcs a completed step fires again when a
	// redrive routes afresh from it (context: fired, as step.exit's), or an
	// arc fired again as recorded (recorded: true).
	StepRerouted = "step.rerouted"
)

// Canonical maps NoETL's legacy underscore spellings to the dotted names.
func Canonical(t string) string {
	switch t {
	case "playbook_started", "execution_started", "playbook.initialized", "playbook_initialized":
		// NoETL 3.x writes playbook.initialized where 2.x wrote playbook_started.
		return PlaybookStarted
	case "playbook_completed", "execution_completed":
		return PlaybookCompleted
	case "playbook_failed", "execution_failed":
		return PlaybookFailed
	case "playbook_cancelled", "execution_cancelled":
		return PlaybookCancelled
	case "step_enter", "step_started":
		return StepEnter
	case "step_completed", "step_exit":
		return StepExit
	case "step_skipped":
		return StepSkipped
	case "action_started":
		return CommandStarted
	case "action_completed":
		return CommandCompleted
	case "action_failed", "action_error":
		return CommandFailed
	}
	return t
}
