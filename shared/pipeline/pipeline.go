// Package pipeline runs a pipeline command (worker.md §3: a step whose tool is a list,
// NoETL's task_sequence, or a single tool with spec.policy) without doing any I/O: each
// item's tool runs through the Exec callback, waits go through Sleep.
//
// Per item, in order:
//  1. render its config (except `code`) and input (step-level args merged under the
//     item's own input) against the running context (R-S3);
//  2. run it through Exec;
//  3. evaluate spec.policy.rules, first match wins (R-R6), with `output` = the envelope
//     {status, data, error, http} (R-W6); a matching rule's then.set writes first;
//  4. act: retry re-runs from step 1 after a delay (R-L9), fail stops the pipeline,
//     continue/break/jump record the data as `<label>`, apply the item's `set` with
//     `output` = the data (R-W1), and go on, stop, or go to the jump target.
//
// The result merges the items' data (R-R4) and reports ctx writes as
// `_context_updates` (R-R5).
//
// Where the rulings are silent:
//   - A retry rule whose attempts are used up is not re-evaluated: the item fails with
//     the last attempt's error (status timeout if that attempt timed out), or, if the
//     last attempt succeeded, with a tool error "retries exhausted".
//   - Retry defaults: attempts 3 (total tries), delay 1 s, backoff none ("fixed" is an
//     alias); every delay is capped at 300 s (R-L6's max_delay default).
//   - At most Options.MaxRuns tool executions (default 1000, retries included) per Run:
//     beyond that the pipeline fails, so a jump loop always ends.
//   - A rule with `then` and no `when` always matches (the engine registers it with a
//     warning); a `then` without `do` continues; a `then` with neither `do` nor `set` is
//     refused. policy.go holds the grammar, which the engine also validates with.
//   - Template errors fail the pipeline at once, without retry or policy (R-L6).
//   - `fail` and exhausted retries keep the failing item's data in the result; its own
//     `set` is not applied. then.set is applied for every action, before the item's set.
//   - The merge order is the order of each item's latest run (jumps can re-run one).
//   - With single, non-object data and ctx writes, the updates cannot ride in the data,
//     so the data falls back to {label: data, _context_updates}; null data becomes
//     {_context_updates}.
//   - The step-level args are bound as `args` in the running context (already rendered,
//     never rendered again); a ctx that ends between attempts stops with a timeout
//     envelope, cancellation included.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// Item is one attempt of one item, handed to Exec.
type Item struct {
	Label string
	Kind  string
	// Config is the tool config rendered against the running context (python's
	// `code` too, as NoETL renders it), without `input`/`args` (see Input) and without the
	// pipeline's own `set` and `spec`. `kind` stays in it.
	Config map[string]any
	// Input is the step-level args with the item's rendered input (alias args) merged
	// over them: the item wins. Never nil.
	Input map[string]any
	// Attempt is the 1-based try of this item run (policy retries, R-L9).
	Attempt int
	// Context is what the item's templates could read (the step's render context,
	// or the pipeline's running context): python's `context` global, as NoETL
	// gives it. Tools must not change it. Nil: none.
	Context map[string]any
}

// Exec runs one tool attempt. It returns the tool's envelope; an Exec-level failure is
// an error envelope, never a panic.
type Exec func(ctx context.Context, item Item) toolresult.Envelope

// Sleeper waits d or until ctx is done, returning ctx's error then. Injected so tests
// record delays instead of sleeping.
type Sleeper func(ctx context.Context, d time.Duration) error

// Options are Run's collaborators. Only Exec is required.
type Options struct {
	Exec      Exec
	Sleep     Sleeper          // default: a timer that stops when ctx is done
	Now       func() time.Time // templates' now() and duration_ms; default time.Now
	Cache     *tmpl.Cache      // compiled templates; default a fresh cache per Run
	Heartbeat func()           // called before each policy retry wait (R-L9); may be nil
	MaxRuns   int              // tool executions per Run before it fails (jump guard); default DefaultMaxRuns
}

// SleepContext is the default Sleeper.
func SleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// defaultCacheSize bounds the per-Run cache when the caller brings none.
const defaultCacheSize = 256

