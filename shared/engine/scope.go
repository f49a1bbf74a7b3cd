package engine

import (
	"maps"
	"math/bits"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/tmpl"
)

// bindings are the per-render extras on top of the execution's context.
type bindings struct {
	arcSet map[string]any // transient arc set values of the visit (R-T9)
	iter   *iteration
	// phase is true while evaluating a finished step's set and arcs: output, error
	// and event are bound (dsl.md §5, R-W2).
	phase  bool
	output any
	// stored is where the worker stored the finishing step's result (then
	// output is nil): it is read only if a template reads it.
	stored string
	errMsg string
	event  map[string]any
	self   string // the finishing step, bound to its new result, output (dsl.md §4.6)
	// extra are names bound above everything else: a cursor claim's
	// __frame_max_rows, __frame_policy and __worker_slot_id (NoETL's).
	extra map[string]any
	// stepsView (while self is bound) is built once per state for all the
	// renders with these bindings; ctxToken names them to overCtx (views.go).
	stepsView view
	ctxToken  uint64
}

type iteration struct {
	index, total int
	iterator     string
	item         any
}

// result is the finishing step's result (output, its own name), read from
// the result store when the worker stored it there.
func (b *bindings) result(d *decider) any {
	if b.stored != "" {
		return d.load(RefKey(b.stored))
	}
	return b.output
}

func (it *iteration) vars() map[string]any {
	return map[string]any{
		it.iterator: it.item, "_index": int64(it.index), "_total": int64(it.total),
		"_first": it.index == 0, "_last": it.index == it.total-1,
	}
}

// env builds a template environment holding exactly the names the template reads
// (R-S2), so rendering costs what the template uses, not the size of the context.
// Every stored value its names read is asked for at once (gather).
func (d *decider) env(roots []string, b *bindings) tmpl.Env {
	vars := make(map[string]any, len(roots))
	d.gather()
	for _, r := range roots {
		if v, ok := d.lookup(r, b); ok {
			vars[r] = v
		}
	}
	d.flush()
	return tmpl.Env{Vars: vars, Now: d.trig.Time, Budget: d.budget}
}

// lookup resolves a top-level name with dsl.md §5's precedence, highest first:
// arc set, iteration variables, ids, ctx, step results, workload. Reserved names
// always mean their binding (R-T7, R-W5).
func (d *decider) lookup(name string, b *bindings) (any, bool) { return d.resolve(name, b, false) }

// shipped is lookup for a value a command carries to the worker
// (render_context): a step result the worker stored by reference is its
// reference marker, which the worker that runs the command loads
// (pipeline.RefMarker), so the server neither reads it back nor sends it.
func (d *decider) shipped(name string, b *bindings) (any, bool) { return d.resolve(name, b, true) }

func (d *decider) resolve(name string, b *bindings, byRef bool) (any, bool) {
	if v, ok := b.extra[name]; ok {
		return v, true
	}
	// An iterator named like a binding (NoETL's iterator: playbook_path) wins inside
	// its loop, as dsl.md §5's precedence puts iteration variables above ids; the
	// parser refuses iter, _index and _total as iterators.
	if b.iter != nil && name == b.iter.iterator && playbook.Reserved(name) {
		return b.iter.item, true
	}
	switch name {
	case "workload":
		return d.run.Workload, true
	case "ctx":
		return d.ctx(b), true
	case "steps":
		return d.steps(b), true
	case "iter":
		if b.iter == nil {
			return nil, false
		}
		return b.iter.vars(), true
	case "_index", "_total":
		if b.iter == nil {
			return nil, false
		}
		return b.iter.vars()[name], true
	case "output":
		return b.result(d), b.phase
	case "error":
		if !b.phase {
			return nil, false
		}
		if b.errMsg == "" {
			return nil, true
		}
		return b.errMsg, true
	case "event":
		if b.phase {
			return b.event, true
		}
	case "execution_id":
		return strconv.FormatInt(d.run.ExecutionID, 10), true
	case "catalog_id":
		return strconv.FormatInt(d.run.CatalogID, 10), true
	case "playbook_path":
		return d.run.Path, true
	}
	if v, ok := b.arcSet[name]; ok {
		return v, true
	}
	if b.iter != nil && name == b.iter.iterator {
		return b.iter.item, true
	}
	if v, ok := d.s.Ctx[name]; ok {
		return v, true
	}
	if b.self == name {
		return d.stepView(name, b.result(d)), true
	}
	if byRef {
		if m, ok := d.resultMarker(name); ok {
			return m, true
		}
	}
	if v, ok := d.stepResult(name); ok {
		return d.stepView(name, v), true
	}
	if v, ok := d.run.Workload[name]; ok {
		return v, true
	}
	if name == "vars" {
		// NoETL's older templates read execution variables as {{ vars.x }};
		// here they are the durable context (POST /api/vars writes it). Last,
		// so a workload key, step or set value named vars keeps its meaning.
		return d.lookup("ctx", b)
	}
	return nil, false
}

