package engine

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/playbook"
)

// Redrive: a FAILED or CANCELLED execution continues in place, under its own
// version or a newer one (issue 31). The caller writes playbook.redriven as
// the trigger; its fold reopens the execution (applyRedriven) and its
// decision (decider.redrive) routes afresh from the steps that completed, so
// only failed and unreached steps run again, and a loop that did not finish
// resumes with the iterations it completed kept (their results copied to the
// new visit, never run again).

// Redrive is what a redrive carries: the version it continues under and, per
// loop step to resume, the visit whose completed iterations are kept.
type Redrive struct {
	Version         int
	CatalogID       int64
	PreviousVersion int
	PreviousStatus  string
	// Kept maps a loop step to the iterations of its last visit that have a
	// result (and so are not run again).
	Kept map[string]KeptIterations
	// ArcSets are the arc-set values of the completed steps' last visits (the
	// arc_set of their step.enter, read from the log at EnterSeq): their
	// arcs are evaluated again with them bound, as when the visit ended.
	ArcSets map[string]map[string]any
}

// KeptIterations are the completed iterations of a loop visit.
type KeptIterations struct {
	Visit   int   `json:"visit"`
	Indexes []int `json:"iterations"`
}

// Event is the playbook.redriven trigger.
func (r Redrive) Event() Event {
	c := map[string]any{"version": int64(r.Version), "catalog_id": fmt.Sprint(r.CatalogID),
		"previous_version": int64(r.PreviousVersion), "previous_status": r.PreviousStatus}
	if len(r.Kept) > 0 {
		kept := map[string]any{}
		for step, k := range r.Kept {
			idx := make([]any, len(k.Indexes))
			for i, n := range k.Indexes {
				idx[i] = int64(n)
			}
			kept[step] = map[string]any{"visit": int64(k.Visit), "iterations": idx}
		}
		c["kept"] = kept
	}
	if len(r.ArcSets) > 0 {
		sets := map[string]any{}
		for step, set := range r.ArcSets {
			sets[step] = set
		}
		c["arc_sets"] = sets
	}
	return Event{Type: eventtype.PlaybookRedriven, Status: StatusRunning, Context: c}
}

// CheckRedrive says why snap cannot continue under pb: a step that completed
// (so the path it took depends on it) is not in pb. The error names the step.
func CheckRedrive(pb *playbook.Playbook, snap *Snapshot) error {
	for _, name := range slices.Sorted(maps.Keys(snap.Steps)) {
		if snap.Steps[name].Status == StepCompleted && pb.Step(name) == nil {
			return &MissingStepError{Step: name}
		}
	}
	return nil
}

// MissingStepError is a completed step the redrive's version does not have.
type MissingStepError struct{ Step string }

func (e *MissingStepError) Error() string {
	return fmt.Sprintf("step %q completed in this execution but the chosen version has no step of that name (dropped or renamed): redrive under a version that keeps it", e.Step)
}

// ResumableLoops are the loop steps of snap that would run again under pb
// with completed iterations to keep: step name → the visit to read them from.
// Cursor loops resume from their source (claimed rows stay claimed).
func ResumableLoops(pb *playbook.Playbook, snap *Snapshot) map[string]int {
	out := map[string]int{}
	for name, st := range snap.Steps {
		step := pb.Step(name)
		if st.Status == StepCompleted || st.Visits == 0 || step == nil || step.Loop == nil || step.Loop.Cursor != nil {
			continue
		}
		out[name] = st.Visits
	}
	return out
}

// ArcSetSeqs are the seqs of the step.enter events whose arc sets a redrive
// needs: those of the completed steps' last visits.
func ArcSetSeqs(snap *Snapshot) map[string]int64 {
	out := map[string]int64{}
	for name, st := range snap.Steps {
		if st.Status == StepCompleted && st.EnterSeq > 0 {
			out[name] = st.EnterSeq
		}
	}
	return out
}