// Run executes the pipeline described by payload ({tool_config, args, render_context,
// single?}) and returns the pipeline's envelope. It never panics on a malformed
// payload: that is an error envelope naming the problem.
func Run(ctx context.Context, payload map[string]any, opts Options) toolresult.Envelope {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	start := opts.Now()
	p, err := parsePayload(payload)
	if err == nil && opts.Exec == nil {
		err = errors.New("no Exec callback given")
	}
	if err != nil {
		return toolresult.Envelope{Status: toolresult.StatusError, Error: &toolresult.ErrorInfo{Message: "pipeline: " + err.Error(), Kind: toolresult.KindTool}}
	}
	if opts.Sleep == nil {
		opts.Sleep = SleepContext
	}
	if opts.Cache == nil {
		opts.Cache = tmpl.NewCache(defaultCacheSize)
	}
	if opts.MaxRuns <= 0 {
		opts.MaxRuns = DefaultMaxRuns
	}
	r := &runner{plan: p, opts: opts, data: map[string]any{}, updates: map[string]any{}}
	r.initRunning()
	env := r.run(ctx)
	env.DurationMs = max(0, opts.Now().Sub(start).Milliseconds())
	return env
}

// runner is the state of one Run.
type runner struct {
	plan    *plan
	opts    Options
	running map[string]any // the running context; written copy-on-write only
	data    map[string]any // label → latest data
	order   []string       // labels by their latest run, oldest first (R-R4 merge order)
	updates map[string]any // durable ctx writes: path without "ctx." → value (R-R5)
	runs    int            // Exec calls so far
	now     time.Time      // templates' now() for this item run
}

func (r *runner) initRunning() {
	r.running = maps.Clone(r.plan.rc)
	// The step-level args are already rendered: bound as they are, never re-rendered.
	r.running["args"] = r.plan.args
	r.running["_results"] = map[string]any{}
}

// failure is why the pipeline stopped unsuccessfully.
type failure struct {
	env toolresult.Envelope // status error|timeout with Error set
}

func (r *runner) run(ctx context.Context) toolresult.Envelope {
	idx := 0
	var last toolresult.Envelope // the last item's final attempt, for single's stdout/stderr
	for idx < len(r.plan.items) {
		it := r.plan.items[idx]
		env, next, fail := r.runItem(ctx, it)
		last = env
		if fail != nil {
			return r.result(fail.env, true)
		}
		switch {
		case next == stop:
			return r.result(last, false)
		case next >= 0:
			idx = next
		default:
			idx++
		}
	}
	return r.result(last, false)
}

// Where runItem says to go on.
const (
	sequential = -1 // the next item in order
	stop       = -2 // break: the pipeline is done
)

