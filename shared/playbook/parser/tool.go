package parser

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
)

// Tool kinds and the keys of each are shared/toolkind's table, which the tools read
// their config through: a key registers without a warning exactly when its tool reads it.

// toolTimeout reads a literal tool-level timeout, which doubles as the step timeout
// when the step sets none.
func toolTimeout(raw map[string]any) (int, bool) {
	for _, k := range toolkind.CommonNames("timeout") {
		switch v := raw[k].(type) {
		case int64:
			if v > 0 {
				return int(v), true
			}
		case float64:
			if v >= 1 {
				return int(math.Ceil(v)), true
			}
		}
	}
	return 0, false
}

// tools reads a step's tool: a mapping (one tool) or a list (a pipeline). It returns
// the tool-level retry node when the single tool carries one.
func (p *parser) tools(n *yaml.Node, path string, s *playbook.Step) *yaml.Node {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		t, retry := p.tool(n, path, nil)
		s.Tool = t
		return retry
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			p.errf(n, path, "a pipeline needs at least one tool")
			return nil
		}
		labels := map[string]bool{}
		for i, c := range n.Content {
			ip := index(path, i)
			label, body := p.pipelineItem(c, ip, i)
			if body == nil {
				continue
			}
			if labels[label] {
				p.errf(c, ip, "duplicate pipeline label %q", label)
			}
			labels[label] = true
			t, retry := p.tool(body, ip, nil)
			if retry != nil {
				p.errf(retry, join(ip, "retry"), "retry inside a pipeline item is not supported; use the item's spec.policy rules (do: retry) or the step's retry")
			}
			if t != nil {
				s.Pipeline = append(s.Pipeline, &playbook.PipelineItem{Label: label, Tool: t})
			}
		}
	default:
		p.errf(n, path, "tool must be a mapping with kind, or a list of tools (a pipeline), got %s", kindName(n))
	}
	return nil
}

// pipelineItem accepts both item forms: {name: label, kind: …} and {label: {kind: …}}.
func (p *parser) pipelineItem(n *yaml.Node, path string, i int) (string, *yaml.Node) {
	es := p.fields(n, path, "a pipeline item")
	if es == nil {
		return "", nil
	}
	if len(es) == 1 && resolve(es[0].value).Kind == yaml.MappingNode {
		label := es[0].key
		if !playbook.ValidName(label) {
			p.errf(es[0].keyN, path, "pipeline label %q must match [A-Za-z_][A-Za-z0-9_]*", label)
		}
		return label, es[0].value
	}
	for _, e := range es {
		if e.key == "name" {
			label, _ := p.literal(e.value, join(path, "name"), "pipeline label")
			if label != "" && !playbook.ValidName(label) {
				p.errf(e.value, join(path, "name"), "pipeline label %q must match [A-Za-z_][A-Za-z0-9_]*", label)
			}
			return label, n
		}
	}
	label := fmt.Sprintf("task_%d", i+1)
	p.warnf(n, path, "pipeline item has no name; it is labelled %s", label)
	return label, n
}

// tool reads one tool mapping. ref guards against workbook reference cycles.
func (p *parser) tool(n *yaml.Node, path string, ref map[string]bool) (*playbook.Tool, *yaml.Node) {
	es := p.fields(n, path, "a tool")
	if es == nil {
		return nil, nil
	}
	var kind string
	var kindN *yaml.Node
	for _, e := range es {
		if e.key == "kind" {
			kind, _ = p.literal(e.value, join(path, "kind"), "tool kind")
			kindN = e.value
		}
	}
	if kind == "" {
		if kindN == nil {
			p.errf(n, join(path, "kind"), "tool needs a kind (%s, workbook)", strings.Join(toolkind.SupportedNames(), ", "))
		}
		return nil, nil
	}
	if kind == "workbook" {
		return p.workbookTool(es, n, path, ref)
	}
	es, specDrop := p.hoistSpec(es, kind, path)
	raw := map[string]any{}
	var retry *yaml.Node
	tk, supported := toolkind.Lookup(kind)
	t := &playbook.Tool{Kind: kind, Supported: supported}
	switch {
	case t.Supported:
		p.known(es, path, kind+" tool", tk.Accepted()...)
	case toolkind.NoETLOnly(kind):
		p.warnf(kindN, join(path, "kind"), "tool kind %q is not supported by this server; the step will fail when dispatched (R-N1)", kind)
	default:
		p.errf(kindN, join(path, "kind"), "unknown tool kind %q; supported: %s, workbook", kind, strings.Join(toolkind.SupportedNames(), ", "))
		return nil, nil
	}
	for _, e := range es {
		fp := join(path, e.key)
		if key, ok := toolkind.Renaming(kind, e.key); ok {
			if key.Twice != "" && findKey(es, key.Name) != nil {
				p.errf(e.keyN, fp, "%s", key.Twice)
			}
			raw[key.Name] = p.value(e.value, fp)
			continue
		}
		switch e.key {
		case "kind":
			continue
		case "retry":
			retry = e.value
			continue
		case "code":
			code, ok := p.str(e.value, fp, "code")
			if ok {
				t.Code = code
				p.codeTemplate(e.value, fp, code)
			}
			raw["code"] = code
			continue
		case "spec":
			t.HasPolicy = p.toolSpec(e.value, fp)
			if sm, ok := p.value(e.value, fp).(map[string]any); ok {
				for k := range specDrop {
					delete(sm, k)
				}
				raw["spec"] = sm
			}
			continue
		case "libs":
			if !p.libs(e.value, fp) {
				continue // a package list: nothing for the worker to import
			}
		case "set":
			raw["set"] = p.value(e.value, fp)
			continue
		}
		raw[e.key] = p.value(e.value, fp)
	}
	if kind == "python" {
		_, hasCode := raw["code"]
		_, hasScript := raw["script"]
		if hasCode == hasScript && t.Supported {
			p.errf(n, path, "a python tool needs exactly one of code and script")
		}
	}
	if v, ok := raw["input"]; ok && v != nil && t.Supported {
		// Kinds this server does not run keep their own input shapes (container
		// args are a list); they fail at dispatch anyway (R-N1).
		if _, isMap := v.(map[string]any); !isMap {
			p.errf(n, join(path, "input"), "tool input must be a mapping of names to values, got %s", jsonx.Describe(v))
		}
	}
	t.Raw = raw
	if setV, ok := raw["set"]; ok {
		setN := findKey(es, "set")
		p.itemSet(setN, join(path, "set"), setV)
	}
	p.compileTool(n, path, t)
	return t, retry
}