// applyRedriven reopens an ended execution: every step that did not complete
// is pending again (its result unbound, its ledger and visit gone), loops to
// resume remember what they keep; completed steps keep their results.
func applyRedriven(s *Snapshot, ev Event) {
	if !s.Terminal() {
		return // a running execution is not redriven (the caller answers 409)
	}
	s.Status, s.EndedAt, s.Error, s.FailedSteps = StatusRunning, time.Time{}, "", nil
	clear(s.Commands)
	kept, _ := ev.Context["kept"].(map[string]any)
	for name, st := range s.Steps {
		if st.Status == StepCompleted {
			continue
		}
		clearLedger(s, st)
		if st.Visit != nil {
			s.Running--
		}
		*st = StepState{Status: StepPending, Visits: st.Visits}
		if k, ok := kept[name].(map[string]any); ok {
			st.Kept = &KeptIterations{Visit: jsonx.Int(k["visit"]), Indexes: elementsOfInt(k["iterations"])}
		}
	}
}

// applyFired queues the arcs a step fired (step.exit, step.rerouted) in
// their targets' ledgers.
func applyFired(s *Snapshot, from string, v any) {
	fired, _ := v.([]any)
	for _, f := range fired {
		m, _ := f.(map[string]any)
		to, _ := m["step"].(string)
		if to == "" {
			continue
		}
		set, _ := m["set"].(map[string]any)
		t := s.step(to)
		if len(t.Ledger) == 0 {
			s.Queued++
		}
		t.Ledger = append(t.Ledger, FiredArc{From: from, Set: set})
	}
}

func elementsOfInt(v any) []int {
	var out []int
	for _, n := range int64sOf(v) {
		out = append(out, int(n))
	}
	slices.Sort(out)
	return out
}

// redrive decides what a redrive runs: each completed step's arcs are
// evaluated again under the playbook now in force, against its recorded
// result and its last visit's arc set; those that reach a step that did not complete queue it
// (step.rerouted). Then every step that did not complete is re-checked, as
// after any step's end: queued ones are dispatched, unreachable ones skipped.
// A start step that did not complete starts again.
func (d *decider) redrive() {
	order := make([]*playbook.Step, 0, len(d.pb.Steps))
	for _, step := range d.pb.Steps {
		if st := d.s.Steps[step.Name]; st != nil && st.Status == StepCompleted {
			order = append(order, step)
		}
	}
	slices.SortFunc(order, func(a, b *playbook.Step) int { return d.g.Rank[a.Index] - d.g.Rank[b.Index] })
	arcSets, _ := d.trig.Context["arc_sets"].(map[string]any)
	for _, step := range order {
		st := d.s.Steps[step.Name]
		arcSet, _ := arcSets[step.Name].(map[string]any)
		b := &bindings{arcSet: arcSet, phase: true, errMsg: st.Error, self: step.Name,
			event: map[string]any{"name": "step.exit", "step": step.Name, "status": StatusCompleted}}
		switch {
		case st.ResultRef != nil && st.ResultRef.Kind == KindReference:
			b.stored = st.ResultRef.URI
		case st.ResultRef != nil:
			b.output = d.load(*st.ResultRef)
		default:
			b.output = st.Result
		}
		fired, err := d.route(step, b)
		if err != nil {
			d.failStep(step, fmt.Sprintf("redrive: next: %v", err))
			return
		}
		var open []any
		for _, f := range fired {
			to := f.(map[string]any)["step"].(string)
			if t := d.s.Steps[to]; t == nil || t.Status != StepCompleted {
				open = append(open, f)
			}
		}
		if len(open) > 0 {
			d.emit(Event{Type: eventtype.StepRerouted, Step: step.Name, Status: "REROUTED",
				Context: map[string]any{"fired": open}})
		}
	}
	if st := d.s.Steps[d.pb.Start().Name]; st == nil || st.Status != StepCompleted {
		if st == nil || len(st.Ledger) == 0 {
			d.enter(d.pb.Start(), nil, false)
		}
	}
	for _, step := range d.pb.Steps {
		if st := d.s.Steps[step.Name]; st == nil || st.Status != StepCompleted {
			d.push(step.Index)
		}
	}
}