// runItem runs one item to its outcome: retries happen here, inside one call.
func (r *runner) runItem(ctx context.Context, it *itemSpec) (toolresult.Envelope, int, *failure) {
	for try := 1; ; try++ {
		if err := ctx.Err(); err != nil {
			return toolresult.Envelope{}, 0, r.stopped(it, try-1, err, nil)
		}
		if r.runs >= r.opts.MaxRuns {
			return toolresult.Envelope{}, 0, r.fail(toolresult.StatusError, toolresult.KindTool, fmt.Sprintf(
				"pipeline stopped: %d tool runs reached at item %q; a jump or retry loop does not end (the limit guards against endless loops)",
				r.opts.MaxRuns, it.label))
		}
		r.now = r.opts.Now()
		item, err := r.renderItem(it)
		if err != nil {
			// Render errors are deterministic (R-L6): never retried, no policy.
			return toolresult.Envelope{}, 0, r.fail(toolresult.StatusError, toolresult.KindTool, fmt.Sprintf("item %q: %v", it.label, err))
		}
		item.Attempt = try
		r.runs++
		env := r.opts.Exec(ctx, item)
		env.Data = jsonx.Normalize(env.Data)
		env, httpStatus := toolresult.Classify(env, it.kind)

		output := ruleOutput(env, httpStatus)
		act, matched, err := r.decide(it, output, env.Data)
		if err != nil {
			return env, 0, r.failWith(it, env, toolresult.StatusError, toolresult.KindTool, err.Error())
		}
		if matched != nil && len(act.set) > 0 {
			if err := r.applySet(act.set, output, it.label, env.Data); err != nil {
				return env, 0, r.failWith(it, env, toolresult.StatusError, toolresult.KindTool,
					fmt.Sprintf("item %q: spec.policy.%s: then.set: %v", it.label, matched.display, err))
			}
		}

		switch act.do {
		case DoRetry:
			if try >= act.attempts {
				return env, 0, r.exhausted(it, env, try, matched)
			}
			if err := ctx.Err(); err != nil {
				return env, 0, r.stopped(it, try, err, &env)
			}
			if r.opts.Heartbeat != nil {
				r.opts.Heartbeat()
			}
			if err := r.opts.Sleep(ctx, retryDelay(act, try)); err != nil {
				return env, 0, r.stopped(it, try, err, &env)
			}
			continue
		case DoFail:
			if env.Status == toolresult.StatusSuccess {
				return env, 0, r.failWith(it, env, toolresult.StatusError, toolresult.KindTool, fmt.Sprintf(
					"item %q: failed by policy %s", it.label, ruleName(matched)))
			}
			return env, 0, r.failWith(it, env, env.Status, env.Error.Kind, "")
		}

		// continue, break, jump: the outcome is accepted, even an error (worker.md §3).
		r.record(it.label, env.Data)
		if len(it.set) > 0 {
			if err := r.applySet(it.set, env.Data, it.label, env.Data); err != nil {
				return env, 0, r.fail(toolresult.StatusError, toolresult.KindTool, fmt.Sprintf("item %q: set: %v", it.label, err))
			}
		}
		switch act.do {
		case DoBreak:
			return env, stop, nil
		case DoJump:
			return env, r.plan.byLabel[act.to], nil
		}
		return env, sequential, nil
	}
}

