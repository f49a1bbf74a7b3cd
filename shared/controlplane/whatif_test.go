package controlplane_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/controlplane"
)

// A what-if reads its recorded logs in chunks budgeted by bytes: over the
// budget a read hands on the logs it read whole and leaves the rest for the
// next, so every execution is answered once, in order.
func TestWhatIfChunksByBytes(t *testing.T) {
	s, ids := threeRuns(t, 5) // over both shards
	var reads []int
	controlplane.BudgetWhatIfChunks(t, 1, func(n int) { reads = append(reads, n) })
	out, err := s.svc.WhatIf(s.ctx, controlplane.WhatIfRequest{Path: "tests/three", IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Executions) != len(ids) {
		t.Fatalf("%d executions answered, want %d", len(out.Executions), len(ids))
	}
	for i, e := range out.Executions {
		if int64(e.ExecutionID) != ids[i] || len(e.Steps) == 0 {
			t.Errorf("executions[%d] is %d with %d steps, want %d with its steps", i, e.ExecutionID, len(e.Steps), ids[i])
		}
	}
	// A budget of one byte: one log a read (a read hands on one at least).
	if fmt.Sprint(reads) != "[1 1 1 1 1]" {
		t.Errorf("logs handed on by each read: %v, want one each", reads)
	}
}

// A recorded execution over MaxWhatIfEvents is refused before its log is
// read, naming it.
func TestWhatIfRefusesLongLogs(t *testing.T) {
	s, ids := threeRuns(t, 2)
	s.exec(t, ids[1], fmt.Sprintf(`UPDATE execution SET last_seq = %d WHERE execution_id = $1`, controlplane.MaxWhatIfEvents+1))
	_, err := s.svc.WhatIf(s.ctx, controlplane.WhatIfRequest{Path: "tests/three", IDs: ids})
	if !errors.Is(err, controlplane.ErrInvalid) || !strings.Contains(err.Error(), "executions[1]") || !strings.Contains(err.Error(), "MaxWhatIfEvents") {
		t.Fatalf("a log of %d events: %v, want a 422 naming executions[1] and the limit", controlplane.MaxWhatIfEvents+1, err)
	}
}

// threeRuns is a stack with n executions of threeSteps started.
func threeRuns(t *testing.T, n int) (*stack, []int64) {
	s := newStack(t)
	s.register(t, threeSteps)
	ids := make([]int64, n)
	for i := range ids {
		st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = st.ExecutionID
	}
	return s, ids
}
