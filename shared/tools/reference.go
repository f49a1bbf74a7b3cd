package tools

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/resultstore"
)

// readReference reads a result reference for the step's execution through
// resultstore.Resolve, the one reader of references (NoETL's
// noetl://execution/<id>/result/… form, scoped there, or a URI inside the
// store). A store URI must also name one of the execution's objects: the
// worker stores them under <execution_id>/ (Worker.offload).
func readReference(ctx context.Context, st resultstore.Store, uri, executionID string) ([]byte, error) {
	var eid int64
	if executionID != "" {
		id, err := strconv.ParseInt(executionID, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("the step's execution id %q is not an integer", executionID)
		}
		eid = id
		if !resultstore.IsNoETLRef(uri) && st.Owns(uri) {
			rel := strings.TrimPrefix(strings.TrimPrefix(uri, strings.TrimRight(st.URL(), "/")), "/")
			if !strings.HasPrefix(rel, executionID+"/") {
				return nil, fmt.Errorf("%s is not a result of execution %s", uri, executionID)
			}
		}
	}
	return resultstore.Resolve(ctx, st, uri, eid)
}
