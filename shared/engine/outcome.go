package engine

import (
	"fmt"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// Outcome is what one Handle call decided.
type Outcome struct {
	// Events to append after the trigger, in order (seq and id already assigned).
	Events []Event
	// Commands to insert (one per command.issued event).
	Commands []Command
	// Retries to schedule on existing command rows (one per command.retry event).
	Retries []RetryOrder
	// Cancelled command ids (one per command.cancelled event).
	Cancelled []string
	// Writes to store outside the snapshot.
	Writes []ResultWrite
	// Parts of large commands to put in the result store before commit
	// (commandsize.go).
	Parts []CommandPart
	// Finished is set when the trigger ended a command for good (no retry): how
	// the store should close the command's row.
	Finished *Finished
	// Work counts what the decision examined, for the O(1)-per-event tests.
	Work Work
}

// Keep puts into values what the outcome keeps outside the snapshot, as the
// results table and the result store give it back: its writes, and its
// command parts decoded under their reference keys. The simulations (the
// what-if, enginetest) keep both stores in one map.
func (o *Outcome) Keep(values map[ResultKey]any) error {
	for _, w := range o.Writes {
		values[w.Key] = w.Value
	}
	for _, p := range o.Parts {
		v, err := jsonx.Decode(p.Data)
		if err != nil {
			return fmt.Errorf("command part %s: %w", p.URI, err)
		}
		values[RefKey(p.URI)] = v
	}
	return nil
}

// Finished tells how a command ended: OK, or failed with a class (R-L3). The
// envelope decides, not the event type: an error envelope followed by
// command.completed is a failure (R-R3).
type Finished struct {
	CommandID string
	OK        bool
	Class     string // error, timeout or expired when !OK
}

// Work counts the decision's effort: it must not grow with the execution's length.
type Work struct {
	StepsExamined int
	ArcsExamined  int
}

// Command is a unit of work the engine issues: one row of the command table and one
// command.issued event.
type Command struct {
	ID            string
	IssuedEventID int64
	Step          string
	Visit         int
	Index         int // iteration index; -1 outside loops
	ToolKind      string
	Attempt       int
	MaxAttempts   int
	Timeout       int // seconds (R-L2)
	AvailableAt   time.Time
	// Payload is what the worker needs (NoETL's shape): tool_config, args,
	// render_context, plus step, visit, timeout_seconds, iteration.
	Payload map[string]any
	Meta    map[string]any
}

// CommandID formats NoETL's command id: <execution_id>:<step>:<issued event_id>,
// plus :i<index> for a loop iteration.
func CommandID(executionID int64, step string, issuedEventID int64, index int) string {
	id := fmt.Sprintf("%d:%s:%d", executionID, step, issuedEventID)
	if index >= 0 {
		id += fmt.Sprintf(":i%d", index)
	}
	return id
}

// RetryOrder is a scheduled retry of a command (R-L6): same id, next attempt.
type RetryOrder struct {
	CommandID   string
	Attempt     int
	AvailableAt time.Time
}

// ResultWrite is a value the caller must store under its key in the same
// transaction as the events.
type ResultWrite struct {
	Key   ResultKey
	Value any
}
