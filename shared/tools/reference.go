package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/noetl-go/noetl/shared/resultstore"
)

// readReference reads a result reference through the store, for the step's
// execution only: a URI inside the store whose object is one of that
// execution's (the worker names them <execution_id>/…).
func readReference(ctx context.Context, st resultstore.Store, uri, executionID string) ([]byte, error) {
	if !st.Owns(uri) {
		return nil, fmt.Errorf("%s is not inside this worker's result store %s", uri, st.URL())
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(uri, strings.TrimRight(st.URL(), "/")), "/")
	if executionID != "" && !strings.HasPrefix(rel, executionID+"/") {
		return nil, fmt.Errorf("%s is not a result of execution %s", uri, executionID)
	}
	return st.Get(ctx, uri)
}
