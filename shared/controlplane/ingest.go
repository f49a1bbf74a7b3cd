package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/store"
)

// EventInput is one event a worker or client posts (NoETL's EventRequest).
type EventInput struct {
	ExecutionID int64
	Step        string
	Type        string
	Payload     map[string]any
	Meta        map[string]any
	WorkerID    string
	// ClientEventID is the producer's own id: re-posting it is idempotent.
	ClientEventID string
	Status        string
	ResultKind    string // data (default), ref, refs
	ResultURI     string
	EventIDs      []any
	// CreatedAt is the producer's own timestamp as sent. The created_at
	// column stays the server's clock under the lock (R-S4: as_of_time is a
	// seq prefix); the producer's time is kept in meta.client_created_at.
	CreatedAt string
}

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
	EventIDs []int64
	Reason   string
}

func (e *FencedError) Error() string { return e.Reason }
func (e *FencedError) Unwrap() error { return ErrConflict }

// workerTypes are the command events a worker may post; engine-owned types
// (step.*, playbook.*, command.issued, …) are the server's to write.
var workerTypes = map[string]bool{
	engine.EvCommandClaimed: true, engine.EvCommandStarted: true, engine.EvCallDone: true, engine.EvCallError: true,
	engine.EvCommandCompleted: true, engine.EvCommandFailed: true,
}

var serverTypes = map[string]bool{
	engine.EvPlaybookStarted: true, engine.EvPlaybookCompleted: true, engine.EvPlaybookFailed: true,
	engine.EvPlaybookCancelled: true, engine.EvStepEnter: true, engine.EvStepSkipped: true, engine.EvStepExit: true,
	engine.EvCtxUpdated: true, engine.EvCommandIssued: true, engine.EvCommandRetry: true,
	engine.EvCommandCancelled: true, engine.EvCommandExpired: true,
}

// Ingest stores one event and runs the orchestrator for it, in one transaction
// under the execution's row lock.
func (s *Service) Ingest(ctx context.Context, in EventInput) (*Ingested, error) {
	res, err := s.IngestBatch(ctx, in.ExecutionID, []EventInput{in})
	if err != nil {
		return nil, err
	}
	return &res[0], nil
}

