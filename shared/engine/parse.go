package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
)

// Parse reads, validates and analyses a playbook. It reports every problem it
// finds, each with its YAML path; the playbook is nil when any is an error.
// Unknown keys are warnings, never silently dropped (dsl.md §1).
func Parse(src []byte) (*Playbook, Diagnostics) {
	p := &parser{pb: &Playbook{Source: src, byName: map[string]*Step{}}, entrySizes: map[*yaml.Node]Expansion{}}
	root, err := p.document(src)
	if err != nil || !p.expand(root) {
		return nil, p.diags
	}
	p.playbook(root)
	if p.diags.HasErrors() {
		return nil, p.diags
	}
	p.pb.graph = analyse(p.pb)
	for _, s := range p.pb.Steps {
		if !p.pb.graph.reachable[s.Index] {
			p.warnf(nil, s.Path, "step %q can never be reached from start; it stays pending (R-W4)", s.Name)
		}
	}
	return p.pb, p.diags
}

// namePattern is R-T7's rule for set keys, loop iterators and pipeline labels; step
// names are free (see step).
var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ContextKey reads a key that writes the durable context (a set key, an
// execution variable): an optional ctx., iter. or step. prefix, then a dotted
// path whose parts match namePattern (R-T9) and whose first part is not a
// reserved name (R-T7). It returns the path in ctx.
func ContextKey(key string) (string, error) {
	path := key
	for _, prefix := range []string{"ctx.", "iter.", "step."} {
		if strings.HasPrefix(path, prefix) {
			path = strings.TrimPrefix(path, prefix)
			break
		}
	}
	parts := strings.Split(path, ".")
	for _, part := range parts {
		if !namePattern.MatchString(part) {
			return "", fmt.Errorf("%q: each part of the path must match [A-Za-z_][A-Za-z0-9_]* (R-T9)", key)
		}
	}
	if reservedNames[parts[0]] {
		return "", fmt.Errorf("%q writes the reserved name %q (R-T7)", key, parts[0])
	}
	return path, nil
}

// reservedNames are bindings the engine provides to templates (R-T7).
var reservedNames = map[string]bool{
	"workload": true, "ctx": true, "steps": true, "iter": true, "output": true, "error": true,
	"execution_id": true, "catalog_id": true, "playbook_path": true, "_index": true, "_total": true,
}

// iterBindings are the names every loop iteration binds besides its iterator.
var iterBindings = map[string]bool{"iter": true, "_index": true, "_total": true}

// Tool kinds and the keys of each are shared/toolkind' table, which the tools read
// their config through: a key registers without a warning exactly when its tool reads it.

type parser struct {
	pb       *Playbook
	diags    Diagnostics
	workbook map[string]*yaml.Node
	// anchors holds the expanded size of every anchored node (expand.go).
	anchors *expander
	// entrySizes caches each referenced workbook entry's expanded size.
	entrySizes map[*yaml.Node]Expansion
	// overExpanded is set once workbook references pass a limit.
	overExpanded bool
}

func (p *parser) add(sev Severity, n *yaml.Node, path, format string, args ...any) {
	d := Diagnostic{Severity: sev, Path: path, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		d.Line, d.Column = n.Line, n.Column
	}
	p.diags = append(p.diags, d)
}

func (p *parser) errf(n *yaml.Node, path, format string, args ...any) {
	p.add(SeverityError, n, path, format, args...)
}

func (p *parser) warnf(n *yaml.Node, path, format string, args ...any) {
	p.add(SeverityWarning, n, path, format, args...)
}

func (p *parser) document(src []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errf(nil, "", "the document is empty: a playbook needs apiVersion, kind, metadata and workflow")
		} else {
			p.errf(nil, "", "not valid YAML: %v", err)
		}
		return nil, errors.New("unparseable")
	}
	// One playbook per file, as NoETL's register reads it: a second document (a
	// Credential, another playbook) would otherwise be dropped without a word. An
	// empty trailing document (a closing ---) is harmless and allowed.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		if x := resolve(&extra); !(x.Kind == yaml.DocumentNode && (len(x.Content) == 0 || resolve(x.Content[0]).ShortTag() == "!!null")) {
			p.errf(&extra, "", "the file holds more than one YAML document: register one playbook per file (credentials and other playbooks go in files of their own)")
			return nil, errors.New("several documents")
		}
	}
	root := resolve(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = resolve(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		p.errf(root, "", "a playbook must be a mapping with apiVersion, kind, metadata and workflow, got %s", kindName(root))
		return nil, errors.New("not a mapping")
	}
	return root, nil
}

// resolve follows YAML aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			return "null"
		}
		return fmt.Sprintf("the %s %q", strings.TrimPrefix(n.ShortTag(), "!!"), n.Value)
	default:
		return "an unexpected node"
	}
}

// entry is one key of a mapping, in document order.
type entry struct {
	key   string
	keyN  *yaml.Node
	value *yaml.Node
}

// fields reads a mapping's entries, resolving aliases and merge keys and reporting
// duplicate keys. It returns nil (after an error) when n is not a mapping.
func (p *parser) fields(n *yaml.Node, path, what string) []entry {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		if n != nil && n.ShortTag() == "!!null" {
			return []entry{}
		}
		p.errf(n, path, "%s must be a mapping, got %s", what, kindName(n))
		return nil
	}
	var out []entry
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), resolve(n.Content[i+1])
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			for _, m := range mergeSources(v) {
				for _, e := range p.fields(m, path, "a merged mapping") {
					if !seen[e.key] {
						seen[e.key] = true
						out = append(out, e)
					}
				}
			}
			continue
		}
		if k.Kind != yaml.ScalarNode {
			p.errf(k, path, "mapping keys must be scalars, got %s", kindName(k))
			continue
		}
		if seen[k.Value] {
			p.errf(k, join(path, k.Value), "duplicate key %q", k.Value)
			continue
		}
		seen[k.Value] = true
		out = append(out, entry{key: k.Value, keyN: k, value: v})
	}
	return out
}

func mergeSources(v *yaml.Node) []*yaml.Node {
	if v.Kind == yaml.SequenceNode {
		out := make([]*yaml.Node, len(v.Content))
		for i, c := range v.Content {
			out[i] = resolve(c)
		}
		return out
	}
	return []*yaml.Node{v}
}

