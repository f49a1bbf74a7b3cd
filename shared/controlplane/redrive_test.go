package controlplane_test

import (
	"testing"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/store"
)

// TestRedriveEventsAreTheServers: playbook.redriven and step.rerouted
// posted by a client are stored and never folded, so no worker reopens an
// execution or queues arcs; only the redrive route writes them.
func TestRedriveEventsAreTheServers(t *testing.T) {
	s := newStack(t)
	s.register(t, threeSteps)
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/three"})
	if err != nil {
		t.Fatal(err)
	}
	before := s.execution(t, st.ExecutionID)
	for _, ev := range []controlplane.EventInput{
		{Type: "step.rerouted", Step: "start", Status: "REROUTED", Payload: map[string]any{"fired": []any{map[string]any{"step": "end"}}}},
		{Type: "playbook.redriven", Status: "RUNNING", Payload: map[string]any{"version": int64(1)}},
	} {
		ev.ExecutionID, ev.WorkerID = st.ExecutionID, "w1"
		if _, err := s.svc.Ingest(s.ctx, ev); err != nil {
			t.Fatalf("post %s: %v", ev.Type, err)
		}
	}
	evs, err := s.svc.Events(s.ctx, store.EventFilter{ExecutionID: st.ExecutionID, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if (e.EventType == "step.rerouted" || e.EventType == "playbook.redriven") && !e.Ignored {
			t.Errorf("a client's %s was folded", e.EventType)
		}
	}
	after := s.execution(t, st.ExecutionID)
	if after.Steps["end"].Status != before.Steps["end"].Status || len(s.pending(t, st.ExecutionID)) != 1 {
		t.Errorf("a client's events changed the execution: end %v → %v", before.Steps["end"], after.Steps["end"])
	}
}
