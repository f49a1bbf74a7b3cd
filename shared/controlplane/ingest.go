package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/toolkind"
)

// EventInput is one event a worker or client posts (NoETL's EventRequest), as
// noetlwire reads it.
type EventInput = noetlwire.Event

// Ingested is the outcome of one posted event.
type Ingested struct {
	EventID           int64
	CommandsGenerated int
	// Duplicate is true when the client event id was seen before: nothing happened.
	Duplicate bool
}

// FencedError answers an event from a worker that does not hold the command's
// current lease, or an event for an ended execution (R-L8, R-R10): the event is
// stored, flagged ignored, and the request gets 409.
type FencedError struct {
	EventIDs []int64 `json:"event_ids"`
	Reason   string  `json:"reason"`
}

func (e *FencedError) Error() string { return e.Reason }
func (e *FencedError) Unwrap() error { return ErrConflict }

// workerTypes are the command events a worker may post; engine-owned types
// (step.*, playbook.*, command.issued, …) are the server's to write.
var workerTypes = map[string]bool{
	eventtype.CommandClaimed: true, eventtype.CommandStarted: true, eventtype.CallDone: true, eventtype.CallError: true,
	eventtype.CommandCompleted: true, eventtype.CommandFailed: true,
}

var serverTypes = map[string]bool{
	eventtype.PlaybookStarted: true, eventtype.PlaybookCompleted: true, eventtype.PlaybookFailed: true,
	eventtype.PlaybookCancelled: true, eventtype.StepEnter: true, eventtype.StepSkipped: true, eventtype.StepExit: true,
	eventtype.CtxUpdated: true, eventtype.CommandIssued: true, eventtype.CommandRetry: true,
	eventtype.CommandCancelled: true, eventtype.CommandExpired: true, eventtype.LoopClaimed: true,
	eventtype.PlaybookRedriven: true, eventtype.StepRerouted: true,
}

// Ingest stores one event and runs the orchestrator for it, in one transaction
// under the execution's row lock.
func (s *Service) Ingest(ctx context.Context, in EventInput) (*Ingested, error) {
	res, err := s.IngestBatch(ctx, in.ExecutionID, []EventInput{in}, nil)
	if res == nil {
		return nil, err
	}
	return &res[0], err
}

// Request is an event request's Idempotency-Key: the first answer of Key is
// given again to every repeat of the request, which stores nothing; Hash
// identifies the request's body, and a repeat with another body is refused.
type Request struct {
	Key  string
	Hash string
}

