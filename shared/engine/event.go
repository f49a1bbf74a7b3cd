package engine

import (
	"fmt"
	"strings"
	"time"
)

// Event is one row of an execution's log as the engine sees it.
type Event struct {
	Seq       int64
	ID        int64
	Type      string
	Step      string
	NodeType  string
	Status    string
	Context   map[string]any
	Meta      map[string]any
	Result    any
	Error     string
	WorkerID  string
	CommandID string
	Time      time.Time
}

// Run is what the engine knows about an execution besides its snapshot: fixed at
// start, read from the execution row.
type Run struct {
	ExecutionID       int64
	CatalogID         int64
	Path              string
	Version           int
	ParentExecutionID int64
	// Workload is the merged, rendered workload (R-W5).
	Workload map[string]any
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

// Retry is a scheduled retry of a command (R-L6): same id, next attempt.
type RetryOrder struct {
	CommandID   string
	Attempt     int
	AvailableAt time.Time
}

// ResultKind separates the kinds of values kept outside the snapshot (R-S1).
type ResultKind string

const (
	// KindStepResult is a visit's whole result (Index is -1) or one iteration's.
	KindStepResult ResultKind = "result"
	// KindLoopItem is one item of a loop's collection, stored when the loop starts so
	// later iterations can be issued without re-rendering it.
	KindLoopItem ResultKind = "item"
	// KindReference is a worker's result stored by reference (result_kind "ref",
	// worker.md §1): URI names it; the caller reads it from its result store.
	KindReference ResultKind = "ref"
)

// ResultKey addresses one value kept outside the snapshot.
type ResultKey struct {
	Kind  ResultKind `json:"kind"`
	Step  string     `json:"step"`
	Visit int        `json:"visit"`
	Index int        `json:"index"`
	URI   string     `json:"uri,omitempty"` // KindReference only
}

// Stored is the key under which the value is read: a reference is named by
// its URI alone, whichever step's result it is.
func (k ResultKey) Stored() ResultKey {
	if k.Kind == KindReference {
		return ResultKey{Kind: KindReference, Index: -1, URI: k.URI}
	}
	return k
}

func (k ResultKey) String() string {
	if k.Kind == KindReference {
		return fmt.Sprintf("%s/%s", k.Kind, k.URI)
	}
	return fmt.Sprintf("%s/%s#%d[%d]", k.Kind, k.Step, k.Visit, k.Index)
}

// ResultWrite is a value the caller must store under its key in the same
// transaction as the events.
type ResultWrite struct {
	Key   ResultKey
	Value any
}

// Inputs are what a Handle call may need besides the snapshot.
type Inputs struct {
	// Results holds stored values the caller loaded (after a NeedResultsError).
	Results map[ResultKey]any
	// NewID returns a fresh event id; every emitted event takes one.
	NewID func() int64
}

// NeedResultsError asks the caller to load stored values and call Handle again with
// a fresh copy of the snapshot. Handle is pure, so the retry is safe; the snapshot
// passed to the failed call must be discarded.
type NeedResultsError struct{ Keys []ResultKey }

func (e *NeedResultsError) Error() string {
	parts := make([]string, len(e.Keys))
	for i, k := range e.Keys {
		parts[i] = k.String()
	}
	return "engine: needs stored results " + strings.Join(parts, ", ")
}

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