// known warns about every key not in allowed.
func (p *parser) known(es []entry, path, where string, allowed ...string) {
	for _, e := range es {
		if !slices.Contains(allowed, e.key) {
			p.warnf(e.keyN, join(path, e.key), "unknown key %q in %s is ignored", e.key, where)
		}
	}
}

func join(path, key string) string {
	switch {
	case path == "":
		return key
	case key == "": // a whole-value template: the error is at the value itself
		return path
	}
	if strings.HasPrefix(key, "[") {
		return path + key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// str reads a scalar as text.
func (p *parser) str(n *yaml.Node, path, what string) (string, bool) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		p.errf(n, path, "%s must be a string, got %s", what, kindName(n))
		return "", false
	}
	return n.Value, true
}

// literal reads a text field that is never rendered and warns when it holds a
// template (R-T6).
func (p *parser) literal(n *yaml.Node, path, what string) (string, bool) {
	s, ok := p.str(n, path, what)
	if ok && tmpl.HasTemplate(s) {
		p.warnf(n, path, "%s is never rendered; its {{ }} stays literal text (R-T6)", what)
	}
	return s, ok
}

// literalTree warns, at its exact path, about every scalar (and mapping key) under
// n that holds a template: the field is literal and never rendered (R-T6).
func (p *parser) literalTree(n *yaml.Node, path, what string) {
	n = resolve(n)
	if n == nil {
		return
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if tmpl.HasTemplate(n.Value) {
			p.warnf(n, path, "%s is never rendered; its {{ }} stays literal text (R-T6)", what)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p.literalTree(c, index(path, i), what)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
				p.literalTree(n.Content[i+1], path, what)
				continue
			}
			if k.Kind == yaml.ScalarNode && tmpl.HasTemplate(k.Value) {
				p.warnf(k, join(path, k.Value), "%s is never rendered; the {{ }} in this key stays literal text (R-T6)", what)
			}
			p.literalTree(n.Content[i+1], join(path, k.Value), what)
		}
	}
}

func (p *parser) number(n *yaml.Node, path, what string) (float64, bool) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!int" || n.ShortTag() == "!!float") {
		var f float64
		if err := n.Decode(&f); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f, true
		}
	}
	if n.Kind == yaml.ScalarNode && tmpl.HasTemplate(n.Value) {
		p.warnf(n, path, "%s is never rendered; its {{ }} stays literal text (R-T6)", what)
		p.errf(n, path, "%s must be a number; templates are not rendered here (R-T6)", what)
		return 0, false
	}
	p.errf(n, path, "%s must be a number, got %s", what, kindName(n))
	return 0, false
}

func (p *parser) integer(n *yaml.Node, path, what string, minimum int) (int, bool) {
	f, ok := p.number(n, path, what)
	if !ok {
		return 0, false
	}
	if f != math.Trunc(f) || f < float64(minimum) || f > math.MaxInt32 {
		p.errf(n, path, "%s must be a whole number ≥ %d, got %s", what, minimum, resolve(n).Value)
		return 0, false
	}
	return int(f), true
}

// value converts a node to the jsonx value convention without coercing scalars:
// timestamps and other exotic tags stay the strings they were written as.
func (p *parser) value(n *yaml.Node, path string) any {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for _, e := range p.fields(n, path, "a mapping") {
			m[e.key] = p.value(e.value, join(path, e.key))
		}
		return m
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, c := range n.Content {
			l[i] = p.value(c, index(path, i))
		}
		return l
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if n.Decode(&b) == nil {
				return b
			}
		case "!!int":
			var i int64
			if n.Decode(&i) == nil {
				return i
			}
			var f float64
			if n.Decode(&f) == nil {
				return f
			}
		case "!!float":
			var f float64
			if n.Decode(&f) == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				if f == math.Trunc(f) && math.Abs(f) < 1<<53 && !strings.ContainsAny(n.Value, ".eE") {
					return int64(f)
				}
				return f
			}
		}
		return n.Value
	}
	return nil
}

// compile compiles a value's templates, reporting each error at its full path.
func (p *parser) compile(n *yaml.Node, path string, v any) *tmpl.Value {
	cv, errs := tmpl.CompileValue(v)
	for _, e := range errs {
		p.errf(n, join(path, e.Path), "%s", templateError(e))
	}
	cv.Templates(func(at string, t *tmpl.Template) { p.unsupportedCalls(n, join(path, at), t) })
	return cv
}

// unsupportedCalls warns about template functions that register but fail when
// rendered here (token(), R-N1).
func (p *parser) unsupportedCalls(n *yaml.Node, path string, t *tmpl.Template) {
	for _, f := range t.Unsupported() {
		p.warnf(n, path, "%s is not supported by this server; rendering this template fails, and so does its step (R-N1)", f)
	}
}

func (p *parser) template(n *yaml.Node, path, what string) *tmpl.Template {
	s, ok := p.str(n, path, what)
	if !ok {
		return nil
	}
	t, err := tmpl.Compile(s)
	if err != nil {
		var te *tmpl.Error
		if errors.As(err, &te) {
			p.errf(n, path, "%s", templateError(te))
		} else {
			p.errf(n, path, "bad template: %v", err)
		}
		return nil
	}
	p.unsupportedCalls(n, path, t)
	return t
}

func templateError(e *tmpl.Error) string {
	c := *e
	c.Path = ""
	return c.Error()
}

func (p *parser) playbook(root *yaml.Node) {
	es := p.fields(root, "", "the playbook")
	p.known(es, "", "the playbook", "apiVersion", "kind", "metadata", "workload", "keychain", "workbook", "workflow", "executor")
	get := func(k string) *yaml.Node {
		for _, e := range es {
			if e.key == k {
				return e.value
			}
		}
		return nil
	}
	if n := get("apiVersion"); n == nil {
		p.errf(root, "apiVersion", "apiVersion is required and must be %q", APIVersion)
	} else if s, ok := p.str(n, "apiVersion", "apiVersion"); ok && s != APIVersion {
		p.errf(n, "apiVersion", "apiVersion must be %q, got %q", APIVersion, s)
	}
	if n := get("kind"); n == nil {
		p.errf(root, "kind", "kind is required and must be \"Playbook\"")
	} else if s, ok := p.str(n, "kind", "kind"); ok && s != "Playbook" {
		p.errf(n, "kind", "kind must be \"Playbook\", got %q", s)
	}
	if n := get("metadata"); n == nil {
		p.errf(root, "metadata", "metadata is required, with name and path")
	} else {
		p.metadata(n)
	}
	if n := get("workload"); n != nil {
		p.workload(n)
	}
	if n := get("keychain"); n != nil {
		if v, ok := p.value(n, "keychain").([]any); ok {
			p.pb.Keychain = v
		} else if resolve(n).ShortTag() != "!!null" {
			p.errf(n, "keychain", "keychain must be a list, got %s", kindName(resolve(n)))
		}
	}
	if n := get("workbook"); n != nil {
		p.readWorkbook(n)
	}
	var entryN *yaml.Node
	if n := get("executor"); n != nil {
		entryN = p.executor(n)
	}
	n := get("workflow")
	if n == nil {
		p.errf(root, "workflow", "workflow is required: a list of steps including one named start")
		return
	}
	p.workflow(n, entryN)
}

