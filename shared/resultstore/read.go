package resultstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// MaxDecodedBytes bounds the memory a result read back by reference may take
// once decoded (jsonx.DecodeWithin's estimate, made before anything is
// built). The text is at most DefaultMaxBytes, but its decoded form is not:
// 64 MB of `[{},{},…]` holds 1.4 GB, which the server would build under the
// execution's row lock in a 512 MB function, every retry. 128 MiB leaves room
// for the text itself and the decoder's copy of it there; 60 MB of strings
// takes 60 MB and is read.
const MaxDecodedBytes = 128 << 20

// ReadJSON reads a result stored by reference, as the server reads a
// worker's result and a worker reads the results its command names
// (pipeline.RefMarker): a URI inside the store, or a noetl:// reference of
// executionID (Resolve); a fragment is a JSON Pointer into the stored value
// (NoETL's Rust worker stages its whole tool result: #/data is the step's
// data). A value holding a NUL is refused, as one posted inline is.
// Errors wrap ErrTooLarge for an object over the store's limit, or one
// whose decoded value would pass MaxDecodedBytes (a ValueError too).
func ReadJSON(ctx context.Context, st Store, uri string, executionID int64) (any, error) {
	v, _, err := ReadJSONUpTo(ctx, st, uri, executionID, 0)
	return v, err
}

// ReadJSONUpTo is ReadJSON for a caller that shows the value only when its
// stored text is at most maxText bytes (0: any size): over it, ok is false
// and nothing is decoded.
func ReadJSONUpTo(ctx context.Context, st Store, uri string, executionID int64, maxText int) (v any, ok bool, err error) {
	loc, pointer, _ := strings.Cut(uri, "#")
	b, err := Resolve(ctx, st, loc, executionID)
	if err != nil {
		return nil, false, fmt.Errorf("read the result stored by reference at %s: %w", uri, err)
	}
	if maxText > 0 && len(b) > maxText {
		return nil, false, nil
	}
	if v, err = DecodeJSON(uri, b); err != nil {
		return nil, false, err
	}
	if v, err = jsonx.Pointer(v, pointer); err != nil {
		return nil, false, &ValueError{URI: uri, Err: err}
	}
	if err := jsonx.CheckText("data", v); err != nil {
		return nil, false, &ValueError{URI: uri, Err: err}
	}
	return v, true, nil
}

// DecodeJSON decodes the text of the result stored at uri, within
// MaxDecodedBytes: over it, a ValueError that wraps ErrTooLarge, names the
// limit and says what to do instead.
func DecodeJSON(uri string, b []byte) (any, error) {
	v, err := jsonx.DecodeWithin(b, MaxDecodedBytes)
	var over *jsonx.BuildError
	if errors.As(err, &over) {
		return nil, &ValueError{URI: uri, Err: &decodedTooLarge{over}}
	}
	if err != nil {
		return nil, fmt.Errorf("the result stored at %s is not JSON: %w", uri, err)
	}
	return v, nil
}

// decodedTooLarge is a stored result whose decoded value would pass
// MaxDecodedBytes; it is an ErrTooLarge.
type decodedTooLarge struct{ *jsonx.BuildError }

func (e *decodedTooLarge) Error() string {
	return fmt.Sprintf("%v; the limit is resultstore.MaxDecodedBytes (%d bytes, 128 MiB) of decoded values: return fewer, larger values "+
		"(many rows as one CSV or JSON string, say), or write large data elsewhere (a table, a file) and return where it is",
		e.BuildError, MaxDecodedBytes)
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
