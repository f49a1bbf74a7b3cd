package parser

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/tmpl"
)

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
		p.errf(root, "apiVersion", "apiVersion is required and must be %q", playbook.APIVersion)
	} else if s, ok := p.str(n, "apiVersion", "apiVersion"); ok && s != playbook.APIVersion {
		p.errf(n, "apiVersion", "apiVersion must be %q, got %q", playbook.APIVersion, s)
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
		if playbook.Reserved(k) || k == "payload" || k == "job" {
			p.warnf(n, join("workload", k), "workload key %q is shadowed by the binding of the same name in templates (R-W5)", k)
		}
		s, isStr := m[k].(string)
		if !isStr || !tmpl.HasTemplate(s) {
			continue
		}
		t, err := p.memo.Compile(s)
		if err != nil {
			var te *tmpl.Error
			if errors.As(err, &te) {
				p.templateErr(n, join("workload", k), te)
			}
			continue
		}
		if p.pb.WorkloadTemplates == nil {
			p.pb.WorkloadTemplates = map[string]*tmpl.Template{}
		}
		p.pb.WorkloadTemplates[k] = t
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
	if len(n.Content) > playbook.MaxSteps {
		p.errf(n, "workflow", "workflow has %d steps, more than %d (limit playbook.MaxSteps): joins are analysed over every pair of steps, so the cost grows with the square of the count; split the workflow into playbooks a step runs (tool kind playbook)", len(n.Content), playbook.MaxSteps)
		return
	}
	type pending struct {
		step     *playbook.Step
		next     *yaml.Node
		nextMode string
	}
	var nexts []pending
	for i, c := range n.Content {
		s, next, nextMode := p.step(c, index("workflow", i), len(p.pb.Steps))
		if s == nil {
			continue
		}
		if prev := p.byName[s.Name]; prev != nil {
			p.errf(c, join(s.Path, "step"), "duplicate step %q (also %s)", s.Name, prev.Path)
			continue
		}
		p.byName[s.Name] = s
		p.pb.Steps = append(p.pb.Steps, s)
		if next != nil {
			nexts = append(nexts, pending{s, next, nextMode})
		}
	}
	switch {
	case entryN != nil:
		if name, ok := p.literal(entryN, "executor.spec.entry_step", "executor.spec.entry_step"); ok {
			if p.byName[name] == nil {
				p.errf(entryN, "executor.spec.entry_step", "entry_step names unknown step %q", name)
			}
			p.pb.Entry = name
		}
	case p.byName["start"] != nil:
		p.pb.Entry = "start"
	case len(p.pb.Steps) > 0:
		p.pb.Entry = p.pb.Steps[0].Name
		p.warnf(n, "workflow", "no step is named start and executor.spec.entry_step is not set: the first step, %q, is the entry", p.pb.Entry)
	default:
		p.errf(n, "workflow", "workflow has no steps: a playbook needs at least one")
	}
	if s := p.byName[p.pb.Entry]; s != nil && s.When != nil {
		p.warnf(nil, join(s.Path, "when"), "the entry step is dispatched without checking when (dsl.md §4.1); this when is ignored")
	}
	if s := p.byName[p.pb.Entry]; s != nil && len(s.Admit) > 0 {
		p.warnf(nil, join(s.Path, "spec.policy.admit"), "the entry step is dispatched without checking admit rules, as with when (dsl.md §4.1); they are ignored")
	}
	// Arcs are read once every step is known, so targets can be checked.
	for _, x := range nexts {
		x.step.Next = p.next(x.next, join(x.step.Path, "next"), x.nextMode)
	}
}
