package pipeline

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// Policy actions (R-R6).
const (
	DoContinue = "continue"
	DoRetry    = "retry"
	DoFail     = "fail"
	DoBreak    = "break"
	DoJump     = "jump"
)

// Defaults for a retry rule that leaves fields out. The rulings are silent; these match
// the step-level retry defaults of dsl.md §2 where there is one.
const (
	DefaultRetryAttempts = 3                 // total tries
	DefaultRetryDelay    = time.Second       // dsl.md §2 retry.delay default
	MaxRetryDelay        = 300 * time.Second // R-L6's max_delay default, applied to policy delays too
	DefaultMaxRuns       = 1000              // tool executions per pipeline run (jump guard)
)

// reservedLabels are bindings of the running context a label would clobber.
func reservedLabel(label string) bool {
	switch label {
	case "ctx", "iter", "args", "output", "_prev", "_results", "_context_updates":
		return true
	}
	return false
}

// plan is a validated payload. Everything that can be malformed is checked here, before
// any item runs, so a bad payload never runs half a pipeline.
type plan struct {
	items   []*itemSpec
	byLabel map[string]int
	args    map[string]any
	rc      map[string]any
	single  bool
}

type itemSpec struct {
	label  string
	kind   string
	config map[string]any // raw, without input/args/set/spec/name
	input  any            // the item's own raw input; nil when absent
	set    []setEntry
	rules  []rule
}

// setEntry is one key of a set map, split into its path.
type setEntry struct {
	key     string
	path    []string
	value   any  // raw template value
	durable bool // ctx.-prefixed: also reported in _context_updates (R-W1, R-R5)
}

type rule struct {
	index   int
	when    any // raw condition; unused when always
	always  bool
	action  action
	display string // "rules[2]" for messages
}

type action struct {
	do       string
	set      []setEntry
	attempts int
	delay    time.Duration
	backoff  string // none | linear | exponential
	to       string
}

func parsePayload(payload map[string]any) (*plan, error) {
	if payload == nil {
		return nil, fmt.Errorf("payload is null")
	}
	// Work on a normalised copy: the caller's maps are never touched, and numbers follow
	// the jsonx convention whatever decoded them.
	payload = jsonx.Normalize(jsonx.Clone(payload)).(map[string]any)
	p := &plan{byLabel: map[string]int{}}

	var err error
	if p.args, err = optionalObject(payload, "args"); err != nil {
		return nil, err
	}
	if p.rc, err = optionalObject(payload, "render_context"); err != nil {
		return nil, err
	}
	switch s := payload["single"].(type) {
	case nil:
	case bool:
		p.single = s
	default:
		return nil, fmt.Errorf("single: expected a boolean, got %s", jsonx.TypeName(s))
	}

	raw, ok := payload["tool_config"]
	if !ok {
		return nil, fmt.Errorf("tool_config is missing")
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("tool_config: expected a list of items, got %s", jsonx.TypeName(raw))
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("tool_config: the pipeline has no items")
	}
	if p.single && len(list) != 1 {
		return nil, fmt.Errorf("tool_config: single is set but there are %d items", len(list))
	}
	for i, v := range list {
		it, err := parseItem(v)
		if err != nil {
			return nil, fmt.Errorf("tool_config[%d]: %w", i, err)
		}
		if prev, dup := p.byLabel[it.label]; dup {
			return nil, fmt.Errorf("tool_config[%d]: label %q is also used by tool_config[%d]", i, it.label, prev)
		}
		p.byLabel[it.label] = i
		p.items = append(p.items, it)
	}
	// Jump targets can only be checked once every label is known.
	for i, it := range p.items {
		for _, r := range it.rules {
			if r.action.do == DoJump {
				if _, ok := p.byLabel[r.action.to]; !ok {
					return nil, fmt.Errorf("tool_config[%d] (%s): spec.policy.%s: jump target %q is not a label of this pipeline (labels: %s)",
						i, it.label, r.display, r.action.to, strings.Join(labels(p.items), ", "))
				}
			}
		}
	}
	return p, nil
}

func optionalObject(m map[string]any, key string) (map[string]any, error) {
	switch v := m[key].(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return v, nil
	default:
		return nil, fmt.Errorf("%s: expected an object, got %s", key, jsonx.TypeName(v))
	}
}

func labels(items []*itemSpec) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.label
	}
	return out
}