// compileTool compiles what dispatch renders of a tool (Raw without spec and set,
// whose policy rules and item sets render on the worker, and without a code that
// is no template) and the names its templates and its python code read.
func (p *parser) compileTool(n *yaml.Node, path string, t *playbook.Tool) {
	render := make(map[string]any, len(t.Raw))
	for k, v := range t.Raw {
		if k != "spec" && k != "set" && (k != "code" || tmpl.Renders(t.Code)) {
			render[k] = v
		}
	}
	t.Config = p.compile(n, path, render)
	t.Roots = p.rawRoots(t.Raw, t.Code)
	if t.Kind == "python" {
		t.CodeNames = codeWords(t.Code)
	}
}

// workbookTool replaces `kind: workbook, name: X` by workbook entry X, its input
// merged under the reference's (the step wins).
func (p *parser) workbookTool(es []entry, n *yaml.Node, path string, ref map[string]bool) (*playbook.Tool, *yaml.Node) {
	var name string
	for _, e := range es {
		if e.key == "name" {
			name, _ = p.literal(e.value, join(path, "name"), "workbook name")
		}
	}
	target := p.workbook[name]
	switch {
	case name == "":
		p.errf(n, join(path, "name"), "a workbook tool needs the name of a workbook entry")
		return nil, nil
	case target == nil:
		p.errf(n, join(path, "name"), "unknown workbook entry %q", name)
		return nil, nil
	case ref[name]:
		p.errf(n, join(path, "name"), "workbook entry %q refers to itself", name)
		return nil, nil
	case !p.chargeReference(n, target, join(path, "name")):
		return nil, nil
	}
	seen := map[string]bool{name: true}
	for k := range ref {
		seen[k] = true
	}
	base, retry := p.tool(target, path, seen)
	if base == nil {
		return nil, nil
	}
	merged := &playbook.Tool{Kind: base.Kind, Code: base.Code, HasPolicy: base.HasPolicy, Supported: base.Supported, Raw: jsonx.Clone(base.Raw).(map[string]any)}
	es, specDrop := p.hoistSpec(es, base.Kind, path)
	for _, e := range es {
		fp := join(path, e.key)
		switch e.key {
		case "kind", "name":
		case "input", "args":
			over, _ := p.value(e.value, fp).(map[string]any)
			in, _ := merged.Raw["input"].(map[string]any)
			out := map[string]any{}
			for k, v := range in {
				out[k] = v
			}
			for k, v := range over {
				out[k] = v
			}
			merged.Raw["input"] = out
		case "retry":
			retry = e.value
		case "spec":
			merged.HasPolicy = p.toolSpec(e.value, fp)
			sm, _ := p.value(e.value, fp).(map[string]any)
			for k := range specDrop {
				delete(sm, k)
			}
			merged.Raw["spec"] = sm
		case "code":
			merged.Code, _ = p.str(e.value, fp, "code")
			merged.Raw["code"] = merged.Code
			p.codeTemplate(e.value, fp, merged.Code)
		default:
			merged.Raw[e.key] = p.value(e.value, fp)
		}
	}
	p.compileTool(n, path, merged)
	return merged, retry
}