// executor reads NoETL's executor block. Only spec.entry_step changes what runs;
// the rest describes the runtime NoETL should pick (profile, version, requires) and
// is accepted as information. It returns the entry_step node, if any.
func (p *parser) executor(n *yaml.Node) *yaml.Node {
	var entry *yaml.Node
	for _, e := range p.fields(n, "executor", "executor") {
		fp := join("executor", e.key)
		switch e.key {
		case "profile", "version", "requires":
			// Runtime selection hints for NoETL's deployments; nothing to do here.
		case "spec":
			for _, se := range p.fields(e.value, fp, "executor.spec") {
				sp := join(fp, se.key)
				switch se.key {
				case "entry_step":
					entry = se.value
				case "no_next_is_error":
					// false is what this engine does: an arc set that fires nothing ends
					// the branch (dsl.md §3). true would fail the run instead: not offered.
					if v := p.value(se.value, sp); v != false && v != nil {
						p.warnf(se.value, sp, "executor.spec.no_next_is_error: true is not supported and is ignored: a step whose arcs all stay false ends its branch")
					}
				default:
					p.warnf(se.keyN, sp, "unknown key %q in executor.spec is ignored", se.key)
				}
			}
		default:
			p.warnf(e.keyN, fp, "unknown key %q in executor is ignored", e.key)
		}
	}
	return entry
}

func (p *parser) metadata(n *yaml.Node) {
	es := p.fields(n, "metadata", "metadata")
	p.known(es, "metadata", "metadata", "name", "path", "version", "description", "labels")
	md := &p.pb.Metadata
	for _, e := range es {
		path := join("metadata", e.key)
		switch e.key {
		case "name":
			md.Name, _ = p.literal(e.value, path, "metadata.name")
		case "path":
			if s, ok := p.literal(e.value, path, "metadata.path"); ok {
				if strings.HasPrefix(s, "/") {
					p.warnf(e.value, path, "the leading / of metadata.path is removed (R-W7)")
					s = strings.TrimLeft(s, "/")
				}
				md.Path = s
			}
		case "version":
			if v := resolve(e.value); v.Kind == yaml.ScalarNode {
				md.Version = v.Value // opaque (R-N4)
				p.literalTree(v, path, "metadata.version")
			} else {
				p.errf(v, path, "metadata.version must be a scalar, got %s", kindName(v))
			}
		case "description":
			md.Description, _ = p.literal(e.value, path, "metadata.description")
		case "labels":
			labels := map[string]any{}
			for _, l := range p.fields(e.value, path, "metadata.labels") {
				lp := join(path, l.key)
				if v := resolve(l.value); v.Kind != yaml.ScalarNode {
					p.errf(v, lp, "label values must be scalars, got %s", kindName(v))
					continue
				}
				if tmpl.HasTemplate(l.key) {
					p.warnf(l.keyN, lp, "metadata.labels is never rendered; the {{ }} in this key stays literal text (R-T6)")
				}
				p.literalTree(l.value, lp, "metadata.labels")
				labels[l.key] = p.value(l.value, lp)
			}
			md.Labels = labels
		}
	}
	if md.Name == "" {
		p.errf(n, "metadata.name", "metadata.name is required (R-N4)")
	}
	if md.Path == "" {
		p.errf(n, "metadata.path", "metadata.path is required: it is the playbook's catalog path (R-N4)")
	}
}

func (p *parser) workload(n *yaml.Node) {
	v := p.value(n, "workload")
	m, ok := v.(map[string]any)
	if !ok {
		if v != nil {
			p.errf(n, "workload", "workload must be a mapping, got %s", kindName(resolve(n)))
		}
		return
	}
	p.pb.Workload = m
	keys := slices.Sorted(maps.Keys(m))
	for _, k := range keys {
		if reservedNames[k] || k == "payload" || k == "job" {
			p.warnf(n, join("workload", k), "workload key %q is shadowed by the binding of the same name in templates (R-W5)", k)
		}
		s, isStr := m[k].(string)
		if !isStr || !tmpl.HasTemplate(s) {
			continue
		}
		t, err := tmpl.Compile(s)
		if err != nil {
			var te *tmpl.Error
			if errors.As(err, &te) {
				p.errf(n, join("workload", k), "%s", templateError(te))
			}
			continue
		}
		if p.pb.workloadTemplates == nil {
			p.pb.workloadTemplates = map[string]*tmpl.Template{}
		}
		p.pb.workloadTemplates[k] = t
	}
}

func (p *parser) readWorkbook(n *yaml.Node) {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		p.errf(n, "workbook", "workbook must be a list of named tools, got %s", kindName(n))
		return
	}
	p.workbook = map[string]*yaml.Node{}
	for i, c := range n.Content {
		path := index("workbook", i)
		es := p.fields(c, path, "a workbook entry")
		var name string
		var tool *yaml.Node
		flat := false
		for _, e := range es {
			switch e.key {
			case "name":
				name, _ = p.literal(e.value, join(path, "name"), "workbook name")
			case "tool":
				tool = e.value
			case "kind":
				flat = true
			}
		}
		if tool == nil && flat {
			tool = resolve(c) // NoETL's older flat form: {name, kind, ...}
		}
		switch {
		case name == "":
			p.errf(c, join(path, "name"), "workbook entries need a name")
		case tool == nil:
			p.errf(c, join(path, "tool"), "workbook entry %q needs a tool", name)
		case p.workbook[name] != nil:
			p.errf(c, join(path, "name"), "duplicate workbook entry %q", name)
		default:
			p.workbook[name] = tool
		}
	}
}

