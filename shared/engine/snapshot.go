package engine

import (
	"bytes"
	"encoding/json"
	"slices"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// Step statuses in the snapshot and the API (a step not in the snapshot is pending).
const (
	StepPending   = "pending"
	StepRunning   = "running"
	StepCompleted = "completed"
	StepFailed    = "failed"
	StepSkipped   = "skipped"
	StepCancelled = "cancelled"
)

// Command statuses while a command is in flight; finished commands leave the snapshot.
const (
	CmdPending  = "pending"  // issued or re-issued, not claimed
	CmdClaimed  = "claimed"  // a worker holds the lease
	CmdRunning  = "running"  // the worker started it
	CmdRetrying = "retrying" // failed with attempts left; command.retry follows
)

// Snapshot is an execution's folded state: active state only (R-S1). Its size
// depends on the playbook and on what is in flight, never on how many events the
// execution already has, so writing it per event costs the same at event 10 and
// event 10,000.
type Snapshot struct {
	Status    string    `json:"status,omitempty"`
	Seq       int64     `json:"seq"`
	StartedAt time.Time `json:"started_at,omitzero"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// Ctx is the durable context: every set value (R-T9).
	Ctx map[string]any `json:"ctx,omitempty"`
	// Steps holds every step that was ever reached or has arcs waiting.
	Steps map[string]*StepState `json:"steps,omitempty"`
	// Commands holds the commands in flight, by command id.
	Commands    map[string]*CommandState `json:"commands,omitempty"`
	FailedSteps []string                 `json:"failed_steps,omitempty"`
	Error       string                   `json:"error,omitempty"`
	// Running counts steps with a visit in progress; Queued counts steps whose
	// ledger holds fired arcs. Completion is Running == Queued == 0 (dsl.md §4.10).
	Running int `json:"running,omitempty"`
	Queued  int `json:"queued,omitempty"`
	// Waiting lists steps whose dispatch or skip is blocked by an active ancestor
	// (R-J3, R-J4). It is the decision's memory of whom to re-check (R-J5); Apply
	// never changes it, so a replayed fold may differ here and nowhere else.
	Waiting []string `json:"waiting,omitempty"`
}

// StepState is one step's state.
type StepState struct {
	Status   string `json:"status"`
	Visits   int    `json:"visits,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	// Bound is true once a visit finished or the step was skipped: from then on
	// templates see {{ step }} (null when skipped, R-T3); before, it is undefined.
	Bound     bool       `json:"bound,omitempty"`
	Result    any        `json:"result,omitempty"`
	ResultRef *ResultKey `json:"result_ref,omitempty"`
	// ResultURI is where the worker stored the result by reference, if it
	// did: templates see it as the result's _ref (NoETL's marker).
	ResultURI string    `json:"result_uri,omitempty"`
	Error     string    `json:"error,omitempty"`
	EnterSeq  int64     `json:"enter_seq,omitempty"`
	EnteredAt time.Time `json:"entered_at,omitzero"`
	ExitedAt  time.Time `json:"exited_at,omitzero"`
	// Ledger holds arcs fired into the step since its last activation (R-J2).
	Ledger []FiredArc `json:"ledger,omitempty"`
	// Visit is the visit in progress, nil when none.
	Visit *Visit `json:"visit,omitempty"`
	// Kept are the completed iterations of a loop a redrive resumes, until
	// the step's next visit takes them over (redrive.go).
	Kept *KeptIterations `json:"kept,omitempty"`
}

// FiredArc is one entry of a ledger.
type FiredArc struct {
	From string         `json:"from"`
	Set  map[string]any `json:"set,omitempty"`
}

// Visit is a step visit in progress.
type Visit struct {
	N        int            `json:"n"`
	ArcSet   map[string]any `json:"arc_set,omitempty"`
	InFlight int            `json:"in_flight,omitempty"`
	Loop     *LoopState     `json:"loop,omitempty"`
}

// LoopState counts a loop visit's iterations; items and results live outside the
// snapshot (R-S1).
type LoopState struct {
	Total    int    `json:"total"`
	Iterator string `json:"iterator,omitempty"`
	Issued   int    `json:"issued,omitempty"`
	Done     int    `json:"done,omitempty"`
	Failed   int    `json:"failed,omitempty"`
	// Limit is a templated max_in_flight as rendered when the visit began (0: the
	// loop's literal limit applies).
	Limit int `json:"limit,omitempty"`
	// A cursor loop's Total grows with each claim (loop.claimed). Claiming: a
	// claim command is in flight (it counts in the visit's InFlight, not
	// against the limit). Drained: the last claim returned no row, so no
	// claim is issued until the iterations in flight have ended.
	Cursor   bool `json:"cursor,omitempty"`
	Claiming bool `json:"claiming,omitempty"`
	Drained  bool `json:"drained,omitempty"`
	// ClaimTxid is the database transaction of the latest claim (its worker
	// commits it once the server has the rows): the iterations of its rows
	// wait for it to end before they run (see decider.issue).
	ClaimTxid string `json:"claim_txid,omitempty"`
	// Kept are iteration indexes a redrive kept from the previous visit:
	// counted done from the start, never issued (redrive.go).
	Kept []int `json:"kept,omitempty"`
}

// CommandState is one command in flight.
type CommandState struct {
	Step    string `json:"step"`
	Visit   int    `json:"visit"`
	Index   int    `json:"index"`
	EventID int64  `json:"event_id"`
	Status  string `json:"status"`
	Attempt int    `json:"attempt"`
	Worker  string `json:"worker,omitempty"`
	// The retry policy travels with the command so the fold can tell a final
	// failure from one that will be retried without the playbook.
	MaxAttempts int      `json:"max_attempts"`
	RetryOn     []string `json:"retry_on,omitempty"`
	OnStatus    []int64  `json:"on_status,omitempty"`
	// Claim marks a cursor loop's claim command (Index is -1).
	Claim bool `json:"claim,omitempty"`
	// Envelope is the tool result recorded by call.done/call.error (R-R3).
	Envelope map[string]any `json:"envelope,omitempty"`
}

// NewSnapshot returns the state of an execution with no events.
func NewSnapshot() *Snapshot {
	return &Snapshot{Steps: map[string]*StepState{}, Commands: map[string]*CommandState{}, Ctx: map[string]any{}}
}

// UnmarshalSnapshot decodes a stored snapshot, keeping integers exact (R-T10).
func UnmarshalSnapshot(b []byte) (*Snapshot, error) {
	s := NewSnapshot()
	if len(b) == 0 {
		return s, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // any-typed fields get json.Number; normalise makes them int64/float64
	if err := dec.Decode(s); err != nil {
		return nil, err
	}
	s.normalise()
	if s.Steps == nil {
		s.Steps = map[string]*StepState{}
	}
	if s.Commands == nil {
		s.Commands = map[string]*CommandState{}
	}
	if s.Ctx == nil {
		s.Ctx = map[string]any{}
	}
	return s, nil
}

// normalise converts the json.Number values UseNumber left in any-typed fields.
func (s *Snapshot) normalise() {
	jsonx.Normalize(s.Ctx)
	for _, st := range s.Steps {
		st.Result = jsonx.Normalize(st.Result)
		for i := range st.Ledger {
			jsonx.Normalize(st.Ledger[i].Set)
		}
		if st.Visit != nil {
			jsonx.Normalize(st.Visit.ArcSet)
		}
	}
	for _, c := range s.Commands {
		jsonx.Normalize(c.Envelope)
	}
}

// Clone returns a copy that Handle and Apply can change without touching s.
// JSON values (results, ctx, arc sets, envelopes) are shared: the engine
// never changes a value in place (pathWriter copies the maps along its paths),
// and Encode relies on that to copy an unchanged step's bytes.
func (s *Snapshot) Clone() *Snapshot {
	c := *s
	c.Ctx = s.Ctx
	c.Steps = make(map[string]*StepState, len(s.Steps))
	// One allocation for all the copies: a long chain has thousands of steps,
	// and a clone is made at every event.
	copies := make([]StepState, 0, len(s.Steps))
	for name, st := range s.Steps {
		if st == nil {
			c.Steps[name] = nil
			continue
		}
		copies = append(copies, *st)
		cp := &copies[len(copies)-1]
		cp.Ledger = slices.Clone(st.Ledger)
		if st.ResultRef != nil {
			ref := *st.ResultRef
			cp.ResultRef = &ref
		}
		if st.Visit != nil {
			v := *st.Visit
			if v.Loop != nil {
				l := *v.Loop
				l.Kept = slices.Clone(l.Kept)
				v.Loop = &l
			}
			cp.Visit = &v
		}
		if st.Kept != nil {
			k := *st.Kept
			k.Indexes = slices.Clone(k.Indexes)
			cp.Kept = &k
		}
		c.Steps[name] = cp
	}
	c.Commands = make(map[string]*CommandState, len(s.Commands))
	for id, cs := range s.Commands {
		cp := *cs
		c.Commands[id] = &cp
	}
	c.FailedSteps = slices.Clone(s.FailedSteps)
	c.Waiting = slices.Clone(s.Waiting)
	return &c
}

// Terminal reports whether the execution has ended.
func (s *Snapshot) Terminal() bool {
	return lifecycle.ExecutionEnded(s.Status)
}

func (s *Snapshot) step(name string) *StepState {
	st := s.Steps[name]
	if st == nil {
		st = &StepState{Status: StepPending}
		s.Steps[name] = st
	}
	return st
}
