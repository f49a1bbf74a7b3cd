package engine

import (
	"maps"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/tmpl"
)

// A view is the value of a name that shows the whole state: `steps`, and
// `ctx` while a transient arc set is bound (the context merged with it).
// Building one costs the size of the state, so none is built per template:
// a step with n arcs reading `steps` costs n lookups, not n copies of every
// step. Renders may share one: the engine never changes a value in place
// (Snapshot.Clone), and neither do templates.
//
// Views are kept on the decider, and `steps` with a finishing step bound on
// the bindings, never as a pointer to bindings: that would move every
// bindings to the heap, on the path every event takes.
type view struct {
	m   map[string]any
	gen uint64 // decider.gen it was built at
}

// sharedSteps is `steps` while no finishing step is bound, kept up to date
// through the decision: an event that changes one step's state replaces that
// step's entry, so n steps entered one after another, each with a when
// reading `steps`, cost n entries, not n copies of every step.
type sharedSteps struct {
	m     map[string]any
	stale bool     // built again whole: an event that may change any step
	dirty []string // steps whose entries changed since m was brought up to date
	// kept: m went to a render that may keep what it returns (anything but
	// a when), so the next change is made to a copy.
	kept bool
}

// checkView, set by tests, is handed every view brought up to date and the
// same view built afresh.
var checkView func(got, want map[string]any)

// apply folds an event into the decision's snapshot and marks what it made
// stale. A command's own bookkeeping changes no view (a loop issues thousands
// of commands in one decision, and each iteration may read `steps`); a step's
// enter, skip and exit change that step's state only (apply.go), and only
// ctx.updated, of the events named here, changes the context.
// TestViewsFollowApply checks these lists against Apply.
func (d *decider) apply(ev Event) {
	Apply(d.s, ev)
	switch eventtype.Canonical(ev.Type) {
	case eventtype.CommandIssued, eventtype.CommandClaimed, eventtype.CommandStarted, eventtype.CallDone,
		eventtype.CallError, eventtype.CommandRetry, eventtype.CommandCancelled, eventtype.LoopClaimed:
		return
	case eventtype.StepEnter, eventtype.StepSkipped, eventtype.StepExit:
		if v := &d.shared; v.m != nil && !v.stale {
			v.dirty = append(v.dirty, ev.Step)
		}
	case eventtype.CtxUpdated:
		d.ctxGen++
	case eventtype.StepRerouted:
		// the ledgers of arcs waiting: in no view
	default:
		d.shared.stale = true
		d.ctxGen++
	}
	d.gen++
}

// steps is `steps` (stepsView) for b. While a finishing step is bound
// (b.self, shown with its new result) it is b's own, built again after any
// change of the state.
func (d *decider) steps(b *bindings) map[string]any {
	if b.self != "" {
		v := &b.stepsView
		if v.m == nil || v.gen != d.gen {
			v.m, v.gen = d.stepsView(b), d.gen
		}
		return v.m
	}
	v := &d.shared
	switch {
	case v.m == nil || v.stale:
		v.m, v.stale, v.kept, v.dirty = d.stepsView(b), false, false, v.dirty[:0]
	case len(v.dirty) > 0:
		if v.kept {
			v.m, v.kept = maps.Clone(v.m), false
		}
		for _, name := range v.dirty {
			if d.pb.Step(name) != nil {
				v.m[name] = d.stepEntry(name, b)
			}
		}
		v.dirty = v.dirty[:0]
		if checkView != nil {
			checkView(v.m, d.stepsView(b))
		}
	}
	if !d.inWhen {
		v.kept = true
	}
	return v.m
}

// holds renders a when. Its value is tested, never kept, so a view it reads
// may be changed in place afterwards (sharedSteps.kept).
func (d *decider) holds(t *tmpl.Template, b *bindings) (bool, error) {
	d.inWhen = true
	v, err := d.render(t, b)
	d.inWhen = false
	return tmpl.WhenTrue(v), err
}

// overCtx is `ctx` while a transient arc set is bound (R-T9): the context
// with the arc set laid over it. One map serves every arc set of the
// decision, another arc set taking the last one's keys back off, so n steps
// entered with arc sets of their own cost their arc sets, not n copies of the
// context.
type overCtx struct {
	m     map[string]any
	gen   uint64         // decider.ctxGen it was built at
	over  map[string]any // the arc set laid over
	token uint64         // names the bindings of over (bindings.ctxToken)
	kept  bool           // as sharedSteps.kept
}

// ctx is `ctx` for b: the context itself, or overCtx with b's arc set.
func (d *decider) ctx(b *bindings) map[string]any {
	if len(b.arcSet) == 0 {
		return d.s.Ctx
	}
	v := &d.overCtx
	switch {
	case v.m == nil || v.gen != d.ctxGen:
		v.m, v.gen, v.over, v.kept = d.mergedCtx(b), d.ctxGen, b.arcSet, false
		d.tokens++
		v.token, b.ctxToken = d.tokens, d.tokens
	case b.ctxToken != v.token:
		if v.kept {
			v.m, v.kept = maps.Clone(v.m), false
		}
		for k := range v.over {
			if x, ok := d.s.Ctx[k]; ok {
				v.m[k] = x
			} else {
				delete(v.m, k)
			}
		}
		maps.Copy(v.m, b.arcSet)
		v.over = b.arcSet
		d.tokens++
		v.token, b.ctxToken = d.tokens, d.tokens
		if checkView != nil {
			checkView(v.m, d.mergedCtx(b))
		}
	}
	if !d.inWhen {
		v.kept = true
	}
	return v.m
}

// mergedCtx is the context with b's arc set laid over it, built afresh.
func (d *decider) mergedCtx(b *bindings) map[string]any {
	merged := make(map[string]any, len(d.s.Ctx)+len(b.arcSet))
	maps.Copy(merged, d.s.Ctx)
	maps.Copy(merged, b.arcSet)
	return merged
}
