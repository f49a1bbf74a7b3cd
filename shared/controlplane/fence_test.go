package controlplane_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/store"
)

// TestFenceByHolder: issue 10's fencing defect (R-L8). While worker A holds
// attempt 2 of a command, a command.completed from worker B that names
// attempt 2 is stored ignored and answered 409; A's real result then
// completes the step. Before the fence compared worker ids only for events
// without an attempt, B's report completed the step and A's was refused.
func TestFenceByHolder(t *testing.T) {
	s := newStack(t, func(c *controlplane.Config) { c.Lease = 300 * time.Millisecond })
	s.register(t, threeStepsNoDelay)
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	if err != nil {
		t.Fatal(err)
	}
	c := s.pending(t, st.ExecutionID)[0]
	if _, err := s.svc.Claim(s.ctx, c.IssuedEventID, "x", false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // attempt 1's lease lapses
	if r, err := s.svc.Drain(s.ctx, 100); err != nil || r.Expired != 1 {
		t.Fatalf("drain: %+v %v", r, err)
	}
	a, err := s.svc.Claim(s.ctx, c.IssuedEventID, "A", false)
	if err != nil || a.Attempt != 2 {
		t.Fatalf("A's claim: %+v %v", a, err)
	}

	forged := controlplane.EventInput{ExecutionID: st.ExecutionID, Step: "start", Type: "command.completed", Status: "success",
		WorkerID: "B", Meta: map[string]any{"command_id": a.CommandID, "attempt": int64(2)},
		Payload: map[string]any{"command_id": a.CommandID, "result": map[string]any{"status": "success", "data": map[string]any{"n": int64(99)}}}}
	_, err = s.svc.Ingest(s.ctx, forged)
	var fenced *controlplane.FencedError
	if !errors.As(err, &fenced) || !isKind(err, controlplane.ErrConflict) || !strings.Contains(fenced.Reason, "held by A, not B") {
		t.Fatalf("B's completion: %v, want 409 naming the holder", err)
	}
	evs, err := s.svc.Events(s.ctx, store.EventFilter{ExecutionID: st.ExecutionID, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.EventType != "command.completed" || last.WorkerID != "B" || !last.Ignored || len(fenced.EventIDs) != 1 || fenced.EventIDs[0] != last.EventID {
		t.Fatalf("B's completion is stored as %+v (answered %v), want it ignored", last, fenced.EventIDs)
	}

	s.report(t, a, "A", map[string]any{"n": int64(1)})
	v := s.execution(t, st.ExecutionID)
	if got := v.Steps["start"]; !reflect.DeepEqual(got.Result, map[string]any{"n": int64(1)}) || got.Attempts != 2 || got.Status != "completed" {
		t.Fatalf("start %+v: A's result must complete it", got)
	}
	if p := s.pending(t, st.ExecutionID); len(p) != 1 || p[0].Step != "middle" {
		t.Fatalf("pending %+v, want middle", p)
	}
}