// workflow reads the steps and picks the entry step: executor.spec.entry_step when
// given, else the step named start, else the first step (NoETL's rule; a warning
// says so, since our own playbooks always name their entry start).
func (p *parser) workflow(n *yaml.Node, entryN *yaml.Node) {
	n = resolve(n)
	if n.Kind != yaml.SequenceNode {
		p.errf(n, "workflow", "workflow must be a list of steps, got %s", kindName(n))
		return
	}
	type pending struct {
		step     *Step
		next     *yaml.Node
		nextMode string
	}
	var nexts []pending
	for i, c := range n.Content {
		s, next, nextMode := p.step(c, index("workflow", i), len(p.pb.Steps))
		if s == nil {
			continue
		}
		if prev := p.pb.byName[s.Name]; prev != nil {
			p.errf(c, join(s.Path, "step"), "duplicate step %q (also %s)", s.Name, prev.Path)
			continue
		}
		p.pb.byName[s.Name] = s
		p.pb.Steps = append(p.pb.Steps, s)
		if next != nil {
			nexts = append(nexts, pending{s, next, nextMode})
		}
	}
	switch {
	case entryN != nil:
		if name, ok := p.literal(entryN, "executor.spec.entry_step", "executor.spec.entry_step"); ok {
			if p.pb.byName[name] == nil {
				p.errf(entryN, "executor.spec.entry_step", "entry_step names unknown step %q", name)
			}
			p.pb.entry = name
		}
	case p.pb.byName["start"] != nil:
		p.pb.entry = "start"
	case len(p.pb.Steps) > 0:
		p.pb.entry = p.pb.Steps[0].Name
		p.warnf(n, "workflow", "no step is named start and executor.spec.entry_step is not set: the first step, %q, is the entry", p.pb.entry)
	default:
		p.errf(n, "workflow", "workflow has no steps: a playbook needs at least one")
	}
	if s := p.pb.byName[p.pb.entry]; s != nil && s.When != nil {
		p.warnf(nil, join(s.Path, "when"), "the entry step is dispatched without checking when (dsl.md §4.1); this when is ignored")
	}
	if s := p.pb.byName[p.pb.entry]; s != nil && len(s.Admit) > 0 {
		p.warnf(nil, join(s.Path, "spec.policy.admit"), "the entry step is dispatched without checking admit rules, as with when (dsl.md §4.1); they are ignored")
	}
	// Arcs are read once every step is known, so targets can be checked.
	for _, x := range nexts {
		x.step.Next = p.next(x.next, join(x.step.Path, "next"), x.nextMode)
	}
}

// step reads one step. Its next block is returned unread, with the step's
// spec.next_mode, because arcs can only be checked once every step is known.
func (p *parser) step(n *yaml.Node, path string, idx int) (*Step, *yaml.Node, string) {
	es := p.fields(n, path, "a step")
	if es == nil {
		return nil, nil, ""
	}
	s := &Step{Index: idx, Path: path, OnError: OnErrorFail, MaxVisits: DefaultMaxVisits}
	var next, toolN, retryN, timeoutN, toolRetryN *yaml.Node
	var nextMode string
	for _, e := range es {
		if e.key == "step" {
			s.Name, _ = p.str(e.value, join(path, "step"), "step")
		}
	}
	if s.Name == "" {
		p.errf(n, join(path, "step"), "every step needs a name in `step:`")
		return nil, nil, ""
	}
	// NoETL accepts any step name (its regression playbooks name steps after the
	// playbook paths they run, and name a step error), so this server does too: such
	// a step is not a top-level template name, and templates reach it through steps,
	// e.g. {{ steps['a/b'].result }}. This supersedes R-T7/R-W7's refusal (issue 12).
	switch {
	case !namePattern.MatchString(s.Name):
		p.warnf(n, join(path, "step"), "step name %q is not a template name: templates reach its result as {{ steps[%s].result }}", s.Name, quoteTemplate(s.Name))
	case reservedNames[s.Name]:
		p.warnf(n, join(path, "step"), "step name %q is also a template binding, which wins in templates: reach the step's result as {{ steps.%s.result }}", s.Name, s.Name)
	}
	inputKey := ""
	for _, e := range es {
		fp := join(path, e.key)
		switch e.key {
		case "step":
		case "desc", "description":
			s.Desc, _ = p.literal(e.value, fp, e.key)
		case "when":
			s.When = p.template(e.value, fp, "when")
		case "input", "args":
			if inputKey != "" {
				p.errf(e.keyN, fp, "give step input once: both %s and %s are set (args is an alias of input)", inputKey, e.key)
				continue
			}
			inputKey = e.key
			v := p.value(e.value, fp)
			if _, ok := v.(map[string]any); !ok && v != nil {
				p.errf(e.value, fp, "%s must be a mapping of names to values, got %s", e.key, kindName(resolve(e.value)))
				continue
			}
			s.Input = p.compile(e.value, fp, v)
		case "tool":
			toolN = e.value
		case "loop":
			s.Loop = p.loop(e.value, fp)
		case "set":
			s.Set = p.set(e.value, fp)
		case "next":
			next = e.value
		case "retry":
			retryN = e.value
		case "timeout", "timeout_seconds":
			if timeoutN != nil {
				p.errf(e.keyN, fp, "give the step timeout once (timeout_seconds is an alias of timeout)")
				continue
			}
			timeoutN = e.value
			if t, ok := p.integer(e.value, fp, "timeout (seconds)", 1); ok {
				s.Timeout = t
			}
		case "spec":
			for _, se := range p.fields(e.value, fp, "step spec") {
				sp := join(fp, se.key)
				switch se.key {
				case "next_mode":
					if m, ok := p.literal(se.value, sp, "spec.next_mode"); ok {
						if m != ModeExclusive && m != ModeInclusive {
							p.errf(se.value, sp, "spec.next_mode must be exclusive or inclusive, got %q", m)
						}
						nextMode = m
					}
				case "on_error":
					if m, ok := p.literal(se.value, sp, "spec.on_error"); ok {
						if m != OnErrorFail && m != OnErrorContinue {
							p.errf(se.value, sp, "spec.on_error must be fail or continue, got %q", m)
						}
						s.OnError = m
					}
				case "max_visits":
					if v, ok := p.integer(se.value, sp, "spec.max_visits", 1); ok {
						s.MaxVisits = v
					}
				case "policy":
					for _, pe := range p.fields(se.value, sp, "step spec.policy") {
						if pe.key != "admit" {
							p.warnf(pe.keyN, join(sp, pe.key), "unknown key %q in step spec.policy is ignored", pe.key)
							continue
						}
						s.Admit = p.admit(pe.value, join(sp, "admit"))
					}
				default:
					p.warnf(se.keyN, sp, "unknown key %q in step spec is ignored", se.key)
				}
			}
		case "case":
			p.errf(e.keyN, fp, "case: blocks are not supported (R-N3); route with next arcs and their when conditions")
		default:
			p.warnf(e.keyN, fp, "unknown key %q in step %q is ignored", e.key, s.Name)
		}
	}
	if toolN == nil {
		p.errf(n, join(path, "tool"), "step %q has no tool; every step runs one (use kind: noop for a step that only routes) (R-W7)", s.Name)
	} else {
		toolRetryN = p.tools(toolN, join(path, "tool"), s)
	}
	switch {
	case retryN != nil && toolRetryN != nil:
		p.errf(toolRetryN, join(path, "tool.retry"), "retry is set both on the step and inside tool; keep one")
	case retryN != nil:
		s.Retry = p.retry(retryN, join(path, "retry"))
	case toolRetryN != nil:
		s.Retry = p.retry(toolRetryN, join(path, "tool.retry"))
	default:
		s.Retry = p.retry(nil, "")
	}
	if s.Timeout == 0 {
		s.Timeout = DefaultTimeout
		if s.Tool != nil {
			if t, ok := toolTimeout(s.Tool.Raw); ok {
				s.Timeout = t
			}
		}
	}
	return s, next, nextMode
}