// IngestBatch stores events of one execution in order, all or nothing, running
// the orchestrator for each (NoETL ignores command.failed in batches: we do not).
// Fenced events are stored flagged and the batch answers *FencedError after
// committing everything.
func (s *Service) IngestBatch(ctx context.Context, executionID int64, ins []EventInput) ([]Ingested, error) {
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
	out := make([]Ingested, len(ins))
	var fenced *FencedError
	err := s.withExecution(ctx, executionID, lockSetOf(prepared), func(t *txn, x *execution) error {
		fenced = nil // from scratch: withTx may run this again
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
	out, stored, err := t.advance(x, e)
	if err != nil {
		return Ingested{}, err
	}
	t.remember(x, e, stored.EventID)
	return Ingested{EventID: stored.EventID, CommandsGenerated: len(out.Commands)}, nil
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
	if terminal(x.row.Status) {
		return fmt.Sprintf("execution %d is already %s; the event was stored and ignored", x.row.ExecutionID, x.row.Status), nil
	}
	typ := engine.CanonicalType(e.EventType)
	if !workerTypes[typ] {
		return "", nil // informative: folded (Apply ignores types it does not know)
	}
	if e.CommandID == "" {
		return "", Errorf(ErrInvalid, "meta.command_id: %s needs the command's id", e.EventType)
	}
	k := t.cmds[e.CommandID]
	if k == nil || k.isNew || k.row.ExecutionID != x.row.ExecutionID {
		return "", Errorf(ErrNotFound, "command %s not found in execution %d", e.CommandID, x.row.ExecutionID)
	}
	c := k.row
	if c.Status != store.CommandClaimed && c.Status != store.CommandRunning {
		return fmt.Sprintf("command %s is %s, not held by a worker; the event was stored and ignored", c.CommandID, c.Status), nil
	}
	attempt := jsonx.Int(e.Meta["attempt"])
	if attempt == 0 {
		attempt = jsonx.Int(e.Meta["attempts"]) // NoETL workers' spelling
	}
	switch {
	case attempt > 0 && attempt != c.Attempt:
		return fmt.Sprintf("attempt %d of command %s is not the current attempt %d; the event was stored and ignored", attempt, c.CommandID, c.Attempt), nil
	case c.WorkerID != "" && e.WorkerID != c.WorkerID:
		by := e.WorkerID
		if by == "" {
			by = "a report without worker_id"
		}
		return fmt.Sprintf("command %s is held by %s, not %s; the event was stored and ignored", c.CommandID, c.WorkerID, by), nil
	}
	if typ == engine.EvCommandStarted && c.Status == store.CommandClaimed {
		t.changeCommand(c.CommandID, store.CommandChange{Status: store.CommandRunning})
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
// can read it back: the URI must lie inside the configured result store, so a
// worker cannot make the server read an arbitrary file or bucket.
func (s *Service) checkReference(in EventInput) error {
	if !strings.EqualFold(in.ResultKind, "ref") || in.ResultURI == "" {
		return nil
	}
	rs := s.cfg.Results
	if rs == nil {
		return fmt.Errorf("result_uri: %s cannot be read back: this server has no result store; set NOETL_RESULT_STORE (noetl serve --result-store) to the store the workers write to", in.ResultURI)
	}
	if !rs.Owns(in.ResultURI) {
		return fmt.Errorf("result_uri: %s is outside this server's result store %s; point the worker's --result-store at it", in.ResultURI, rs.URL())
	}
	return nil
}

// prepareEvent turns a posted event into the row to store: type checked, result
// normalised (R-R1), secrets redacted (events.md §7).
func prepareEvent(in EventInput) (store.Event, error) {
	typ := engine.CanonicalType(in.Type)
	if in.Type == "" {
		return store.Event{}, errors.New("event_type: required (e.g. command.completed)")
	}
	payload := in.Payload
	meta := in.Meta
	// A server-owned type (step.*, playbook.*, command.issued, …) posted by a
	// client is stored as sent but not folded (txn.ingest); NoETL accepts
	// them and its workers send step.exit.
	e := store.Event{EventType: in.Type, NodeName: in.Step, Status: in.Status, WorkerID: in.WorkerID, ClientEventID: in.ClientEventID,
		Ignored: serverTypes[typ]}
	e.CommandID, _ = meta["command_id"].(string)
	if e.CommandID == "" {
		e.CommandID, _ = payload["command_id"].(string)
	}
	result, err := normaliseResult(typ, in)
	if err != nil {
		return e, err
	}
	if result != nil {
		e.Result = redact.Value(result).(map[string]any)
	}
	if payload != nil {
		ctxv := make(map[string]any, len(payload))
		for k, v := range payload {
			if k != "result" {
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

// normaliseResult applies R-R1 and events.md §2's result shape rule: the stored
// result is {status, context: envelope} or {status, reference: …}.
func normaliseResult(typ string, in EventInput) (map[string]any, error) {
	status := in.Status
	switch strings.ToLower(in.ResultKind) {
	case "", "data":
	case "ref":
		if in.ResultURI == "" {
			return nil, errors.New("result_uri: required with result_kind ref")
		}
		out := map[string]any{"status": status, "reference": map[string]any{"store_tier": storeTier(in.ResultURI), "logical_uri": in.ResultURI}}
		// The tool envelope without its data (status, error, duration…) rides
		// along, so the step's status is the tool's, not the event's.
		if r, ok := in.Payload["result"].(map[string]any); ok {
			if env, st := toolEnvelope(r); st != "" {
				env = maps.Clone(env)
				delete(env, "data")
				out["status"], out["context"] = st, env
			}
		}
		return out, nil
	case "refs":
		if len(in.EventIDs) == 0 {
			return nil, errors.New("event_ids: required with result_kind refs")
		}
		return map[string]any{"status": status, "reference": map[string]any{"event_ids": in.EventIDs, "total_parts": int64(len(in.EventIDs))}}, nil
	default:
		return nil, fmt.Errorf("result_kind: expected data, ref or refs, got %q", in.ResultKind)
	}
	raw, has := in.Payload["result"]
	if !has || raw == nil {
		return nil, nil
	}
	r, ok := raw.(map[string]any)
	if !ok {
		if typ == engine.EvCallDone || typ == engine.EvCommandCompleted {
			return nil, fmt.Errorf("payload.result: expected a tool result object {status, data, …}, got %T", raw)
		}
		return nil, nil // events.md §2: non-objects are dropped
	}
	env, st := toolEnvelope(r)
	if st != "" {
		return map[string]any{"status": st, "context": env}, nil
	}
	if typ == engine.EvCallDone || typ == engine.EvCommandCompleted {
		st, _ := env["status"].(string)
		return nil, fmt.Errorf("payload.result: expected {status: success|error|timeout, data, error?} or NoETL's {status, context: {status, data}}, got status %q", st)
	}
	return map[string]any{"status": status, "context": r}, nil
}

// toolEnvelope finds the tool envelope in a posted result: flat
// {status, data, …} or NoETL's {status, context: {status, data}}. st is the
// envelope's lower-cased status, "" when it is not a tool status.
func toolEnvelope(r map[string]any) (env map[string]any, st string) {
	env = r
	if inner, ok := r["context"].(map[string]any); ok {
		if _, hasData := r["data"]; !hasData {
			env = inner
		}
	}
	st, _ = env["status"].(string)
	switch st = strings.ToLower(st); st {
	case "success", "error", "timeout":
		return env, st
	}
	return env, ""
}

func storeTier(uri string) string {
	switch {
	case strings.HasPrefix(uri, "s3://"):
		return "s3"
	case strings.HasPrefix(uri, "gs://"), strings.HasPrefix(uri, "gcs://"):
		return "gcs"
	}
	return "artifact"
}
