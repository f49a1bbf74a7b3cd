package resultstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// ReadJSON reads a result stored by reference, as the server reads a
// worker's result and a worker reads the results its command names
// (pipeline.RefMarker): a URI inside the store, or a noetl:// reference of
// executionID (Resolve); a fragment is a JSON Pointer into the stored value
// (NoETL's Rust worker stages its whole tool result: #/data is the step's
// data). A value holding a NUL is refused, as one posted inline is.
// Errors wrap ErrTooLarge for an object over the store's limit.
func ReadJSON(ctx context.Context, st Store, uri string, executionID int64) (any, error) {
	loc, pointer, _ := strings.Cut(uri, "#")
	b, err := Resolve(ctx, st, loc, executionID)
	if err != nil {
		return nil, fmt.Errorf("read the result stored by reference at %s: %w", uri, err)
	}
	v, err := jsonx.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("the result stored at %s is not JSON: %w", uri, err)
	}
	if v, err = jsonx.Pointer(v, pointer); err != nil {
		return nil, &ValueError{URI: uri, Err: err}
	}
	if err := jsonx.CheckText("data", v); err != nil {
		return nil, &ValueError{URI: uri, Err: err}
	}
	return v, nil
}

// ValueError is a stored result that was read but cannot be used as it is:
// a fragment that points at nothing, text that cannot be stored.
type ValueError struct {
	URI string
	Err error
}

func (e *ValueError) Error() string {
	return fmt.Sprintf("the result stored by reference at %s: %v", e.URI, e.Err)
}

func (e *ValueError) Unwrap() error { return e.Err }
