// Package noetlwire owns what NoETL's workers send this server, and how it is read
// onto our events and results. api decodes requests through it and controlplane
// stores and folds what it returns: neither knows an envelope variant.
//
// The variants read today:
//
//   - ours and the R-R1 readings: payload.result is a tool envelope
//     {status: success|error|timeout, data, error?}, flat or wrapped as
//     {status, context: envelope};
//
//   - NoETL's Python worker (noetl/noetl 4.x, noetl/worker/nats_worker.py):
//     payload.result is {status: COMPLETED|FAILED, context: <the output without its
//     data fields>} and payload.response is the tool's whole output. The output is
//     the step's data (NoETL's server keeps payload.response as the step result too),
//     fitted to the command's tool by Fit; its command.heartbeat events extend the
//     holder's lease; its call.error may name no command.
//
//   - NoETL's Rust worker (noetl/worker, its ExecutorEvent envelope: event_type,
//     step, status, created_at, context with command_id, event_id, worker_id,
//     meta.attempts): Read takes context as payload's alias; its call.done
//     result is {status, context: ToolResult} inline, or over its 100 KiB budget
//     staged with PUT /api/result and posted as {status, context: {data: {_ref}},
//     reference: {kind: result_ref, ref}} (Result, stagedReference);
//     command.completed carries the tool's lower-case status.
//
// What NoETL's workers send beside events is read here too: the bodies of POST
// /api/vars (ReadVariables) and PUT /api/result (ReadStagedResult).
//
// Both workers' pool registrations (register, heartbeat, deregister) are read by
// ReadRegistration and ReadWorkerName (pool.go): the Python worker's runtime
// string and meta, the Rust worker's runtime object and labels.pool_name.
package noetlwire

import (
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/wire"
)

// Event is one event a worker or client posts (NoETL's EventRequest), read.
type Event struct {
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
	// CreatedAt is the producer's own timestamp as sent. The created_at column
	// stays the server's clock under the lock (R-S4: as_of_time is a seq prefix);
	// the producer's time is kept in meta.client_created_at.
	CreatedAt string
}

// Event types only workers send.
const (
	// TypeHeartbeat is NoETL's per-command heartbeat, posted as an event every
	// 15 s while a command runs: it extends the holder's lease and writes no event
	// (R-L1).
	TypeHeartbeat = "command.heartbeat"
)

// FieldError is a request field a reader refused (jsonx's, shared with the
// API's own requests).
type FieldError = jsonx.FieldError

// Read reads one EventRequest object (a body, or a batch element whose path is
// prefix) as wire.EventFields declares it: event_type (alias name), step
// (alias node_name), payload (alias context), meta (null is none), worker_id,
// result_kind, result_uri, event_ids, actionable, informative, event_id (the
// client's id: re-posting it is idempotent), status and created_at (RFC 3339,
// or the zone-less ISO form NoETL's Python workers write, read as UTC).
// Unknown fields are ignored. It does not read execution_id: the route
// decides where the execution comes from.
func Read(prefix string, m map[string]any) (Event, error) {
	var r wire.EventFields
	if err := jsonx.Read(jsonx.Fields{Prefix: prefix, M: m}, &r); err != nil {
		return Event{}, err
	}
	return FromRequest(r), nil
}

// FromRequest is the event a read EventRequest posts.
func FromRequest(r wire.EventFields) Event {
	return Event{Step: r.Step, Type: r.EventType, Payload: r.Payload, Meta: r.Meta, WorkerID: r.WorkerID,
		ClientEventID: string(r.EventID), Status: r.Status, ResultKind: r.ResultKind, ResultURI: r.ResultURI,
		EventIDs: r.EventIDs, CreatedAt: string(r.CreatedAt)}
}

// CommandID is the command an event reports on: meta.command_id, else
// payload.command_id (NoETL's Python worker puts it in both, or only in the
// payload; a string, or an integer from NoETL's snowflake ids). "" when neither.
func (e *Event) CommandID() string {
	for _, src := range []map[string]any{e.Meta, e.Payload} {
		switch v := src["command_id"].(type) {
		case string:
			if v != "" {
				return v
			}
		case int64:
			return strconv.FormatInt(v, 10)
		}
	}
	return ""
}

// Attempt is the attempt an event reports on (R-L8's fencing token): meta.attempt,
// or meta.attempts (NoETL's workers' spelling); 0 when absent.
func (e *Event) Attempt() int { return Attempt(e.Meta) }

// Attempt reads the attempt of an event's meta: attempt, or attempts (NoETL's
// workers' spelling); 0 when absent.
func Attempt(meta map[string]any) int {
	if a := jsonx.Int(meta["attempt"]); a > 0 {
		return a
	}
	return jsonx.Int(meta["attempts"])
}

// IsHeartbeat reports whether the event is a per-command heartbeat.
func (e *Event) IsHeartbeat() bool { return e.Type == TypeHeartbeat }

// lower is strings.ToLower of a string value, "" for anything else.
func lower(v any) string {
	s, _ := v.(string)
	return strings.ToLower(s)
}