// decide evaluates the rules, first match wins (R-R6). No match: an error or timeout
// fails, a success continues. The item's label is its attempt's data in them.
func (r *runner) decide(it *itemSpec, output map[string]any, data any) (action, *rule, error) {
	if len(it.rules) > 0 {
		vars := r.withOutput(output, it.label, data)
		budget := tmpl.NewBudget()
		for i := range it.rules {
			ru := &it.rules[i]
			ok := ru.always
			if !ok {
				v, err := r.render(ru.when, vars, "when", budget)
				if err != nil {
					return action{}, nil, fmt.Errorf("item %q: spec.policy.%s.%v", it.label, ru.display, err)
				}
				ok = tmpl.WhenTrue(v)
			}
			if ok {
				return ru.action, ru, nil
			}
		}
	}
	if output["status"] == toolresult.StatusSuccess {
		return action{do: DoContinue}, nil, nil
	}
	return action{do: DoFail}, nil, nil
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

func ruleName(r *rule) string {
	if r == nil {
		return "default"
	}
	return "rule " + r.display
}

// exhausted decides what a retry rule means once its attempts are used up. Rules are
// not re-evaluated: the item fails with the last attempt's error; if that attempt
// succeeded (a rule retrying on a successful outcome, e.g. polling), it fails with a
// tool error saying the retries ran out. A last attempt that timed out keeps status
// timeout.
func (r *runner) exhausted(it *itemSpec, env toolresult.Envelope, tries int, ru *rule) *failure {
	msg := fmt.Sprintf("item %q: policy %s: retries exhausted after %s", it.label, ruleName(ru), attempts(tries))
	if env.Status == toolresult.StatusSuccess {
		return r.failWith(it, env, toolresult.StatusError, toolresult.KindTool, msg)
	}
	return r.failWith(it, env, env.Status, env.Error.Kind, msg+": "+env.Error.Message)
}

// stopped is a ctx that ended between attempts (R-L9: policy retries are bounded by the
// command's deadline). last is the attempt that ran before, if any.
func (r *runner) stopped(it *itemSpec, tries int, err error, last *toolresult.Envelope) *failure {
	why := "deadline reached"
	if errors.Is(err, context.Canceled) {
		why = "cancelled"
	}
	msg := fmt.Sprintf("item %q: pipeline stopped (%s) after %s", it.label, why, attempts(tries))
	if tries == 0 {
		msg = fmt.Sprintf("item %q: pipeline stopped (%s) before the item ran", it.label, why)
	}
	if last != nil {
		if last.Error != nil {
			msg += "; last error: " + last.Error.Message
		}
		return r.failWith(it, *last, toolresult.StatusTimeout, toolresult.KindTimeout, msg)
	}
	return r.fail(toolresult.StatusTimeout, toolresult.KindTimeout, msg)
}

// failWith fails the pipeline on an item that ran: its data stays in the result ("what
// ran so far") and its stdout/stderr/exit code ride along. An empty msg keeps the
// item's own error as is.
func (r *runner) failWith(it *itemSpec, env toolresult.Envelope, status, kind, msg string) *failure {
	r.record(it.label, env.Data)
	e := toolresult.ErrorInfo{Kind: kind, Retryable: toolresult.Retryable(kind)}
	if env.Error != nil {
		e = *env.Error
		e.Kind, e.Retryable = kind, toolresult.Retryable(kind)
	}
	if msg != "" {
		e.Message = msg
	}
	out := toolresult.Envelope{Status: status, Error: &e, Stdout: env.Stdout, Stderr: env.Stderr, ExitCode: env.ExitCode}
	return &failure{env: out}
}

func (r *runner) fail(status, kind, msg string) *failure {
	return &failure{env: toolresult.Envelope{Status: status, Error: &toolresult.ErrorInfo{Message: msg, Kind: kind, Retryable: toolresult.Retryable(kind)}}}
}

// record binds an item's data in the running context: `<label>`, `_prev`, and
// `_results` (NoETL's names), and moves the label to the end of the merge order.
func (r *runner) record(label string, data any) {
	r.data[label] = data
	r.order = append(slices.DeleteFunc(r.order, func(l string) bool { return l == label }), label)
	r.running[label] = data
	r.running["_prev"] = data
	res, _ := r.running["_results"].(map[string]any)
	res = maps.Clone(res)
	if res == nil {
		res = map[string]any{}
	}
	res[label] = data
	r.running["_results"] = res
}

// result builds the pipeline envelope (R-R4, R-R5). last is the final envelope of the
// last item that ran (success), or the failure envelope.
func (r *runner) result(last toolresult.Envelope, failed bool) toolresult.Envelope {
	var single string
	if r.plan.single {
		single = r.plan.items[0].label
	}
	data := Merge(r.order, r.data, r.updates, single)
	// The result leaves the runner: no maps shared with the payload, Exec or templates.
	out := toolresult.Envelope{Status: toolresult.StatusSuccess, Data: jsonx.Clone(data)}
	if failed {
		out.Status, out.Error = last.Status, last.Error
	}
	if failed || r.plan.single {
		out.Stdout, out.Stderr, out.ExitCode = last.Stdout, last.Stderr, last.ExitCode
	}
	return out
}

// Merge is a pipeline's data from its items' (R-R4, R-R5): the map data of the
// labels in order shallow-merged, then each label → its data (labels win);
// updates, the durable ctx writes, ride as _context_updates. With single (the
// label of a single tool with spec.policy) the data is that item's own. Workers
// that report per-item data (NoETL's task_sequence) are merged here too, so a
// pipeline has one result whoever ran it.
func Merge(order []string, data map[string]any, updates map[string]any, single string) any {
	if single != "" {
		d := data[single]
		if len(updates) == 0 {
			return d
		}
		switch m := d.(type) {
		case map[string]any:
			m = maps.Clone(m)
			m[toolresult.ContextUpdatesKey] = updates
			return m
		case nil:
			return map[string]any{toolresult.ContextUpdatesKey: updates}
		default:
			// Durable updates must not be lost and cannot ride inside a list or a
			// scalar: fall back to the labelled form.
			return map[string]any{single: d, toolresult.ContextUpdatesKey: updates}
		}
	}
	m := map[string]any{}
	for _, l := range order {
		if dm, ok := data[l].(map[string]any); ok {
			maps.Copy(m, dm)
		}
	}
	for _, l := range order {
		m[l] = data[l]
	}
	if len(updates) > 0 {
		m[toolresult.ContextUpdatesKey] = updates
	}
	return m
}

// withOutput is the running context plus `output` and the item's label bound to
// its data (NoETL's playbooks read {{ step.x }} in a single tool's own policy
// set), without touching the context.
func (r *runner) withOutput(output any, label string, data any) map[string]any {
	v := maps.Clone(r.running)
	v["output"] = output
	if label != "" {
		v[label] = data
	}
	return v
}

// renderItem renders one attempt's config and input afresh (a retry sees what earlier
// attempts' then.set wrote).
func (r *runner) renderItem(it *itemSpec) (Item, error) {
	vars := r.running
	budget := tmpl.NewBudget()
	cfg := make(map[string]any, len(it.config))
	for _, k := range slices.Sorted(maps.Keys(it.config)) {
		v := it.config[k]
		render := k != "kind"
		if code, isText := v.(string); k == "code" && isText {
			render = tmpl.Renders(code) // braces that are no template are Python's own
		}
		if render {
			var err error
			if v, err = r.render(v, vars, k, budget); err != nil {
				return Item{}, err
			}
		}
		cfg[k] = v
	}
	var rc map[string]any
	if it.kind == toolkind.Python {
		rc = vars // python's context (NoETL's): the running context, read only
	}
	input := maps.Clone(r.plan.args)
	if it.input != nil {
		v, err := r.render(it.input, vars, "input", budget)
		if err != nil {
			return Item{}, err
		}
		switch own := v.(type) {
		case nil:
		case map[string]any:
			maps.Copy(input, own)
		default:
			return Item{}, fmt.Errorf("input: expected an object, got %s", jsonx.TypeName(v))
		}
	}
	// Exec owns what it gets: nothing shared with the running context.
	return Item{
		Label:   it.label,
		Kind:    it.kind,
		Config:  jsonx.Clone(cfg).(map[string]any),
		Input:   jsonx.Clone(input).(map[string]any),
		Context: rc,
	}, nil
}

// render renders a value: strings through the template cache, maps and lists
// recursively (keys are literal, dsl.md §5), anything else as is. path names the
// place for error messages. Every template draws from budget: one per item attempt,
// rule evaluation or set block, so a pipeline's many templates do not multiply it.
func (r *runner) render(v any, vars map[string]any, path string, budget *tmpl.Budget) (any, error) {
	switch x := v.(type) {
	case string:
		if !tmpl.HasTemplate(x) {
			return x, nil
		}
		t, err := r.opts.Cache.Compile(x)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out, err := t.Render(tmpl.Env{Vars: vars, Now: r.now, Budget: budget})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			e, err := r.render(x[k], vars, path+"."+k, budget)
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			o, err := r.render(e, vars, fmt.Sprintf("%s[%d]", path, i), budget)
			if err != nil {
				return nil, err
			}
			out[i] = o
		}
		return out, nil
	default:
		return v, nil
	}
}

// applySet evaluates every value against the context as it is now (the item's
// label bound to data), then writes them all (simultaneous, R-W3), in key order.
// `ctx.` keys are also durable (R-W1, R-R5).
func (r *runner) applySet(entries []setEntry, output any, label string, data any) error {
	vars := r.withOutput(output, label, data)
	budget := tmpl.NewBudget()
	vals := make([]any, len(entries))
	for i, e := range entries {
		v, err := r.render(e.value, vars, e.key, budget)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	for i, e := range entries {
		setPath(r.running, e.path, vals[i])
		if e.durable {
			r.updates[strings.Join(e.path[1:], ".")] = vals[i]
		}
	}
	return nil
}

// setPath writes v at path under m. m itself is the runner's own map and is written in
// place; every nested map on the way is copied, so values shared with item data, the
// payload or earlier renders are never modified. A missing or non-object step on the
// path becomes an object.
func setPath(m map[string]any, path []string, v any) {
	if len(path) == 1 {
		m[path[0]] = v
		return
	}
	child, _ := m[path[0]].(map[string]any)
	child = maps.Clone(child)
	if child == nil {
		child = map[string]any{}
	}
	setPath(child, path[1:], v)
	m[path[0]] = child
}