// stepResult is the latest finished visit's result (R-T8); a skipped step is null,
// a step that has not finished a visit is undefined (R-T3).
func (d *decider) stepResult(name string) (any, bool) {
	st := d.s.Steps[name]
	if st == nil || !st.Bound || d.pb.Step(name) == nil {
		return nil, false
	}
	v := st.Result
	if st.ResultRef != nil {
		v = d.load(st.ResultRef.Stored())
	}
	if m, ok := v.(map[string]any); ok && st.ResultURI != "" {
		// The worker stored it by reference (worker.md §1): NoETL marks such a
		// result with _ref, which playbooks test for and hand to the artifact
		// tool.
		m = maps.Clone(m)
		m["_ref"] = pipeline.RefOf(st.ResultURI)
		return m, true
	}
	return v, true
}

// resultMarker is the reference marker of a step's latest result when the
// worker stored it by reference and templates see it as stored (a single
// tool's or a pipeline's result; a loop's list is assembled by the server).
func (d *decider) resultMarker(name string) (map[string]any, bool) {
	st, step := d.s.Steps[name], d.pb.Step(name)
	if st == nil || !st.Bound || st.ResultURI == "" || step == nil || step.Loop != nil {
		return nil, false
	}
	var labels []string
	if len(step.Pipeline) > 0 {
		labels = make([]string, len(step.Pipeline))
		for i, it := range step.Pipeline {
			labels[i] = it.Label
		}
	}
	return pipeline.RefMarker(st.ResultURI, labels), true
}

// stepView is how templates see a step's result under the step's own name: a loop
// step's list of iteration results becomes NoETL's loop aggregate, {results, data
// (the same list), count, stats: {total, success, failed}}, which NoETL's
// playbooks read (`{{ loop_step.data }}`, `{{ loop_step.stats.total }}`); a failed
// iteration kept by on_error: continue is an {error} entry and counts as failed.
// `output`, `steps.<name>.result` and the API keep the list (dsl.md §4.5).
func (d *decider) stepView(name string, result any) any {
	step := d.pb.Step(name)
	if step == nil {
		return result
	}
	if m, ok := result.(map[string]any); ok && step.Loop == nil && len(step.Pipeline) > 0 {
		return pipelineView(step, m)
	}
	list, isList := result.([]any)
	if step.Loop == nil || !isList {
		return result
	}
	failed := 0
	for _, r := range list {
		if m, ok := r.(map[string]any); ok && len(m) == 1 {
			if _, isErr := m["error"]; isErr {
				failed++
			}
		}
	}
	n := int64(len(list))
	return map[string]any{"results": list, "data": list, "count": n,
		"stats": map[string]any{"total": n, "success": n - int64(failed), "failed": int64(failed)}}
}

// pipelineView is a pipeline step's result with NoETL's task_sequence `results`
// (label → that item's data, {{ step.results.label }}) beside the merge and the
// label keys; a result that has a results member keeps it.
func pipelineView(step *playbook.Step, m map[string]any) any {
	if _, has := m["results"]; has {
		return m
	}
	results := make(map[string]any, len(step.Pipeline))
	for _, it := range step.Pipeline {
		if v, ok := m[it.Label]; ok {
			results[it.Label] = v
		}
	}
	out := maps.Clone(m)
	out["results"] = results
	return out
}

// stepsView is `steps`: every step's {status, result, error, attempts, visits}.
func (d *decider) stepsView(b *bindings) map[string]any {
	out := make(map[string]any, len(d.pb.Steps))
	for _, step := range d.pb.Steps {
		out[step.Name] = d.stepEntry(step.Name, b)
	}
	return out
}

// stepEntry is one step's entry in `steps`.
func (d *decider) stepEntry(name string, b *bindings) map[string]any {
	st := d.s.Steps[name]
	if st == nil {
		return map[string]any{"status": StepPending, "result": nil, "error": nil, "attempts": int64(0), "visits": int64(0)}
	}
	result, _ := d.stepResult(name)
	if b.self == name {
		result = b.result(d)
	}
	var errv any
	if st.Error != "" {
		errv = st.Error
	}
	return map[string]any{"status": st.Status, "result": result, "error": errv,
		"attempts": int64(st.Attempts), "visits": int64(st.Visits)}
}

func (d *decider) render(t *tmpl.Template, b *bindings) (any, error) {
	return t.Render(d.env(t.Roots(), b))
}

func (d *decider) renderValue(v *tmpl.Value, b *bindings) (any, error) {
	return v.Render(d.env(v.Roots(), b))
}

// renderSet renders a set block; every value sees the context as it was before the
// block (R-W3).
// The stored values of all its entries are asked for at once.
func (d *decider) renderSet(entries []playbook.SetEntry, b *bindings) (map[string]any, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	d.gather()
	out, err := d.renderEntries(entries, b)
	d.flush()
	return out, err
}

func (d *decider) renderEntries(entries []playbook.SetEntry, b *bindings) (map[string]any, error) {
	out := make(map[string]any, len(entries))
	for _, e := range entries {
		v, err := d.renderValue(e.Value, b)
		if err != nil && !d.short() {
			return nil, err
		}
		out[e.Path] = v
	}
	return out, nil
}

const timeLayout = time.RFC3339Nano

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func trailingZeros(w uint64) int { return bits.TrailingZeros64(w) }

func anySlice[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}
