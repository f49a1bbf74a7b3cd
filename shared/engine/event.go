package engine

import (
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
