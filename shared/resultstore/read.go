package resultstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// MaxDecodedBytes bounds the memory a result read back by reference may take
// on the server once decoded (jsonx.DecodeWithin's estimate, made before
// anything is built). The text is at most DefaultMaxBytes, but its decoded
// form is not: 63 MB of `[{},{},…]` holds 1.4 GB, which the server would
// build under the execution's row lock in a 512 MB function (GOMEMLIMIT 460
// MiB), every retry. 256 MiB is about 500,000 rows of two short columns or
// 200,000 of ten; decoding 200,000 ten-column rows (37 MB of text, an
// estimate of 247 MiB) peaked at 306 MiB of heap with the text, which leaves
// that function room.
const MaxDecodedBytes = 256 << 20

// WorkerMaxDecodedBytes is the bound on a worker: its marker loading
// (pipeline.RefMarker), the http tool's JSON body and the artifact tool. A
// worker runs one step's data and holds no lock, so it reads what a step
// plausibly returns, about 2 million rows of two short columns (more than
// DefaultMaxBytes of text holds for rows of ten), and still refuses the
// 63 MB of `[{},…]` (estimated 1.6 GiB).
const WorkerMaxDecodedBytes = 1 << 30

// ReadJSON reads a result stored by reference, as the server reads a
// worker's result (within MaxDecodedBytes; a worker uses ReadJSONWithin):
// a URI inside the store, or a noetl:// reference of executionID (Resolve);
// a fragment is a JSON Pointer into the stored value (NoETL's Rust worker
// stages its whole tool result: #/data is the step's data). A value holding
// a NUL is refused, as one posted inline is.
// Errors wrap ErrTooLarge for an object over the store's limit, or one
// whose decoded value would pass the bound (a ValueError too).
func ReadJSON(ctx context.Context, st Store, uri string, executionID int64) (any, error) {
	return ReadJSONWithin(ctx, st, uri, executionID, MaxDecodedBytes)
}

// ReadJSONWithin is ReadJSON within maxDecoded bytes of decoded value
// (WorkerMaxDecodedBytes or MaxDecodedBytes).
func ReadJSONWithin(ctx context.Context, st Store, uri string, executionID, maxDecoded int64) (any, error) {
	loc, pointer, _ := strings.Cut(uri, "#")
	b, err := Resolve(ctx, st, loc, executionID)
	if err != nil {
		return nil, fmt.Errorf("read the result stored by reference at %s: %w", uri, err)
	}
	v, err := DecodeJSONWithin(uri, b, maxDecoded)
	if err != nil {
		return nil, err
	}
	if v, err = jsonx.Pointer(v, pointer); err != nil {
		return nil, &ValueError{URI: uri, Err: err}
	}
	if err := jsonx.CheckText("data", v); err != nil {
		return nil, &ValueError{URI: uri, Err: err}
	}
	return v, nil
}

// unread is a stored result the store failed to hand over (it is down, the
// object is missing), as opposed to a reference Resolve refused or a value
// read but not usable (IsUnread).
type unread struct{ error }

func (e unread) Unwrap() error { return e.error }

// fetched marks what a store's read failed with as unread; an object over
// the store's limit is a refusal, not a failure.
func fetched(b []byte, err error) ([]byte, error) {
	if err != nil && !errors.Is(err, ErrTooLarge) {
		return nil, unread{err}
	}
	return b, err
}

// IsUnread reports whether err is a store's failure to hand over a stored
// result, not a refusal of its reference or its value: what a caller that
// shows an unusable result as its reference still fails on.
func IsUnread(err error) bool { return errors.As(err, new(unread)) }

// DecodeJSON decodes the text of the result stored at uri on the server,
// within MaxDecodedBytes: over it, a ValueError that wraps ErrTooLarge, names
// the limit and says what to do instead.
func DecodeJSON(uri string, b []byte) (any, error) {
	return DecodeJSONWithin(uri, b, MaxDecodedBytes)
}

// DecodeJSONWithin is DecodeJSON within maxDecoded bytes. Text that is not
// JSON is an error that is not a ValueError, whatever its size.
func DecodeJSONWithin(uri string, b []byte, maxDecoded int64) (any, error) {
	v, err := jsonx.DecodeWithin(b, maxDecoded)
	var over *jsonx.BuildError
	if errors.As(err, &over) {
		return nil, &ValueError{URI: uri, Err: &decodedTooLarge{over}}
	}
	if err != nil {
		return nil, fmt.Errorf("the result stored at %s is not JSON: %w", uri, err)
	}
	return v, nil
}

// DecodedLimit names the bound max in a refusal: its constant and size.
func DecodedLimit(max int64) string {
	name := "resultstore.MaxDecodedBytes, the server's"
	if max == WorkerMaxDecodedBytes {
		name = "resultstore.WorkerMaxDecodedBytes, a worker's"
	}
	return fmt.Sprintf("%s (%d bytes, %d MiB)", name, max, max>>20)
}

// decodedTooLarge is a stored result whose decoded value would pass its
// bound; it is an ErrTooLarge.
type decodedTooLarge struct{ *jsonx.BuildError }

func (e *decodedTooLarge) Error() string {
	return fmt.Sprintf("%v; the limit is %s of decoded values: return fewer, larger values "+
		"(many rows as one CSV or JSON string, say), or write large data elsewhere (a table, a file) and return where it is",
		e.BuildError, DecodedLimit(e.Max))
}

func (e *decodedTooLarge) Unwrap() error        { return e.BuildError }
func (e *decodedTooLarge) Is(target error) bool { return target == ErrTooLarge }

// ValueError is a stored result that was read but cannot be used as it is:
// a fragment that points at nothing, text that cannot be stored, a value too
// large to decode.
type ValueError struct {
	URI string
	Err error
}

func (e *ValueError) Error() string {
	return fmt.Sprintf("the result stored by reference at %s: %v", e.URI, e.Err)
}

func (e *ValueError) Unwrap() error { return e.Err }