// parseItem accepts the engine's `{label: {kind, …}}` and, as worker.md §3 allows for
// NoETL's servers, `{name: label, kind: …, …}`.
func parseItem(v any) (*itemSpec, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("expected an object {label: {kind: …}}, got %s", jsonx.TypeName(v))
	}
	var label string
	var cfg map[string]any
	name, hasName := m["name"].(string)
	_, hasKind := m["kind"].(string)
	switch {
	case hasName && hasKind:
		label, cfg = name, maps.Clone(m)
		delete(cfg, "name")
	case len(m) == 1:
		for k, body := range m {
			label = k
			c, ok := body.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("item %q: expected a tool object, got %s", k, jsonx.TypeName(body))
			}
			cfg = maps.Clone(c)
		}
	default:
		return nil, fmt.Errorf("expected an object with exactly one key (the label), got keys %s",
			strings.Join(slices.Sorted(maps.Keys(m)), ", "))
	}
	if label == "" {
		return nil, fmt.Errorf("item label is empty")
	}
	if reservedLabel(label) {
		return nil, fmt.Errorf("item label %q is reserved by the pipeline's running context", label)
	}
	it := &itemSpec{label: label}
	kind, ok := cfg["kind"].(string)
	if !ok || kind == "" {
		return nil, fmt.Errorf("item %q: kind must be a non-empty string, got %s", label, describe(cfg["kind"]))
	}
	it.kind = kind

	in, hasIn := cfg["input"]
	ar, hasAr := cfg["args"]
	switch {
	case hasIn && hasAr:
		return nil, fmt.Errorf("item %q: give input or its alias args, not both", label)
	case hasIn:
		it.input = in
	case hasAr:
		it.input = ar
	}
	var err error
	if s, ok := cfg["set"]; ok && s != nil {
		sm, ok := s.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("item %q: set: expected an object, got %s", label, jsonx.TypeName(s))
		}
		if it.set, err = parseSet(sm); err != nil {
			return nil, fmt.Errorf("item %q: set: %w", label, err)
		}
	}
	if sp, ok := cfg["spec"]; ok && sp != nil {
		if it.rules, err = parseSpec(sp); err != nil {
			return nil, fmt.Errorf("item %q: spec: %w", label, err)
		}
	}
	for _, k := range []string{"input", "args", "set", "spec"} {
		delete(cfg, k)
	}
	it.config = cfg
	return it, nil
}

func describe(v any) string {
	if v == nil {
		return "nothing"
	}
	return jsonx.TypeName(v)
}

// parseSet splits set keys into paths (R-W1). Entries are sorted by key so writes
// happen in one order whatever the map order was.
func parseSet(m map[string]any) ([]setEntry, error) {
	out := make([]setEntry, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		path := strings.Split(k, ".")
		if slices.Contains(path, "") {
			return nil, fmt.Errorf("key %q: empty path segment", k)
		}
		if len(path) == 1 && (k == "ctx" || k == "iter") {
			// Replacing the whole map would silently drop durable context: say so.
			return nil, fmt.Errorf("key %q needs a name after it (%s.<name>)", k, k)
		}
		out = append(out, setEntry{key: k, path: path, value: m[k], durable: path[0] == "ctx"})
	}
	return out, nil
}

func parseSpec(v any) ([]rule, error) {
	sp, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("expected an object, got %s", jsonx.TypeName(v))
	}
	pol, ok := sp["policy"]
	if !ok || pol == nil {
		return nil, nil
	}
	pm, ok := pol.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("policy: expected an object, got %s", jsonx.TypeName(pol))
	}
	rv, ok := pm["rules"]
	if !ok || rv == nil {
		return nil, nil
	}
	list, ok := rv.([]any)
	if !ok {
		return nil, fmt.Errorf("policy.rules: expected a list, got %s", jsonx.TypeName(rv))
	}
	rules := make([]rule, 0, len(list))
	for i, r := range list {
		display := fmt.Sprintf("rules[%d]", i)
		parsed, err := parseRule(r)
		if err != nil {
			return nil, fmt.Errorf("policy.%s: %w", display, err)
		}
		parsed.index, parsed.display = i, display
		rules = append(rules, parsed)
	}
	return rules, nil
}

