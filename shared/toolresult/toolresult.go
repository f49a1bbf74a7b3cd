// Package toolresult is the tool result envelope (worker.md §2): what a tool
// returns for one attempt, its statuses and error kinds, and the rule that
// classifies a failure (R-W6). The tools build it, the pipeline runner and the
// engine read it, and NoETL's workers' results are read onto it; it imports
// nothing of ours.
package toolresult

import (
	"encoding/json"
	"math"
)

// Envelope statuses (worker.md §2). Only the status fails a command (R-R2).
const (
	StatusSuccess = "success"
	StatusError   = "error"
	StatusTimeout = "timeout"
)

// Error kinds (R-W6).
const (
	KindTimeout     = "timeout"
	KindConnection  = "connection"
	KindRateLimit   = "rate_limit"   // HTTP 429
	KindServerError = "server_error" // HTTP 5xx
	KindClientError = "client_error" // other HTTP 4xx
	KindAuth        = "auth"         // HTTP 401, 403
	KindTool        = "tool"         // anything else
)

// ClaimTxidKey names, in the data of a cursor loop's claim our worker ran, the
// id of the database transaction it holds the claimed rows in until the server
// has them (shared/tools' Claim); the engine hands it to the rows' iterations,
// whose workers wait for it to end (AwaitClaim).
const ClaimTxidKey = "claim_txid"

// ContextUpdatesKey is NoETL's name, inside a pipeline's result data, for the
// durable ctx writes the pipeline reports (R-R5): the pipeline runner writes
// it, the engine takes it out.
const ContextUpdatesKey = "_context_updates"

// Envelope is a tool result (worker.md §2): what Exec returns for one attempt of one
// item, and what Run returns for the whole pipeline. Its wire form is Map (the worker
// reports env.Map()); the struct has no JSON encoding of its own, so there is one.
type Envelope struct {
	Status     string     // success | error | timeout
	Data       any        // what templates see as {{ label }} (R-R2: never unwrapped)
	Error      *ErrorInfo // set when Status is not success
	Stdout     string     // optional, tools that run processes
	Stderr     string     // optional
	ExitCode   *int       // optional
	DurationMs int64      // optional; Run sets it from Options.Now
}

// ErrorInfo is the error shape of R-W6. Status is the HTTP status of an http tool, 0
// (JSON null) otherwise.
type ErrorInfo struct {
	Message   string
	Kind      string
	Status    int
	Retryable bool
}

// Map is the error as a convention value: {message, kind, status, retryable}.
func (e *ErrorInfo) Map() map[string]any {
	if e == nil {
		return nil
	}
	var status any
	if e.Status != 0 {
		status = int64(e.Status)
	}
	return map[string]any{"message": e.Message, "kind": e.Kind, "status": status, "retryable": e.Retryable}
}

// Map is the envelope as a convention value: {status, data, error?, stdout?, stderr?,
// exit_code?, duration_ms?}; optional keys appear only when set.
func (e Envelope) Map() map[string]any {
	m := map[string]any{"status": e.Status, "data": e.Data}
	if e.Error != nil {
		m["error"] = e.Error.Map()
	}
	if e.Stdout != "" {
		m["stdout"] = e.Stdout
	}
	if e.Stderr != "" {
		m["stderr"] = e.Stderr
	}
	if e.ExitCode != nil {
		m["exit_code"] = int64(*e.ExitCode)
	}
	if e.DurationMs != 0 {
		m["duration_ms"] = e.DurationMs
	}
	return m
}

// Retryable is R-R6: timeouts, connection errors and HTTP 429/5xx.
func Retryable(kind string) bool {
	switch kind {
	case KindTimeout, KindConnection, KindRateLimit, KindServerError:
		return true
	}
	return false
}

// knownKind reports a kind an Exec may report itself.
func knownKind(kind string) bool {
	switch kind {
	case KindTimeout, KindConnection, KindRateLimit, KindServerError, KindClientError, KindAuth, KindTool:
		return true
	}
	return false
}

// Classify normalises one attempt's envelope: an unknown status becomes an error, and a
// failed outcome gets an R-W6 error (kind, HTTP status, retryable) whatever the Exec
// filled in, so rules see one shape. It also returns the HTTP status (0 when none).
func Classify(env Envelope, kind string) (Envelope, int) {
	httpStatus := 0
	if kind == "http" {
		if m, ok := env.Data.(map[string]any); ok {
			httpStatus = statusCode(m["status_code"])
		}
		if httpStatus == 0 && env.Error != nil {
			httpStatus = env.Error.Status
		}
	}
	switch env.Status {
	case StatusSuccess:
		// R-R2: only the status decides; a stray error on a success is dropped.
		env.Error = nil
		return env, httpStatus
	case StatusError, StatusTimeout:
	default:
		msg := "tool returned an envelope without a valid status"
		if env.Status != "" {
			quoted, _ := json.Marshal(env.Status)
			msg = "tool returned unknown status " + string(quoted)
		}
		env.Status = StatusError
		env.Error = &ErrorInfo{Message: msg}
	}
	e := ErrorInfo{Message: "tool failed without an error message"}
	if env.Error != nil {
		e = *env.Error
		if e.Message == "" {
			e.Message = "tool failed without an error message"
		}
	}
	e.Kind = errorKind(env.Status, e.Kind, httpStatus)
	e.Status = httpStatus
	e.Retryable = Retryable(e.Kind)
	env.Error = &e
	return env, httpStatus
}

// errorKind applies R-W6: a timeout status or an Exec-reported timeout/connection error
// wins (there may be no HTTP answer at all); then the HTTP status; then what the Exec
// said if it is a known kind; else tool.
func errorKind(status, reported string, httpStatus int) string {
	switch {
	case status == StatusTimeout || reported == KindTimeout:
		return KindTimeout
	case reported == KindConnection:
		return KindConnection
	case httpStatus == 429:
		return KindRateLimit
	case httpStatus == 401 || httpStatus == 403:
		return KindAuth
	case httpStatus >= 500:
		return KindServerError
	case httpStatus >= 400:
		return KindClientError
	case knownKind(reported):
		return reported
	default:
		return KindTool
	}
}

// statusCode reads an HTTP status from a data value; 0 when it is not a plausible one.
func statusCode(v any) int {
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case int:
		n = int64(x)
	case float64:
		if x != math.Trunc(x) {
			return 0
		}
		n = int64(x)
	case json.Number:
		i, err := x.Int64()
		if err != nil {
			return 0
		}
		n = i
	default:
		return 0
	}
	if n < 100 || n > 999 {
		return 0
	}
	return int(n)
}
