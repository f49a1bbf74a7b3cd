package engine

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
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
	// ArcSets are the arc-set values of the completed steps' last visits
	// (Entries, folded from the log): their arcs are evaluated again with
	// them bound, as when the visit ended.
	ArcSets map[string]map[string]any
	// Entered are the arcs that started the last visit of each step that
	// did not complete (Entries).
	Entered map[string][]FiredArc
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
	if len(r.Entered) > 0 {
		entered := map[string]any{}
		for step, arcs := range r.Entered {
			l := make([]any, len(arcs))
			for i, a := range arcs {
				m := map[string]any{"step": a.From}
				if len(a.Set) > 0 {
					m["set"] = a.Set
				}
				l[i] = m
			}
			entered[step] = l
		}
		c["entered"] = entered
	}
	return Event{Type: eventtype.PlaybookRedriven, Status: lifecycle.ExecutionRunning, Context: c}
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

// Entries folds an execution's log into how each step's last visit began,
// which the snapshot does not keep: the arcs that started it (what its
// ledger held when it was dispatched) and its arc set. A redrive needs
// them (Redrive.Entered, Redrive.ArcSets).
type Entries struct {
	ledger  map[string][]FiredArc
	last    map[string][]FiredArc
	arcSets map[string]map[string]any
}

// NewEntries returns an empty fold.
func NewEntries() *Entries {
	return &Entries{ledger: map[string][]FiredArc{}, last: map[string][]FiredArc{}, arcSets: map[string]map[string]any{}}
}

// Add folds one event of the log, in seq order.
func (e *Entries) Add(ev Event) {
	switch eventtype.Canonical(ev.Type) {
	case eventtype.StepExit, eventtype.StepRerouted:
		fired, _ := ev.Context["fired"].([]any)
		for _, f := range fired {
			m, _ := f.(map[string]any)
			if to, _ := m["step"].(string); to != "" {
				set, _ := m["set"].(map[string]any)
				e.ledger[to] = append(e.ledger[to], FiredArc{From: ev.Step, Set: set})
			}
		}
	case eventtype.StepEnter:
		e.last[ev.Step], e.ledger[ev.Step] = e.ledger[ev.Step], nil
		e.arcSets[ev.Step], _ = ev.Context["arc_set"].(map[string]any)
	case eventtype.StepSkipped:
		e.ledger[ev.Step] = nil
	case eventtype.PlaybookRedriven:
		clear(e.ledger) // arcs queued when it ended wait no more (applyRedriven)
	}
}

// Fill sets what a redrive of snap needs from the log: the arc sets of the
// completed steps' last visits, and the entering arcs of the last visits
// of the steps that did not complete.
func (e *Entries) Fill(r *Redrive, snap *Snapshot) {
	r.ArcSets, r.Entered = map[string]map[string]any{}, map[string][]FiredArc{}
	for name, st := range snap.Steps {
		switch {
		case st.Status == StepCompleted && len(e.arcSets[name]) > 0:
			r.ArcSets[name] = e.arcSets[name]
		case st.Status != StepCompleted && st.Visits > 0:
			r.Entered[name] = append([]FiredArc{}, e.last[name]...)
		}
	}
}

// applyRedriven reopens an ended execution: every step that did not complete
// is pending again (its result unbound, its ledger and visit gone), loops to
// resume remember what they keep; completed steps keep their results.
func applyRedriven(s *Snapshot, ev Event) {
	if !s.Terminal() {
		return // a running execution is not redriven (the caller answers 409)
	}
	s.Status, s.EndedAt, s.Error, s.FailedSteps = lifecycle.ExecutionRunning, time.Time{}, "", nil
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

// reopens reports whether an arc from the completed step from, fired again,
// queues to: a step that did not complete, whose last visit (if it had one)
// that step started. An arc a completed visit of to consumed is not fired
// again: that visit stands.
func (d *decider) reopens(from, to string, entered map[string]any) bool {
	if t := d.s.Steps[to]; t != nil && t.Status == StepCompleted {
		return false
	}
	arcs, had := entered[to].([]any)
	if !had {
		return true // never entered: unreached
	}
	for _, a := range arcs {
		if m, _ := a.(map[string]any); m["step"] == from {
			return true
		}
	}
	return false
}

// redrive decides what a redrive runs: each completed step's arcs are
// evaluated again under the playbook now in force, against its recorded
// result and its last visit's arc set; those that reopen a step (reopens)
// queue it (step.rerouted). An arc that started a step's last visit from a
// step that did not complete either (a cycle) is fired again as recorded.
// Then every step that did not complete is re-checked, as after any step's
// end: queued ones are dispatched, unreachable ones skipped. A start step
// that did not complete, and that nothing queued, starts again.
func (d *decider) redrive() {
	order := make([]*playbook.Step, 0, len(d.pb.Steps))
	for _, step := range d.pb.Steps {
		if st := d.s.Steps[step.Name]; st != nil && st.Status == StepCompleted {
			order = append(order, step)
		}
	}
	slices.SortFunc(order, func(a, b *playbook.Step) int { return d.g.Rank[a.Index] - d.g.Rank[b.Index] })
	arcSets, _ := d.trig.Context["arc_sets"].(map[string]any)
	entered, _ := d.trig.Context["entered"].(map[string]any)
	for _, step := range order {
		st := d.s.Steps[step.Name]
		arcSet, _ := arcSets[step.Name].(map[string]any)
		b := &bindings{arcSet: arcSet, phase: true, errMsg: st.Error, self: step.Name,
			event: map[string]any{"name": "step.exit", "step": step.Name, "status": lifecycle.ExecutionCompleted}}
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
			if to := f.(map[string]any)["step"].(string); d.reopens(step.Name, to, entered) {
				open = append(open, f)
			}
		}
		if len(open) > 0 {
			d.emit(Event{Type: eventtype.StepRerouted, Step: step.Name, Status: "REROUTED",
				Context: map[string]any{"fired": open}})
		}
	}
	// A step whose last visit was started by a step that did not complete
	// either (itself, in a cycle) is started again by that arc, as recorded:
	// no completed step's routing can stand for it.
	for _, step := range d.pb.Steps {
		arcs, _ := entered[step.Name].([]any)
		for _, a := range arcs {
			m, _ := a.(map[string]any)
			from, _ := m["step"].(string)
			if src := d.s.Steps[from]; from == "" || (src != nil && src.Status == StepCompleted) {
				continue
			}
			f := map[string]any{"step": step.Name}
			if set, ok := m["set"].(map[string]any); ok {
				f["set"] = set
			}
			d.emit(Event{Type: eventtype.StepRerouted, Step: from, Status: "REROUTED",
				Context: map[string]any{"fired": []any{f}, "recorded": true}})
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