// parseRule reads {when, then}, {else: {then}}, {else: null, then} or the R-W6 shorthand
// {else: {do, set}}.
// A rule with `then` and no `when` always matches (the rulings are silent; treating it
// as unconditional is what such a rule can only mean).
func parseRule(v any) (rule, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return rule{}, fmt.Errorf("expected an object {when, then} or {else}, got %s", jsonx.TypeName(v))
	}
	var r rule
	var then any
	elseV, hasElse := m["else"]
	when, hasWhen := m["when"]
	thenV, hasThen := m["then"]
	switch {
	case hasElse && elseV == nil && hasThen && !hasWhen:
		// `- else:` with `then:` beside it: the same rule as {else: {then: …}}
		// (NoETL's v10 example writes it so). Kept in step with the engine's parser.
		r.always, then = true, thenV
	case hasElse && (hasWhen || hasThen):
		return rule{}, fmt.Errorf("else cannot be combined with when/then in one rule")
	case hasElse:
		r.always = true
		em, ok := elseV.(map[string]any)
		if !ok {
			return rule{}, fmt.Errorf("else: expected an object, got %s", jsonx.TypeName(elseV))
		}
		if t, ok := em["then"]; ok {
			if len(em) != 1 {
				return rule{}, fmt.Errorf("else: give either {then: …} or the shorthand {do, set, …}, not both")
			}
			then = t
		} else {
			then = em // R-W6 shorthand
		}
	case hasThen:
		r.when, r.always = when, !hasWhen
		then = thenV
	default:
		return rule{}, fmt.Errorf("a rule needs then (with when) or else")
	}
	a, err := parseAction(then)
	if err != nil {
		return rule{}, fmt.Errorf("then: %w", err)
	}
	r.action = a
	return r, nil
}

func parseAction(v any) (action, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return action{}, fmt.Errorf("expected an object {do, …}, got %s", jsonx.TypeName(v))
	}
	a := action{do: DoContinue, attempts: DefaultRetryAttempts, delay: DefaultRetryDelay, backoff: "none"}
	switch d := m["do"].(type) {
	case nil:
		// A rule that only sets values lets the item go on.
	case string:
		switch d {
		case DoContinue, DoRetry, DoFail, DoBreak, DoJump:
			a.do = d
		default:
			return action{}, fmt.Errorf("do: unknown action %q (want continue, retry, fail, break or jump)", d)
		}
	default:
		return action{}, fmt.Errorf("do: expected a string, got %s", jsonx.TypeName(d))
	}
	if s, ok := m["set"]; ok && s != nil {
		sm, ok := s.(map[string]any)
		if !ok {
			return action{}, fmt.Errorf("set: expected an object, got %s", jsonx.TypeName(s))
		}
		var err error
		if a.set, err = parseSet(sm); err != nil {
			return action{}, fmt.Errorf("set: %w", err)
		}
	}
	if v, ok := m["attempts"]; ok && v != nil {
		n, ok := wholeNumber(v)
		if !ok || n < 1 {
			return action{}, fmt.Errorf("attempts: expected a whole number ≥ 1 (total tries), got %s", show(v))
		}
		a.attempts = int(min(n, math.MaxInt32))
	}
	if v, ok := m["delay"]; ok && v != nil {
		f, ok := number(v)
		if !ok || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return action{}, fmt.Errorf("delay: expected seconds ≥ 0, got %s", show(v))
		}
		a.delay = seconds(f)
	}
	if v, ok := m["backoff"]; ok && v != nil {
		s, _ := v.(string)
		switch s {
		case "none", "fixed":
			a.backoff = "none"
		case "linear", "exponential":
			a.backoff = s
		default:
			return action{}, fmt.Errorf("backoff: expected none, linear or exponential, got %s", show(v))
		}
	}
	if a.do == DoJump {
		to, ok := m["to"].(string)
		if !ok || to == "" {
			return action{}, fmt.Errorf("do: jump needs to: <item label>, got %s", describe(m["to"]))
		}
		a.to = to
	}
	return a, nil
}

func wholeNumber(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<62 {
			return int64(x), true
		}
	}
	return 0, false
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func show(v any) string {
	if s, ok := v.(string); ok {
		return quote(s)
	}
	b, err := jsonx.Marshal(v)
	if err != nil {
		return jsonx.TypeName(v)
	}
	return string(b)
}

// seconds converts, capped at MaxRetryDelay so large values cannot overflow.
func seconds(f float64) time.Duration {
	if f >= MaxRetryDelay.Seconds() {
		return MaxRetryDelay
	}
	return time.Duration(f * float64(time.Second))
}

// retryDelay is the wait before retry k (k ≥ 1, the k-th re-run), as R-L6 computes
// step retries: none d, linear d·k, exponential d·2^(k−1); capped at MaxRetryDelay.
func retryDelay(a action, k int) time.Duration {
	d := a.delay.Seconds()
	switch a.backoff {
	case "linear":
		d *= float64(k)
	case "exponential":
		d *= math.Pow(2, float64(min(k-1, 62)))
	}
	return seconds(d)
}