// toolSpec validates a tool's spec block and reports whether it carries a policy.
func (p *parser) toolSpec(n *yaml.Node, path string) bool {
	has := false
	for _, e := range p.fields(n, path, "tool spec") {
		fp := join(path, e.key)
		if e.key != "policy" {
			continue // other tool spec keys are tool-specific and passed through
		}
		for _, pe := range p.fields(e.value, fp, "spec.policy") {
			pp := join(fp, pe.key)
			if pe.key != "rules" {
				p.warnf(pe.keyN, pp, "unknown key %q in spec.policy is ignored", pe.key)
				continue
			}
			rules := resolve(pe.value)
			if rules.Kind != yaml.SequenceNode {
				p.errf(rules, pp, "spec.policy.rules must be a list, got %s", kindName(rules))
				continue
			}
			has = true
			for i, r := range rules.Content {
				p.policyRule(r, index(pp, i))
			}
		}
	}
	return has
}

// policyRule validates one rule through the worker's own grammar (pipeline.CheckRule),
// so a rule registers exactly when the worker will run it; the findings are placed at
// this playbook's paths and lines. Templates are the engine's part: when and the
// action's set are compiled here, and a templated jump target warns (R-T6).
func (p *parser) policyRule(n *yaml.Node, path string) {
	rule := p.value(n, path)
	check := pipeline.CheckRule(rule)
	for _, f := range check.Findings {
		fn, fp := n, path
		for _, k := range f.Path {
			if c := childNode(fn, k); c != nil {
				fn = c
			}
			fp = join(fp, k)
		}
		if f.Warning {
			p.warnf(fn, fp, "%s", f.Message)
		} else {
			p.errf(fn, fp, "%s", f.Message)
		}
	}
	if when := childNode(n, "when"); when != nil {
		p.template(when, join(path, "when"), "rule when")
	}
	if check.Action == nil {
		return
	}
	act, ap, av := n, path, rule
	for _, k := range check.Action {
		m, _ := av.(map[string]any)
		act, ap, av = childNode(act, k), join(ap, k), m[k]
	}
	m, _ := av.(map[string]any)
	if set, ok := m["set"].(map[string]any); ok { // a set of another shape is a finding above
		sn := childNode(act, "set")
		if sn == nil {
			sn = n // reached through a merge key: the rule's line is the closest
		}
		p.itemSet(sn, join(ap, "set"), set)
	}
	if to := childNode(act, "to"); to != nil {
		p.literalTree(to, join(ap, "to"), "jump target")
	}
}

// itemSet validates a pipeline item's or policy's set: keys are literal dotted
// paths into the running context (R-W1); values are templates.
func (p *parser) itemSet(n *yaml.Node, path string, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		p.errf(n, path, "set must be a mapping of names to values, got %s", jsonx.Describe(v))
		return
	}
	p.compile(n, path, m)
}

// libs validates NoETL's python libs forms (R-N2). A list names packages to
// install (NoETL playbooks write pip names like psycopg2-binary, which are not
// importable names); this server never installs packages (R-P3), so the list is
// dropped with a warning and libs reports false.
func (p *parser) libs(n *yaml.Node, path string) bool {
	if v := resolve(n); v.Kind == yaml.SequenceNode {
		p.literalTree(v, path, "libs")
		p.warnf(v, path, "libs as a list names packages to install; this server never installs packages (R-P3): install them on the workers, and import them in code")
		return false
	}
	for _, e := range p.fields(n, path, "libs") {
		v := resolve(e.value)
		switch v.Kind {
		case yaml.ScalarNode:
		case yaml.MappingNode:
			for _, le := range p.fields(v, join(path, e.key), "a lib") {
				if le.key != "from" && le.key != "import" {
					p.warnf(le.keyN, join(path, e.key+"."+le.key), "unknown key %q in libs entry (expected from, import)", le.key)
				}
			}
		default:
			p.errf(v, join(path, e.key), "libs entries are a module name or {from, import}, got %s", kindName(v))
		}
	}
	return true
}

// hoistSpec moves tool knobs written under tool.spec (NoETL's canonical v10 form:
// "all knobs live under spec", e.g. python spec: {input, code}, http spec: {method,
// url}) up to the tool, where this server's tools read them. The spec keeps only
// what is not a knob of the kind (policy, and anything else, passed through). A
// knob given both places is an error. It returns the tool's entries with the
// hoisted ones appended, and the keys to drop from the spec.
func (p *parser) hoistSpec(es []entry, kind, path string) ([]entry, map[string]bool) {
	specN := findKey(es, "spec")
	if specN == nil || resolve(specN).Kind != yaml.MappingNode {
		return es, nil
	}
	tk, supported := toolkind.Lookup(kind)
	if !supported {
		return es, nil // kinds this server does not run: their spec is theirs
	}
	knob := map[string]bool{}
	for _, k := range tk.InSpec() {
		knob[k] = true
	}
	var drop map[string]bool
	out := es
	for _, se := range p.fields(specN, join(path, "spec"), "tool spec") {
		if !knob[se.key] {
			continue
		}
		if findKey(es, se.key) != nil {
			p.errf(se.keyN, join(path, "spec."+se.key), "%s is given both on the tool and under tool.spec; keep one", se.key)
			continue
		}
		if drop == nil {
			drop = map[string]bool{}
			out = slices.Clone(es)
		}
		drop[se.key] = true
		out = append(out, se)
	}
	return out, drop
}
