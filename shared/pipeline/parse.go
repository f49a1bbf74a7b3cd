package pipeline

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// DefaultMaxRuns bounds tool executions per pipeline run (the jump guard).
const DefaultMaxRuns = 1000

// reservedLabels are bindings of the running context a label would clobber.
func reservedLabel(label string) bool {
	switch label {
	case "ctx", "iter", "args", "output", "_prev", "_results", toolresult.ContextUpdatesKey:
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
	// NoETL's task_sequence shape {tasks: [...], remaining_actions} (the engine's),
	// or a bare list of items (earlier servers').
	name := "tool_config"
	if m, isObj := raw.(map[string]any); isObj {
		raw, name = m["tasks"], "tool_config.tasks"
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: expected a list of items (or {tasks: [...]}), got %s", name, jsonx.TypeName(raw))
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: the pipeline has no items", name)
	}
	if p.single && len(list) != 1 {
		return nil, fmt.Errorf("%s: single is set but there are %d items", name, len(list))
	}
	for i, v := range list {
		it, err := parseItem(v)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", name, i, err)
		}
		if prev, dup := p.byLabel[it.label]; dup {
			return nil, fmt.Errorf("%s[%d]: label %q is also used by %s[%d]", name, i, it.label, name, prev)
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
	// An absent or null policy is an empty one: no rules.
	pm, err := optionalObject(sp, "policy")
	if err != nil {
		return nil, err
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
		parsed, check := parseRule(r)
		if err := check.err(); err != nil {
			return nil, fmt.Errorf("policy.%s: %w", display, err)
		}
		parsed.index, parsed.display = i, display
		rules = append(rules, parsed)
	}
	return rules, nil
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

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
