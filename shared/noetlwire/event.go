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
	"fmt"
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

// FieldError is a request field a reader refused: the field's path and why.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

func fieldError(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Read reads one EventRequest object (a body, or a batch element whose path is
// prefix): event_type (alias name), step (alias node_name), payload (alias
// context), meta (null is none), worker_id, result_kind, result_uri, event_ids,
// actionable, informative, event_id (the client's id: re-posting it is
// idempotent), status and created_at (RFC 3339, or the zone-less ISO form NoETL's
// Python workers write, read as UTC). Unknown fields are ignored. It does not
// read execution_id: the route decides where the execution comes from.
func Read(prefix string, m map[string]any) (Event, error) {
	f := fields{prefix: prefix, m: m}
	var e Event
	var err error
	if e.Type, err = f.str("event_type", true, "name"); err != nil {
		return e, err
	}
	if e.Step, err = f.str("step", false, "node_name"); err != nil {
		return e, err
	}
	if e.Payload, err = f.object("payload", "context"); err != nil {
		return e, err
	}
	if e.Meta, err = f.object("meta"); err != nil {
		return e, err
	}
	if e.WorkerID, err = f.str("worker_id", false); err != nil {
		return e, err
	}
	if e.ResultKind, err = f.str("result_kind", false); err != nil {
		return e, err
	}
	if e.ResultURI, err = f.str("result_uri", false); err != nil {
		return e, err
	}
	if e.EventIDs, err = f.array("event_ids"); err != nil {
		return e, err
	}
	if e.ClientEventID, err = f.scalar("event_id"); err != nil {
		return e, err
	}
	if e.Status, err = f.str("status", false); err != nil {
		return e, err
	}
	for _, k := range []string{"actionable", "informative"} {
		if v, ok := f.get(k); ok {
			if _, isBool := v.(bool); !isBool {
				return e, fieldError(f.name(k), "expected boolean, got %s", jsonx.TypeName(v))
			}
		}
	}
	if e.CreatedAt, err = f.str("created_at", false); err != nil {
		return e, err
	}
	if e.CreatedAt != "" {
		if _, err := ParseTime(e.CreatedAt); err != nil {
			return e, fieldError(f.name("created_at"), "expected a timestamp such as 2024-05-01T12:00:00Z (a zone-less one is read as UTC), got %q", cut(e.CreatedAt, 40))
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

// fields reads one JSON object's fields; prefix is its path in the request.
type fields struct {
	prefix string
	m      map[string]any
}

func (f fields) name(k string) string {
	if f.prefix == "" {
		return k
	}
	return f.prefix + "." + k
}

// get returns a field; JSON null counts as absent.
func (f fields) get(k string) (any, bool) {
	v, ok := f.m[k]
	return v, ok && v != nil
}

// first returns the first present key of k and its aliases; two present with
// different values are an error naming the second.
func (f fields) first(k string, aliases ...string) (string, any, error) {
	found, val := "", any(nil)
	for _, key := range append([]string{k}, aliases...) {
		v, ok := f.get(key)
		if !ok {
			continue
		}
		if found == "" {
			found, val = key, v
			continue
		}
		if string(jsonx.MustMarshal(v)) != string(jsonx.MustMarshal(val)) {
			return "", nil, fieldError(f.name(key), "is an alias of %s; give one of them", f.name(found))
		}
	}
	return found, val, nil
}

func (f fields) str(k string, required bool, aliases ...string) (string, error) {
	key, v, err := f.first(k, aliases...)
	if err != nil {
		return "", err
	}
	if key == "" {
		if required {
			return "", fieldError(f.name(k), "required")
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fieldError(f.name(key), "expected string, got %s", jsonx.TypeName(v))
	}
	if required && s == "" {
		return "", fieldError(f.name(key), "must not be empty")
	}
	return s, nil
}

func (f fields) object(k string, aliases ...string) (map[string]any, error) {
	key, v, err := f.first(k, aliases...)
	if err != nil || key == "" {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fieldError(f.name(key), "expected object, got %s", jsonx.TypeName(v))
	}
	return m, nil
}

func (f fields) array(k string) ([]any, error) {
	v, ok := f.get(k)
	if !ok {
		return nil, nil
	}
	a, isArr := v.([]any)
	if !isArr {
		return nil, fieldError(f.name(k), "expected array, got %s", jsonx.TypeName(v))
	}
	return a, nil
}

// scalar reads a string or an integer as a string (client event ids).
func (f fields) scalar(k string) (string, error) {
	v, ok := f.get(k)
	if !ok {
		return "", nil
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", fieldError(f.name(k), "expected string or integer, got %s", jsonx.TypeName(v))
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
