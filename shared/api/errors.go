package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"

	"github.com/noetl-go/noetl/shared/wire"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/store"
)

// Error is an API error: the HTTP status and the message of the
// {"error": "<message>", "status": <code>} body (api.md §1). Extra fields are
// added to the body; Header is merged into the response's headers.
type Error struct {
	Status  int
	Message string
	Extra   map[string]any
	Header  http.Header
}

func (e *Error) Error() string { return e.Message }

// retryAfterSeconds is a 429's retry_after_seconds (R-L7), 0 for others.
func (e *Error) retryAfterSeconds() int {
	n, _ := e.Extra["retry_after_seconds"].(int64)
	return int(n)
}

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// invalid is a 422 naming a field: invalid("payload.items", "expected array, got %s", "string").
func invalid(field, format string, args ...any) *Error {
	return &Error{Status: http.StatusUnprocessableEntity, Message: field + ": " + fmt.Sprintf(format, args...)}
}

// RetryAfterUnavailable is the Retry-After, in seconds, of a 503 for a
// database that is away: short, as a restart takes seconds; clients back
// off further on their own while it lasts (docs/outages.md).
const RetryAfterUnavailable = 2

// classify turns a service error into an API error (R-A2: validation 422, a
// list over its limit 413, unknown ids 404; conflicts 409; early claims 429
// with Retry-After, R-L7; the database away 503 with Retry-After). Anything else is a 500 whose
// message does not leak internals; the caller logs the cause.
func classify(err error) *Error {
	var (
		apiErr   *Error
		tooEarly *controlplane.TooEarlyError
		fenced   *controlplane.FencedError
		refused  *controlplane.RefusedClaim
		invalidP *controlplane.InvalidPlaybookError
	)
	var (
		field   *jsonx.FieldError
		tooMany *jsonx.TooMany
	)
	switch {
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &field):
		return invalid(field.Field, "%s", field.Message)
	case errors.As(err, &tooMany):
		return errorf(http.StatusRequestEntityTooLarge, "%s", tooMany.Error())
	case errors.As(err, &tooEarly):
		secs := int64(math.Ceil(tooEarly.After.Seconds()))
		if secs < 1 {
			secs = 1
		}
		e := errorf(http.StatusTooManyRequests, "%s", tooEarly.Error())
		e.Header = http.Header{"Retry-After": {strconv.FormatInt(secs, 10)}}
		e.Extra = map[string]any{"retry_after_seconds": secs}
		return e
	case errors.As(err, &refused):
		// NoETL's workers read detail.code to ack a refused claim and skip it.
		e := errorf(http.StatusConflict, "%s", refused.Reason)
		e.Extra = map[string]any{"detail": map[string]any{"code": refused.Code, "message": refused.Reason}}
		return e
	case errors.As(err, &fenced):
		e := errorf(http.StatusConflict, "%s", fenced.Reason)
		refused := make([]wire.ID, len(fenced.EventIDs))
		for i, id := range fenced.EventIDs {
			refused[i] = wire.ID(id)
		}
		e.Extra = map[string]any{"event_ids": refused}
		return e
	case errors.As(err, &invalidP):
		e := errorf(http.StatusUnprocessableEntity, "%s", invalidP.Error())
		problems := make([]any, len(invalidP.Problems))
		for i, p := range invalidP.Problems {
			problems[i] = p
		}
		e.Extra = map[string]any{"problems": problems}
		return e
	case errors.Is(err, controlplane.ErrInvalid):
		return errorf(http.StatusUnprocessableEntity, "%s", err.Error())
	case errors.Is(err, controlplane.ErrNotFound), errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusNotFound, "%s", err.Error())
	case errors.Is(err, controlplane.ErrForbidden):
		return errorf(http.StatusForbidden, "%s", err.Error())
	case errors.Is(err, controlplane.ErrUnavailable):
		return errorf(http.StatusServiceUnavailable, "%s", err.Error())
	case errors.Is(err, controlplane.ErrNotConfigured):
		return errorf(http.StatusNotImplemented, "%s", err.Error())
	case errors.Is(err, controlplane.ErrConflict), errors.Is(err, store.ErrConflict):
		return errorf(http.StatusConflict, "%s", err.Error())
	case store.Transient(err):
		// The database is away (a restart, a failover) or aborted the
		// transaction after the server's own retries: the same request
		// can succeed later, and says when to try.
		return errUnavailable()
	case errors.Is(err, context.DeadlineExceeded):
		return errorf(http.StatusGatewayTimeout, "the request ran out of time")
	}
	return errorf(http.StatusInternalServerError, "internal error")
}

// errUnavailable answers a request while the database is away.
func errUnavailable() *Error {
	e := errorf(http.StatusServiceUnavailable, "the database is unavailable for now (a restart or failover); retry after %d s", RetryAfterUnavailable)
	e.Header = http.Header{"Retry-After": {strconv.Itoa(RetryAfterUnavailable)}}
	return e
}

// UnavailableResponse is the answer of a function that cannot reach its
// database yet (a cold start during an outage): 503 with Retry-After.
func UnavailableResponse() *Response { return (*API)(nil).errorResponse(errUnavailable()) }
