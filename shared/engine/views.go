package engine

import "github.com/noetl-go/noetl/shared/eventtype"

// A view is the value of a name that shows the whole state: `steps`, and
// `ctx` while a transient arc set is bound (the context merged with it).
// Building one costs the size of the state, so each is built at most once per
// state (decider.gen) and bindings, however many templates of the decision
// read it: a step with n arcs reading `steps` costs n lookups, not n copies
// of every step. Renders may share one: the engine never changes a value in
// place (Snapshot.Clone), and neither do templates.
//
// Views are kept on the decider (steps with no finishing step bound) and on
// the bindings (the rest), never as a pointer to bindings: that would move
// every bindings to the heap, on the path every event takes.
type view struct {
	m   map[string]any
	gen uint64
}

// apply folds an event into the decision's snapshot; the views built before
// it are stale after it, unless it is one of the command's own bookkeeping,
// which no view shows (a loop issues thousands of commands in one decision,
// and each iteration may read `steps`). TestViewsIgnoreCommandBookkeeping
// checks the list against Apply.
func (d *decider) apply(ev Event) {
	Apply(d.s, ev)
	switch eventtype.Canonical(ev.Type) {
	case eventtype.CommandIssued, eventtype.CommandClaimed, eventtype.CommandStarted, eventtype.CallDone,
		eventtype.CallError, eventtype.CommandRetry, eventtype.CommandCancelled, eventtype.LoopClaimed:
	default:
		d.gen++
	}
}

// steps is `steps` (stepsView) for b, built again only after the state
// changed. While a finishing step is bound (b.self, shown with its new
// result) it is b's own.
func (d *decider) steps(b *bindings) map[string]any {
	v := &d.stepsView0
	if b.self != "" {
		v = &b.stepsView
	}
	if v.m == nil || v.gen != d.gen {
		v.m, v.gen = d.stepsView(b), d.gen
	}
	return v.m
}

// ctx is `ctx` for b: the context itself, or merged with b's transient arc
// set (R-T9), built again only after the context changed.
func (d *decider) ctx(b *bindings) map[string]any {
	if len(b.arcSet) == 0 {
		return d.s.Ctx
	}
	v := &b.ctxView
	if v.m == nil || v.gen != d.gen {
		merged := make(map[string]any, len(d.s.Ctx)+len(b.arcSet))
		for k, x := range d.s.Ctx {
			merged[k] = x
		}
		for k, x := range b.arcSet {
			merged[k] = x
		}
		v.m, v.gen = merged, d.gen
	}
	return v.m
}
