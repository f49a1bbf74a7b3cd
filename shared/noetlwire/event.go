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
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
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
// prefix): event_type (alias name), step (alias node_name), payload (alias
// context), meta (null is none), worker_id, result_kind, result_uri, event_ids,
// actionable, informative, event_id (the client's id: re-posting it is
// idempotent), status and created_at (RFC 3339, or the zone-less ISO form NoETL's
// Python workers write, read as UTC). Unknown fields are ignored. It does not
// read execution_id: the route decides where the execution comes from.
func Read(prefix string, m map[string]any) (Event, error) {
	f := jsonx.Fields{Prefix: prefix, M: m}
	var e Event
	var err error
	if e.Type, err = f.Str("event_type", true, "name"); err != nil {
		return e, err
	}
	if e.Step, err = f.Str("step", false, "node_name"); err != nil {
		return e, err
	}
	if e.Payload, err = f.Object("payload", "context"); err != nil {
		return e, err
	}
	if e.Meta, err = f.Object("meta"); err != nil {
		return e, err
	}
	if e.WorkerID, err = f.Str("worker_id", false); err != nil {
		return e, err
	}
	if e.ResultKind, err = f.Str("result_kind", false); err != nil {
		return e, err
	}
	if e.ResultURI, err = f.Str("result_uri", false); err != nil {
		return e, err
	}
	if e.EventIDs, _, err = f.Array("event_ids", false); err != nil {
		return e, err
	}
	if e.ClientEventID, err = scalar(f, "event_id"); err != nil {
		return e, err
	}
	if e.Status, err = f.Str("status", false); err != nil {
		return e, err
	}
	for _, k := range []string{"actionable", "informative"} {
		if v, ok := f.Get(k); ok {
			if _, isBool := v.(bool); !isBool {
				return e, jsonx.Refuse(f.Name(k), "expected boolean, got %s", jsonx.TypeName(v))
			}
		}
	}
	if e.CreatedAt, err = f.Str("created_at", false); err != nil {
		return e, err
	}
	if e.CreatedAt != "" {
		if _, err := ParseTime(e.CreatedAt); err != nil {
			return e, jsonx.Refuse(f.Name("created_at"), "expected a timestamp such as 2024-05-01T12:00:00Z (a zone-less one is read as UTC), got %q", cut(e.CreatedAt, 40))
		}
	}
	return e, nil
}

// ParseTime reads a producer's timestamp: RFC 3339, or the zone-less ISO form
// NoETL's Python workers and Postgres' timestamp columns write (UTC).
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	var err error
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
		var t time.Time
		if t, err = time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, err
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

// scalar reads a string or an integer as a string (client event ids).
func scalar(f jsonx.Fields, k string) (string, error) {
	v, ok := f.Get(k)
	if !ok {
		return "", nil
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", jsonx.Refuse(f.Name(k), "expected string or integer, got %s", jsonx.TypeName(v))
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// lower is strings.ToLower of a string value, "" for anything else.
func lower(v any) string {
	s, _ := v.(string)
	return strings.ToLower(s)
}