// admit reads NoETL's step admission rules (spec.policy.admit, v10's replacement
// for step when): {mode: exclusive, rules: [{when, then: {allow}}, {else: {then:
// {allow}}}]}. They are the step's guard: the first rule whose when holds decides
// (an else always holds); allow: false skips the step as a false when does; when
// no rule matches the step is admitted.
func (p *parser) admit(n *yaml.Node, path string) []AdmitRule {
	var out []AdmitRule
	for _, e := range p.fields(n, path, "admit") {
		fp := join(path, e.key)
		switch e.key {
		case "mode":
			if m, ok := p.literal(e.value, fp, "admit mode"); ok && m != ModeExclusive {
				p.errf(e.value, fp, "admit mode must be exclusive (the first matching rule decides), got %q", m)
			}
		case "rules":
			rules := resolve(e.value)
			if rules.Kind != yaml.SequenceNode {
				p.errf(rules, fp, "admit rules must be a list, got %s", kindName(rules))
				continue
			}
			for i, r := range rules.Content {
				if rule, ok := p.admitRule(r, index(fp, i)); ok {
					out = append(out, rule)
				}
			}
		default:
			p.warnf(e.keyN, fp, "unknown key %q in admit is ignored", e.key)
		}
	}
	return out
}

func (p *parser) admitRule(n *yaml.Node, path string) (AdmitRule, bool) {
	var when, then, els *yaml.Node
	for _, e := range p.fields(n, path, "an admit rule") {
		switch e.key {
		case "when":
			when = e.value
		case "then":
			then = e.value
		case "else":
			els = e.value
		default:
			p.warnf(e.keyN, join(path, e.key), "unknown key %q in an admit rule is ignored", e.key)
		}
	}
	var r AdmitRule
	thenPath := join(path, "then")
	switch {
	case els != nil && when == nil && then == nil && resolve(els).Kind == yaml.MappingNode:
		then, thenPath = findKey(p.fields(els, join(path, "else"), "else"), "then"), join(path, "else.then")
	case els != nil && when == nil && then != nil && resolve(els).ShortTag() == "!!null":
	case els == nil && when != nil && then != nil:
		r.When = p.template(when, join(path, "when"), "admit when")
	default:
		p.errf(n, path, "an admit rule is {when, then: {allow}} or {else: {then: {allow}}}")
		return r, false
	}
	if then == nil {
		p.errf(n, thenPath, "an admit rule needs then: {allow: true|false}")
		return r, false
	}
	for _, e := range p.fields(then, thenPath, "admit then") {
		if e.key != "allow" {
			p.warnf(e.keyN, join(thenPath, e.key), "unknown key %q in admit then is ignored", e.key)
			continue
		}
		b, ok := p.value(e.value, join(thenPath, "allow")).(bool)
		if !ok {
			p.errf(e.value, join(thenPath, "allow"), "allow must be true or false")
			return r, false
		}
		r.Allow = b
		return r, true
	}
	p.errf(then, thenPath, "an admit rule needs then: {allow: true|false}")
	return r, false
}

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
func (p *parser) tools(n *yaml.Node, path string, s *Step) *yaml.Node {
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
				s.Pipeline = append(s.Pipeline, &PipelineItem{Label: label, Tool: t})
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
		if !namePattern.MatchString(label) {
			p.errf(es[0].keyN, path, "pipeline label %q must match [A-Za-z_][A-Za-z0-9_]*", label)
		}
		return label, es[0].value
	}
	for _, e := range es {
		if e.key == "name" {
			label, _ := p.literal(e.value, join(path, "name"), "pipeline label")
			if label != "" && !namePattern.MatchString(label) {
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
func (p *parser) tool(n *yaml.Node, path string, ref map[string]bool) (*Tool, *yaml.Node) {
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
	t := &Tool{Kind: kind, Supported: supported}
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
			p.errf(n, join(path, "input"), "tool input must be a mapping of names to values, got %s", describe(v))
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
func (p *parser) compileTool(n *yaml.Node, path string, t *Tool) {
	render := make(map[string]any, len(t.Raw))
	for k, v := range t.Raw {
		if k != "spec" && k != "set" && (k != "code" || tmpl.Renders(t.Code)) {
			render[k] = v
		}
	}
	t.Config = p.compile(n, path, render)
	t.roots = rawRoots(t.Raw, t.Code)
	if t.Kind == "python" {
		t.codeNames = codeWords(t.Code)
	}
}

// codeTemplate warns about a python code that reads as a template but does not
// compile: it runs as written (NoETL would fail rendering it).
func (p *parser) codeTemplate(n *yaml.Node, path, code string) {
	if !tmpl.HasTemplate(code) || tmpl.Renders(code) {
		return
	}
	_, err := tmpl.Compile(code)
	p.warnf(n, path, "code is rendered like other tool fields (as NoETL does), but this one is not a valid template (%v): it runs as written; write {{ '{{' }} for literal braces", err)
}

// codeWords are the identifiers a python code mentions (words and the words of its
// string literals): the names of the render context its `context` global gets
// (NoETL hands python the whole render context; this engine hands the part the
// code can name, so a command costs what its code reads, R-S2).
func codeWords(code string) []string {
	seen := map[string]bool{}
	start := -1
	for i := 0; i <= len(code); i++ {
		c := byte(0)
		if i < len(code) {
			c = code[i]
		}
		word := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (start >= 0 && c >= '0' && c <= '9')
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			seen[code[start:i]] = true
			start = -1
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// rawRoots lists the names a raw tool's templates read, `code` included when it is
// rendered. Errors were already reported when the parts were compiled.
func rawRoots(raw map[string]any, code string) []string {
	c := make(map[string]any, len(raw))
	for k, v := range raw {
		if k != "code" || tmpl.Renders(code) {
			c[k] = v
		}
	}
	v, errs := tmpl.CompileValue(c)
	if len(errs) > 0 || v == nil {
		return nil
	}
	return v.Roots()
}

func findKey(es []entry, k string) *yaml.Node {
	for _, e := range es {
		if e.key == k {
			return e.value
		}
	}
	return nil
}

func describe(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T %v", v, v)
	}
}

// workbookTool replaces `kind: workbook, name: X` by workbook entry X, its input
// merged under the reference's (the step wins).
func (p *parser) workbookTool(es []entry, n *yaml.Node, path string, ref map[string]bool) (*Tool, *yaml.Node) {
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
	merged := &Tool{Kind: base.Kind, Code: base.Code, HasPolicy: base.HasPolicy, Supported: base.Supported, Raw: jsonx.Clone(base.Raw).(map[string]any)}
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

// childNode is the value under key in mapping n (aliases resolved), or nil.
func childNode(n *yaml.Node, key string) *yaml.Node {
	n = resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := resolve(n.Content[i]); k.Kind == yaml.ScalarNode && k.Value == key {
			return resolve(n.Content[i+1])
		}
	}
	return nil
}

// itemSet validates a pipeline item's or policy's set: keys are literal dotted
// paths into the running context (R-W1); values are templates.
func (p *parser) itemSet(n *yaml.Node, path string, v any) {
	m, ok := v.(map[string]any)
	if !ok {
		p.errf(n, path, "set must be a mapping of names to values, got %s", describe(v))
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

func (p *parser) loop(n *yaml.Node, path string) *Loop {
	l := &Loop{Mode: ModeSequential, MaxInFlight: DefaultMaxInFlight}
	es := p.fields(n, path, "loop")
	inSet, limitSet, modeSet := false, false, false
	var frame, cursor entry
	for _, e := range es {
		fp := join(path, e.key)
		switch e.key {
		case "in", "collection", "items":
			if inSet {
				p.errf(e.keyN, fp, "give the loop collection once (in)")
				continue
			}
			inSet = true
			if e.key != "in" {
				p.warnf(e.keyN, fp, "%s is read as loop.in", e.key)
			}
			// A template string or a literal list/map: both render through tmpl.Value.
			l.In = p.compile(e.value, fp, p.value(e.value, fp))
		case "iterator", "element":
			if e.key == "element" {
				p.warnf(e.keyN, fp, "element is read as loop.iterator")
			}
			if it, ok := p.literal(e.value, fp, "loop.iterator"); ok {
				// Each iteration binds iter, _index and _total itself, so those would be
				// ambiguous. Other binding names are accepted, as NoETL accepts them
				// (iterator: playbook_path): inside the loop the iterator wins.
				switch {
				case !namePattern.MatchString(it) || iterBindings[it]:
					p.errf(e.value, fp, "loop.iterator %q must be a name ([A-Za-z_][A-Za-z0-9_]*) other than iter, _index and _total, which every iteration binds", it)
				case reservedNames[it]:
					p.warnf(e.value, fp, "loop.iterator %q hides the template binding of the same name inside this loop's templates", it)
				}
				l.Iterator = it
			}
		case "mode":
			l.Mode, modeSet = p.loopMode(e.value, fp), true
		case "max_in_flight":
			p.maxInFlight(e.value, fp, l)
			limitSet = true
		case "spec":
			for _, se := range p.fields(e.value, fp, "loop spec") {
				sp := join(fp, se.key)
				switch se.key {
				case "mode":
					l.Mode, modeSet = p.loopMode(se.value, sp), true
				case "max_in_flight":
					p.maxInFlight(se.value, sp, l)
					limitSet = true
				case "frame":
					frame = se
				case "policy":
					// NoETL's placement hint ({exec: local|distributed}); every
					// iteration here is a command any worker of the pool may claim.
				default:
					p.warnf(se.keyN, sp, "unknown key %q in loop spec is ignored", se.key)
				}
			}
		case "cursor":
			cursor = e
		default:
			p.warnf(e.keyN, fp, "unknown key %q in loop is ignored", e.key)
		}
	}
	switch {
	case cursor.keyN != nil:
		fp := join(path, "cursor")
		if inSet {
			p.errf(cursor.keyN, fp, "give the loop either in (a collection) or cursor (rows claimed while it runs), not both")
		}
		if modeSet && l.Mode != ModeCursor {
			p.errf(cursor.keyN, fp, "loop.cursor needs spec.mode: cursor (the loop's mode is %s)", l.Mode)
		}
		l.Mode = ModeCursor
		if !limitSet {
			l.MaxInFlight = DefaultCursorInFlight
		}
		l.Cursor = p.cursor(cursor.value, fp, l)
		p.frame(frame, join(path, "spec.frame"), l)
	case l.Mode == ModeCursor:
		p.errf(n, join(path, "cursor"), "loop.spec.mode cursor needs loop.cursor: the kind, auth and claim statement the rows come from")
	case frame.keyN != nil:
		p.warnf(frame.keyN, join(path, "spec.frame"), "loop.spec.frame only applies to cursor loops and is ignored")
	}
	if l.Cursor == nil && l.Mode != ModeCursor && !inSet {
		p.errf(n, join(path, "in"), "loop needs in: the collection to iterate (a template or a list), or cursor: the rows to claim")
	}
	if l.Iterator == "" {
		p.errf(n, join(path, "iterator"), "loop needs iterator: the name each item is bound to")
	}
	return l
}

// cursorKinds are the databases a cursor's claim runs against here: the claim is
// a command of that tool kind.
var cursorKinds = []string{"postgres"}

// cursor reads loop.cursor {kind, auth, claim, options}. A kind NoETL has that
// this project does not claim from (mysql, snowflake, redis, nats_stream, …)
// registers with a warning and fails when dispatched (R-N1).
func (p *parser) cursor(n *yaml.Node, path string, l *Loop) *Cursor {
	c := &Cursor{}
	es := p.fields(n, path, "loop.cursor")
	for _, e := range es {
		fp := join(path, e.key)
		switch e.key {
		case "kind":
			if k, ok := p.literal(e.value, fp, "loop.cursor.kind"); ok {
				c.Kind = k
			}
		case "auth", "credential":
			c.Auth = p.template(e.value, fp, "loop.cursor.auth")
		case "claim":
			c.Claim = p.template(e.value, fp, "loop.cursor.claim")
		case "options":
			if m, ok := p.value(e.value, fp).(map[string]any); ok {
				c.Options = m
			} else {
				p.errf(e.value, fp, "loop.cursor.options must be a mapping")
			}
		default:
			p.warnf(e.keyN, fp, "unknown key %q in loop.cursor is ignored", e.key)
		}
	}
	switch {
	case c.Kind == "":
		p.errf(n, join(path, "kind"), "loop.cursor needs kind: the database the claim runs against (%s)", strings.Join(cursorKinds, ", "))
	case !slices.Contains(cursorKinds, c.Kind):
		l.Unsupported = fmt.Sprintf("cursor loops over %s are not supported by this server (claims run against %s, R-N1)", c.Kind, strings.Join(cursorKinds, ", "))
		p.warnf(n, join(path, "kind"), "cursor kind %s is not supported by this server; the step will fail when dispatched (R-N1)", c.Kind)
	}
	if c.Claim == nil {
		p.errf(n, join(path, "claim"), "loop.cursor needs claim: a statement that marks rows as taken and returns them (UPDATE … RETURNING)")
	}
	if c.Auth == nil {
		p.errf(n, join(path, "auth"), "loop.cursor needs auth: the credential alias of the database the claim runs against")
	}
	return c
}

// frame reads a cursor loop's spec.frame: max_rows (the rows one claim asks
// for), process (row: an iteration per row; frame: one per claim) and
// row_concurrency (multiplies max_in_flight, as NoETL runs that many rows of a
// slot's frame at once). NoETL's frame lease, heartbeat and size knobs are
// accepted: here every iteration is a command under the server's lease.
func (p *parser) frame(fe entry, path string, l *Loop) {
	if fe.keyN == nil {
		return
	}
	for _, e := range p.fields(fe.value, path, "loop.spec.frame") {
		fp := join(path, e.key)
		switch e.key {
		case "max_rows":
			if v, ok := p.integer(e.value, fp, "loop.spec.frame.max_rows", 1); ok {
				l.Cursor.Batch = v
			}
		case "process":
			if v, ok := p.literal(e.value, fp, "loop.spec.frame.process"); ok {
				switch v {
				case "row":
				case "frame":
					l.Cursor.PerFrame = true
				default:
					p.errf(e.value, fp, "loop.spec.frame.process must be row or frame, got %q", v)
				}
			}
		case "row_concurrency":
			if v, ok := p.integer(e.value, fp, "loop.spec.frame.row_concurrency", 1); ok {
				l.Cursor.RowConcurrency = v
			}
		case "max_seconds", "max_bytes", "lease_seconds", "heartbeat_seconds", "verify_ipc", "retry_mode", "max_attempts":
		default:
			p.warnf(e.keyN, fp, "unknown key %q in loop.spec.frame is ignored", e.key)
		}
	}
}

// maxInFlight reads a parallel loop's limit: a whole number, or a template
// rendered when the loop starts (NoETL playbooks take it from the workload).
func (p *parser) maxInFlight(n *yaml.Node, path string, l *Loop) {
	if v := resolve(n); v.Kind == yaml.ScalarNode && tmpl.HasTemplate(v.Value) {
		l.MaxInFlightT = p.template(n, path, "loop max_in_flight")
		return
	}
	if v, ok := p.integer(n, path, "loop max_in_flight", 1); ok {
		l.MaxInFlight = v
	}
}

func (p *parser) loopMode(n *yaml.Node, path string) string {
	m, ok := p.literal(n, path, "loop mode")
	switch {
	case !ok || m == "":
		return ModeSequential
	case m != ModeSequential && m != ModeParallel && m != ModeCursor:
		p.errf(n, path, "loop mode must be sequential, parallel or cursor, got %q", m)
		return ModeSequential
	}
	return m
}

// set reads a step's or arc's set block (R-T9).
func (p *parser) set(n *yaml.Node, path string) []SetEntry {
	es := p.fields(n, path, "set")
	var out []SetEntry
	seen := map[string]string{}
	for _, e := range es {
		fp := join(path, e.key)
		key, err := ContextKey(e.key)
		valid := err == nil
		if err != nil {
			p.errf(e.keyN, fp, "set key %s", err)
		}
		if valid {
			for other, otherKey := range seen {
				if other == key || strings.HasPrefix(other, key+".") || strings.HasPrefix(key, other+".") {
					p.errf(e.keyN, fp, "set keys %q and %q write the same name %q (R-T9)", otherKey, e.key, key)
					valid = false
					break
				}
			}
		}
		if !valid {
			continue
		}
		seen[key] = e.key
		out = append(out, SetEntry{Key: e.key, Path: key, Value: p.compile(e.value, fp, p.value(e.value, fp))})
	}
	return out
}

func (p *parser) retry(n *yaml.Node, path string) Retry {
	r := Retry{MaxAttempts: 1, Delay: DefaultRetryDelay, Backoff: "fixed", MaxDelay: DefaultMaxDelay, On: []string{ClassError, ClassTimeout, ClassExpired}}
	if n == nil {
		return r
	}
	for _, e := range p.fields(n, path, "retry") {
		fp := join(path, e.key)
		switch e.key {
		case "max_attempts", "attempts":
			if v, ok := p.integer(e.value, fp, "retry.max_attempts", 1); ok {
				r.MaxAttempts = v
			}
		case "delay", "backoff_seconds":
			if v, ok := p.number(e.value, fp, "retry.delay (seconds)"); ok && v >= 0 {
				r.Delay = v
			} else if ok {
				p.errf(e.value, fp, "retry.delay must be ≥ 0 seconds")
			}
		case "backoff":
			b, _ := p.literal(e.value, fp, "retry.backoff")
			switch b {
			case "fixed", "linear", "exponential":
				r.Backoff = b
			case "none":
				r.Backoff = "fixed"
			default:
				p.errf(e.value, fp, "retry.backoff must be fixed, linear or exponential, got %q", b)
			}
		case "max_delay":
			if v, ok := p.number(e.value, fp, "retry.max_delay (seconds)"); ok && v >= 0 {
				r.MaxDelay = v
			}
		case "on", "retry_on":
			p.literalTree(e.value, fp, "retry."+e.key)
			v := p.value(e.value, fp)
			list, ok := v.([]any)
			if s, isStr := v.(string); isStr {
				list, ok = []any{s}, true
			}
			if !ok {
				p.errf(e.value, fp, "retry.on must be a list of error, timeout, expired")
				continue
			}
			r.On = nil
			for _, x := range list {
				c, _ := x.(string)
				if c != ClassError && c != ClassTimeout && c != ClassExpired {
					p.errf(e.value, fp, "retry.on entries must be error, timeout or expired, got %v", x)
					continue
				}
				r.On = append(r.On, c)
			}
		case "retry_on_status":
			p.literalTree(e.value, fp, "retry.retry_on_status")
			list, ok := p.value(e.value, fp).([]any)
			if !ok {
				p.errf(e.value, fp, "retry_on_status must be a list of HTTP status codes")
				continue
			}
			for _, x := range list {
				code, ok := x.(int64)
				if !ok || code < 100 || code > 599 {
					p.errf(e.value, fp, "retry_on_status entries must be HTTP status codes, got %v", x)
					continue
				}
				r.OnStatus = append(r.OnStatus, code)
			}
		default:
			p.warnf(e.keyN, fp, "unknown key %q in retry is ignored", e.key)
		}
	}
	return r
}

func (p *parser) next(n *yaml.Node, path string, stepMode string) *Next {
	out := &Next{}
	n = resolve(n)
	switch n.Kind {
	case yaml.ScalarNode:
		if a := p.arcTarget(n, path); a != nil {
			out.Arcs = []*Arc{a}
		}
		out.Mode = ModeInclusive
	case yaml.SequenceNode:
		// List shapes default to inclusive: every true arc fires (NoETL fires only the first).
		out.Mode = ModeInclusive
		if stepMode != "" {
			out.Mode = stepMode
		}
		for i, c := range n.Content {
			if a := p.arc(c, index(path, i)); a != nil {
				out.Arcs = append(out.Arcs, a)
			}
		}
	case yaml.MappingNode:
		es := p.fields(n, path, "next")
		// R-J9: the router's own mode, else the step's next_mode, else exclusive.
		out.Mode = ModeExclusive
		if stepMode != "" {
			out.Mode = stepMode
		}
		hasArcs := false
		for _, e := range es {
			fp := join(path, e.key)
			switch e.key {
			case "spec":
				for _, se := range p.fields(e.value, fp, "next spec") {
					if se.key != "mode" {
						p.warnf(se.keyN, join(fp, se.key), "unknown key %q in next spec is ignored", se.key)
						continue
					}
					m, _ := p.literal(se.value, join(fp, "mode"), "next mode")
					if m != ModeExclusive && m != ModeInclusive {
						p.errf(se.value, join(fp, "mode"), "next mode must be exclusive or inclusive, got %q", m)
						continue
					}
					out.Mode = m
				}
			case "arcs":
				hasArcs = true
				arcs := resolve(e.value)
				if arcs.Kind != yaml.SequenceNode {
					p.errf(arcs, fp, "next.arcs must be a list, got %s", kindName(arcs))
					continue
				}
				for i, c := range arcs.Content {
					if a := p.arc(c, index(fp, i)); a != nil {
						out.Arcs = append(out.Arcs, a)
					}
				}
			case "then", "else":
				p.errf(e.keyN, fp, "legacy then/else routing is not supported in next (R-N3); write arcs with when conditions")
			case "case":
				p.errf(e.keyN, fp, "case: blocks are not supported (R-N3); route with next arcs and their when conditions")
			default:
				p.warnf(e.keyN, fp, "unknown key %q in next is ignored", e.key)
			}
		}
		if !hasArcs && !p.diags.HasErrors() {
			p.errf(n, join(path, "arcs"), "next as a mapping needs arcs: a list of {step, when?, set?}")
		}
	default:
		p.errf(n, path, "next must be a step name, a list or a router {spec, arcs}, got %s", kindName(n))
	}
	return out
}

func (p *parser) arcTarget(n *yaml.Node, path string) *Arc {
	name, ok := p.str(n, path, "next target")
	if !ok {
		return nil
	}
	if p.pb.byName[name] == nil {
		p.errf(n, path, "unknown step %q", name)
		return nil
	}
	return &Arc{To: name}
}

func (p *parser) arc(n *yaml.Node, path string) *Arc {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode {
		return p.arcTarget(n, path)
	}
	es := p.fields(n, path, "an arc")
	if es == nil {
		return nil
	}
	a := &Arc{}
	var target *yaml.Node
	for _, e := range es {
		fp := join(path, e.key)
		switch e.key {
		case "step":
			target = e.value
		case "when":
			a.When = p.template(e.value, fp, "arc when")
		case "set", "args":
			a.Set = append(a.Set, p.set(e.value, fp)...)
		case "cond":
			p.warnf(e.keyN, fp, "arc cond is NoETL's and is ignored; use when (R-J9)")
		case "then", "else":
			p.errf(e.keyN, fp, "legacy then/else arcs are not supported (R-N3); write one arc per target with a when condition")
		case "case":
			p.errf(e.keyN, fp, "case: blocks are not supported (R-N3); write one arc per target with a when condition")
		default:
			p.warnf(e.keyN, fp, "unknown key %q in an arc is ignored", e.key)
		}
	}
	if target == nil {
		p.errf(n, join(path, "step"), "an arc needs step: the target step's name")
		return nil
	}
	t := p.arcTarget(target, join(path, "step"))
	if t == nil {
		return nil
	}
	a.To = t.To
	return a
}

// quoteTemplate writes s as a template string literal.
func quoteTemplate(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}
