package controlplane_test

import (
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/replay"
)

// TestReplayVerify: the fold of the log matches the live snapshot for a finished
// run, the steps projection is the engine's view, cutoffs and limits work.
func TestReplayVerify(t *testing.T) {
	s := newStack(t)
	s.register(t, threeSteps)
	st, _ := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	s.drive(t, st.ExecutionID, echoInput)
	r, err := s.svc.Replay(s.ctx, st.ExecutionID, replay.Query{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Verify.Consistent {
		t.Fatalf("inconsistent: %v", r.Verify.Differences)
	}
	if r.State.ExecutionStatus() != "COMPLETED" {
		t.Fatalf("status %s", r.State.ExecutionStatus())
	}
	steps := r.State.Projections["steps"].(map[string]any)
	if steps["middle"].(map[string]any)["status"] != "completed" || len(steps) != 3 {
		t.Fatalf("steps %v", steps)
	}
	// A cutoff at position 3 folds the first three events only.
	early, err := s.svc.Replay(s.ctx, st.ExecutionID, replay.Query{Cutoff: replay.Cutoff{Kind: replay.CutoffPosition, Position: 3}})
	if err != nil || early.State.EventCount != 3 || early.State.LastSeq != 3 {
		t.Fatalf("cutoff: %+v %v", early.State, err)
	}
	lim, err := s.svc.Replay(s.ctx, st.ExecutionID, replay.Query{Limit: 5})
	if err != nil || !lim.State.Truncated || lim.State.EventCount != 5 {
		t.Fatalf("limit: %+v %v", lim.State, err)
	}
	d, err := s.svc.Replay(s.ctx, st.ExecutionID, replay.Query{DiffFrom: replay.Cutoff{Kind: replay.CutoffPosition, Position: 3}})
	if err != nil || len(d.Diff) == 0 {
		t.Fatalf("diff: %v %v", d.Diff, err)
	}

	// A live snapshot that drifted from its log is reported, with the path.
	sh, _ := s.st.ShardFor(st.ExecutionID)
	if _, err := sh.Pool().Exec(s.ctx, `UPDATE execution SET state = convert_to(jsonb_set(convert_from(state, 'UTF8')::jsonb, '{ctx,first}', '99')::text, 'UTF8')
		WHERE execution_id = $1`, st.ExecutionID); err != nil {
		t.Fatal(err)
	}
	r, err = s.svc.Replay(s.ctx, st.ExecutionID, replay.Query{Verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.Verify.Consistent || len(r.Verify.Differences) != 1 || !strings.HasPrefix(r.Verify.Differences[0], "/ctx/first") {
		t.Fatalf("a tampered snapshot verified as %+v, want one difference at /ctx/first", r.Verify)
	}
}
