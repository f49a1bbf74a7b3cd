package tools

import (
	"context"
	"fmt"
	"strconv"

	"github.com/noetl-go/noetl/shared/resultstore"
)

// readReference reads a result reference for the step's execution through
// resultstore.Resolve, the one reader of references, which reads only that
// execution's results (NoETL's noetl://execution/<id>/result/… form, or an
// object of the store under <execution_id>/).
func readReference(ctx context.Context, st resultstore.Store, uri, executionID string) ([]byte, error) {
	// Fail closed: execution 0 would read any execution's results.
	eid, err := strconv.ParseInt(executionID, 10, 64)
	if err != nil || eid <= 0 {
		return nil, fmt.Errorf("the step's execution id %q is not a positive integer: a reference is read only for its own execution", executionID)
	}
	return resultstore.Resolve(ctx, st, uri, eid)
}