// IngestBatch stores events of one execution in order, all or nothing, running
// the orchestrator for each (NoETL ignores command.failed in batches: we do not).
// Fenced events are stored flagged and the batch answers *FencedError, with
// the outcomes, after committing everything. With req, a repeat of a request
// gets its first answer.
func (s *Service) IngestBatch(ctx context.Context, executionID int64, ins []EventInput, req *Request) ([]Ingested, error) {
	prepared := make([]store.Event, len(ins))
	for i, in := range ins {
		in.ExecutionID = executionID
		e, err := s.prepare(in)
		if err != nil {
			if len(ins) > 1 {
				return nil, Errorf(ErrInvalid, "events[%d].%v", i, err)
			}
			return nil, Errorf(ErrInvalid, "%v", err)
		}
		prepared[i] = e
	}
	if out, ok, err := s.stage(ctx, executionID, prepared, req); err != nil || ok {
		return out, err
	}
	out := make([]Ingested, len(ins))
	var fenced *FencedError
	ls := lockSetOf(prepared)
	if req != nil {
		ls.Request = &store.RequestKey{ExecutionID: executionID, Key: req.Key}
	}
	err := s.withExecution(ctx, executionID, ls, func(t *txn, x *execution) error {
		fenced = nil // from scratch: withTx may run this again
		if a := ls.Answered; a != nil {
			if a.Hash != req.Hash {
				return Errorf(ErrInvalid, "Idempotency-Key %q was used for another request to execution %d; send a new key with a new request", req.Key, executionID)
			}
			var err error
			out, fenced, err = decodeAnswer(a.Answer, len(ins))
			if err != nil {
				return err
			}
			return errDiscard
		}
		for i, e := range prepared {
			res, err := t.ingest(x, e)
			var f *FencedError
			switch {
			case errors.As(err, &f):
				if fenced == nil {
					fenced = &FencedError{Reason: f.Reason}
				}
				fenced.EventIDs = append(fenced.EventIDs, f.EventIDs...)
			case err != nil:
				return err
			}
			out[i] = res
		}
		if req != nil {
			t.ch.Requests = append(t.ch.Requests, store.EventRequest{RequestKey: *ls.Request, Hash: req.Hash, Answer: encodeAnswer(out, fenced)})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if fenced != nil {
		return out, fenced
	}
	return out, nil
}

// stage stores events that decide nothing without a transaction that takes
// the execution's lock (store.StageEvents): a request whose every event is a
// command.started, call.done or call.error its holder reports on, or a
// worker's copy of a server-owned event (NoETL's workers' step.enter and
// step.exit). Its holder's next request (command.completed) enters them into
// the log under the lock (txn.settle), so NoETL's workers' four calls cost two
// locked transactions per step. ok false: nothing was stored, and the locked
// path answers (a command not held, an ended execution, a repeat).
func (s *Service) stage(ctx context.Context, executionID int64, prepared []store.Event, req *Request) (_ []Ingested, ok bool, _ error) {
	var holds []store.Hold
	for _, e := range prepared {
		if e.Ignored {
			continue
		}
		switch eventtype.Canonical(e.EventType) {
		case eventtype.CommandStarted, eventtype.CallDone, eventtype.CallError:
		default:
			return nil, false, nil // it may decide: under the lock
		}
		if e.CommandID == "" || e.WorkerID == "" {
			return nil, false, nil // fenced under the lock, with its reason
		}
		holds = append(holds, store.Hold{CommandID: e.CommandID, WorkerID: e.WorkerID, Attempt: noetlwire.Attempt(e.Meta)})
	}
	sh, err := s.st.ShardFor(executionID)
	if err != nil {
		return nil, false, nil
	}
	ids, err := s.ids.take(ctx, sh.Pool(), sh.Index(), len(prepared))
	if err != nil {
		return nil, false, err
	}
	st := store.Stage{ExecutionID: executionID, Holds: holds, Events: make([]store.Event, len(prepared)), Raw: make([]bool, len(prepared))}
	out := make([]Ingested, len(prepared))
	for i, e := range prepared {
		e.ExecutionID, e.EventID = executionID, ids[i]
		st.Events[i], st.Raw[i], out[i] = e, e.RawOutput, Ingested{EventID: ids[i]}
	}
	if req != nil {
		st.Request = &store.EventRequest{RequestKey: store.RequestKey{ExecutionID: executionID, Key: req.Key}, Hash: req.Hash,
			Answer: encodeAnswer(out, nil)}
	}
	if ok, err := store.StageEvents(ctx, sh.Pool(), st); err != nil || !ok {
		return nil, false, err
	}
	return out, true, nil
}

// answer is an event request's outcome as event_request keeps it.
type answer struct {
	Events []Ingested   `json:"events"`
	Fenced *FencedError `json:"fenced,omitempty"`
}

func encodeAnswer(out []Ingested, fenced *FencedError) []byte {
	b, _ := json.Marshal(answer{Events: out, Fenced: fenced})
	return b
}

func decodeAnswer(b []byte, n int) ([]Ingested, *FencedError, error) {
	var a answer
	if err := json.Unmarshal(b, &a); err != nil || len(a.Events) != n {
		return nil, nil, fmt.Errorf("controlplane: a stored event request answer does not read back (%d events for %d): %v", len(a.Events), n, err)
	}
	return a.Events, a.Fenced, nil
}

// HeartbeatCommand extends the lease of a command the worker holds, named by
// its execution and id: NoETL's workers' command.heartbeat event (R-L1: it
// writes no event). It is Heartbeat by another name of the command.
func (s *Service) HeartbeatCommand(ctx context.Context, executionID int64, commandID, workerID string, attempt int) (time.Time, error) {
	sh, err := s.st.ShardFor(executionID)
	if err != nil {
		return time.Time{}, Errorf(ErrNotFound, "execution %d not found", executionID)
	}
	return s.extendLease(ctx, sh, executionID, commandID, workerID, attempt)
}

// lockSetOf is what ingesting events locks and looks up: their executions,
// the commands they report on, their client ids.
func lockSetOf(events []store.Event) *store.LockSet {
	ls := &store.LockSet{}
	seenExec, seenCmd := map[int64]bool{}, map[string]bool{}
	for _, e := range events {
		if !seenExec[e.ExecutionID] {
			seenExec[e.ExecutionID] = true
			ls.Executions = append(ls.Executions, e.ExecutionID)
		}
		if e.CommandID != "" && !seenCmd[e.CommandID] {
			seenCmd[e.CommandID] = true
			ls.Commands = append(ls.Commands, e.CommandID)
		}
		if e.ClientEventID != "" {
			ls.ClientEvents = append(ls.ClientEvents, store.ClientEventKey{ExecutionID: e.ExecutionID, ClientID: e.ClientEventID})
		}
	}
	slices.Sort(ls.Executions)
	slices.Sort(ls.Commands)
	return ls
}

// ingest folds one worker event into a locked execution: a re-posted client
// id is answered with the first event's id and nothing else; a fenced event
// is stored ignored and answered *FencedError (R-L8, R-R10).
func (t *txn) ingest(x *execution, e store.Event) (Ingested, error) {
	if e.ClientEventID != "" {
		key := store.ClientEventKey{ExecutionID: x.row.ExecutionID, ClientID: e.ClientEventID}
		if id, ok := t.seen[key]; ok {
			return Ingested{EventID: id, Duplicate: true}, nil
		}
	}
	if e.Ignored {
		// A worker's copy of a server-owned event (NoETL's workers post
		// step.exit; NoETL stores what it is sent): stored in the log as
		// sent, flagged ignored, never folded — the orchestrator alone
		// writes the transitions these types mean.
		stored, err := t.appendIgnored(x, e)
		if err != nil {
			return Ingested{}, err
		}
		t.remember(x, e, stored.EventID)
		return Ingested{EventID: stored.EventID}, nil
	}
	reason, err := t.fence(x, &e)
	if err != nil {
		return Ingested{}, err
	}
	if reason != "" {
		stored, err := t.appendIgnored(x, e)
		if err != nil {
			return Ingested{}, err
		}
		t.remember(x, e, stored.EventID)
		return Ingested{EventID: stored.EventID}, &FencedError{Reason: reason, EventIDs: []int64{stored.EventID}}
	}
	if e.RawOutput {
		e.Result = noetlwire.Fit(e.Result, t.toolOf(x, e.CommandID))
	}
	out, stored, err := t.advance(x, e)
	if err != nil {
		return Ingested{}, err
	}
	t.remember(x, e, stored.EventID)
	return Ingested{EventID: stored.EventID, CommandsGenerated: len(out.Commands)}, nil
}

// toolOf is what noetlwire.Fit needs of a command's tool: its kind, and for a
// pipeline the labels of the step's items and whether it is a single tool with
// spec.policy.
func (t *txn) toolOf(x *execution, commandID string) noetlwire.Tool {
	k := t.cmds[commandID]
	if k == nil {
		return noetlwire.Tool{}
	}
	tool := noetlwire.Tool{Kind: k.row.ToolKind}
	if st := x.pb.Step(k.row.Step); st != nil && tool.Kind == toolkind.TaskSequence {
		if st.Tool != nil {
			tool.Single, tool.Labels, tool.Kinds = true, []string{st.Tool.Label(st.Name)}, []string{st.Tool.Kind}
		}
		for _, it := range st.Pipeline {
			tool.Labels, tool.Kinds = append(tool.Labels, it.Label), append(tool.Kinds, it.Tool.Kind)
		}
	}
	return tool
}

// remember records a stored client id, so a repeat later in the same request
// is a duplicate too.
func (t *txn) remember(x *execution, e store.Event, id int64) {
	if e.ClientEventID != "" {
		if t.seen == nil {
			t.seen = map[store.ClientEventKey]int64{}
		}
		t.seen[store.ClientEventKey{ExecutionID: x.row.ExecutionID, ClientID: e.ClientEventID}] = id
	}
}

// fence decides whether an event may be folded (R-L8, R-R10) and moves the
// command row on command.started. It returns the reason for ignoring it, if
// any. A report on a held command is accepted only from its holder: the
// worker id must be the holder's and the attempt, when given, the current one.
func (t *txn) fence(x *execution, e *store.Event) (string, error) {
	if lifecycle.ExecutionEnded(x.row.Status) {
		return fmt.Sprintf("execution %d is already %s; the event was stored and ignored", x.row.ExecutionID, x.row.Status), nil
	}
	typ := eventtype.Canonical(e.EventType)
	if !workerTypes[typ] {
		return "", nil // informative: folded (Apply ignores types it does not know)
	}
	if e.CommandID == "" {
		if typ == eventtype.CallDone || typ == eventtype.CallError {
			// NoETL's worker sends call.error without a command after its batch
			// was refused (meta null, no payload.command_id), as NoETL's server
			// takes it: it only records (R-R3), and the command.failed that
			// follows names the command and decides.
			return fmt.Sprintf("%s names no command (meta.command_id or payload.command_id); the event was stored and ignored", e.EventType), nil
		}
		return "", Errorf(ErrInvalid, "meta.command_id: %s needs the command's id (meta.command_id or payload.command_id)", e.EventType)
	}
	k := t.cmds[e.CommandID]
	if k == nil || k.isNew || k.row.ExecutionID != x.row.ExecutionID {
		return "", Errorf(ErrNotFound, "command %s not found in execution %d", e.CommandID, x.row.ExecutionID)
	}
	c := k.row
	attempt := noetlwire.Attempt(e.Meta)
	switch {
	case lifecycle.HeldBy(c.Lifecycle(), e.WorkerID, attempt):
	case !lifecycle.Held(c.Lifecycle()):
		return fmt.Sprintf("command %s is %s, not held by a worker; the event was stored and ignored", c.CommandID, c.Status), nil
	case attempt > 0 && attempt != c.Attempt:
		return fmt.Sprintf("attempt %d of command %s is not the current attempt %d; the event was stored and ignored", attempt, c.CommandID, c.Attempt), nil
	default:
		by := e.WorkerID
		if by == "" {
			by = "a report without worker_id"
		}
		return fmt.Sprintf("command %s is held by %s, not %s; the event was stored and ignored", c.CommandID, c.WorkerID, by), nil
	}
	if typ == eventtype.CommandStarted && c.Status == store.CommandClaimed {
		t.changeCommand(c.CommandID, store.CommandChange{Status: store.CommandRunning}, lifecycle.Start)
	}
	return "", nil
}

// prepare validates a posted event and turns it into the row to store.
func (s *Service) prepare(in EventInput) (store.Event, error) {
	e, err := prepareEvent(in)
	if err == nil {
		err = s.checkReference(in)
	}
	e.ExecutionID = in.ExecutionID
	return e, err
}

// checkReference accepts a result posted by reference only when this server
// can read it back as the event's execution's: the URI must be an object of
// that execution inside the configured result store, or a noetl:// reference
// of it (a result staged with PUT /api/result), so a worker cannot make the
// server read an arbitrary file or bucket, or another execution's result.
func (s *Service) checkReference(in EventInput) error {
	if !strings.EqualFold(in.ResultKind, "ref") || in.ResultURI == "" {
		return nil
	}
	rs := s.cfg.Results
	if rs == nil {
		return fmt.Errorf("result_uri: %s cannot be read back: this server has no result store; set NOETL_RESULT_STORE (noetl serve --result-store) to the store the workers write to", in.ResultURI)
	}
	loc, _, _ := strings.Cut(in.ResultURI, "#")
	if !resultstore.IsNoETLRef(loc) && !resultstore.Owns(rs, loc) {
		return fmt.Errorf("result_uri: %s is outside this server's result store %s; point the worker's --result-store at it", in.ResultURI, rs.URL())
	}
	// Staged with this server (PUT /api/result) or stored by the worker: an
	// object of the event's execution.
	if err := resultstore.CheckExecution(rs, loc, in.ExecutionID); err != nil {
		return fmt.Errorf("result_uri: %w", err)
	}
	return nil
}

// prepareEvent turns a posted event into the row to store: type checked, result
// read onto our shape (noetlwire.Result), secrets redacted (events.md §7).
func prepareEvent(in EventInput) (store.Event, error) {
	typ := eventtype.Canonical(in.Type)
	if in.Type == "" {
		return store.Event{}, errors.New("event_type: required (e.g. command.completed)")
	}
	payload := in.Payload
	meta := in.Meta
	// A server-owned type (step.*, playbook.*, command.issued, …) posted by a
	// client is stored as sent but not folded (txn.ingest); NoETL accepts
	// them and its workers send step.exit.
	e := store.Event{EventType: in.Type, NodeName: in.Step, Status: in.Status, WorkerID: in.WorkerID, ClientEventID: in.ClientEventID,
		Ignored: serverTypes[typ], CommandID: in.CommandID()}
	result, raw, err := noetlwire.Result(&in, typ)
	if err != nil {
		return e, err
	}
	if result != nil {
		e.Result = redact.Value(result).(map[string]any)
		e.RawOutput = raw
	}
	if payload != nil {
		ctxv := make(map[string]any, len(payload))
		for k, v := range payload {
			// The result is stored on its own; a NoETL worker's whole output
			// (payload.response) became the result's data: not kept twice.
			if k != "result" && !(raw && k == "response") {
				ctxv[k] = v
			}
		}
		e.Context = redact.Value(ctxv).(map[string]any)
		e.Error = engine.ErrorText(payload["error"])
	}
	if meta != nil {
		e.Meta = redact.Value(meta).(map[string]any)
	}
	if in.WorkerID != "" {
		if e.Meta == nil {
			e.Meta = map[string]any{}
		}
		e.Meta["worker_id"] = in.WorkerID
	}
	if in.CreatedAt != "" {
		if e.Meta == nil {
			e.Meta = map[string]any{}
		}
		e.Meta["client_created_at"] = in.CreatedAt
	}
	return e, nil
}
