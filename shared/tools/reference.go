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
	var eid int64
	if executionID != "" {
		id, err := strconv.ParseInt(executionID, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("the step's execution id %q is not an integer", executionID)
		}
		eid = id
	}
	return resultstore.Resolve(ctx, st, uri, eid)
}
