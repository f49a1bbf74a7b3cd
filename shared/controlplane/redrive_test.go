package controlplane_test

import (
	"testing"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/replay"
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

// arcRoute's pick routes on its entering arc set (mode); quick fails once.
const arcRoute = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: arc_route, path: tests/arc_route}
workflow:
  - {step: start, tool: {kind: noop}, next: [{step: pick, set: {mode: fast}}]}
  - step: pick
    tool: {kind: noop}
    next: {spec: {mode: exclusive}, arcs: [{step: quick, when: "{{ mode == 'fast' }}"}, {step: slow}]}
  - {step: quick, tool: {kind: noop}}
  - {step: slow, tool: {kind: noop}}
`

// TestRedriveInPlace: a failed execution redriven under its own version runs
// only the failed step (its completed steps' arcs evaluated again with their
// visits' arc sets, read from the log), completes, and its log folds to its
// live state.
func TestRedriveInPlace(t *testing.T) {
	s := newStack(t)
	s.register(t, arcRoute)
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/arc_route"})
	if err != nil {
		t.Fatal(err)
	}
	id := st.ExecutionID
	for range 10 {
		p := s.pending(t, id)
		if len(p) == 0 {
			break
		}
		if p[0].Step == "quick" {
			body, err := s.svc.Claim(s.ctx, p[0].IssuedEventID, "w1", false)
			if err != nil {
				t.Fatal(err)
			}
			fail(t, s, body, "w1")
			continue
		}
		s.work(t, p[0], "w1", map[string]any{})
	}
	if v := s.execution(t, id); v.Status.Status != "FAILED" {
		t.Fatalf("before the redrive: %s", v.Status.Status)
	}
	r, err := s.svc.Redrive(s.ctx, id, 0)
	if err != nil || r.Version != 1 || r.PreviousStatus != "FAILED" || r.Commands != 1 {
		t.Fatalf("redrive: %+v %v", r, err)
	}
	s.drive(t, id, func(store.Command) any { return map[string]any{} })
	if v := s.execution(t, id); v.Status.Status != "COMPLETED" {
		t.Fatalf("after the redrive: %s (%s)", v.Status.Status, v.Row.Error)
	}
	issued := map[string]int{}
	evs, err := s.svc.Events(s.ctx, store.EventFilter{ExecutionID: id, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if e.EventType == "command.issued" {
			issued[e.NodeName]++
		}
	}
	if issued["start"] != 1 || issued["pick"] != 1 || issued["quick"] != 2 || issued["slow"] != 0 {
		t.Errorf("commands per step %v, want start and pick once, quick twice, slow never", issued)
	}
	rep, err := s.svc.Replay(s.ctx, id, replay.Query{Verify: true})
	if err != nil || !rep.Verify.Consistent {
		t.Fatalf("verify after the redrive: %+v %v", rep.Verify, err)
	}
}
