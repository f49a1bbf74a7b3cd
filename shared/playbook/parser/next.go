package parser

import (
	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/playbook"
)

func (p *parser) next(n *yaml.Node, path string, stepMode string) *playbook.Next {
	out := &playbook.Next{}
	n = resolve(n)
	switch n.Kind {
	case yaml.ScalarNode:
		if a := p.arcTarget(n, path); a != nil {
			out.Arcs = []*playbook.Arc{a}
		}
		out.Mode = playbook.ModeInclusive
	case yaml.SequenceNode:
		// List shapes default to inclusive: every true arc fires (NoETL fires only the first).
		out.Mode = playbook.ModeInclusive
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
		out.Mode = playbook.ModeExclusive
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
					if m != playbook.ModeExclusive && m != playbook.ModeInclusive {
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
			default:
				if !p.legacyRouting(e, fp) {
					p.warnf(e.keyN, fp, "unknown key %q in next is ignored", e.key)
				}
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

// legacyRouting refuses NoETL's older routing keys (R-N3): then/else in next
// or an arc, case anywhere. ok false: e is none of them.
func (p *parser) legacyRouting(e entry, fp string) (ok bool) {
	switch e.key {
	case "then", "else":
		p.errf(e.keyN, fp, "legacy then/else routing is not supported (R-N3); write next arcs, one per target, with when conditions")
	case "case":
		p.errf(e.keyN, fp, "case: blocks are not supported (R-N3); write next arcs, one per target, with when conditions")
	default:
		return false
	}
	return true
}

func (p *parser) arcTarget(n *yaml.Node, path string) *playbook.Arc {
	name, ok := p.str(n, path, "next target")
	if !ok {
		return nil
	}
	if p.byName[name] == nil {
		p.errf(n, path, "unknown step %q", name)
		return nil
	}
	return &playbook.Arc{To: name}
}

func (p *parser) arc(n *yaml.Node, path string) *playbook.Arc {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode {
		return p.arcTarget(n, path)
	}
	es := p.fields(n, path, "an arc")
	if es == nil {
		return nil
	}
	a := &playbook.Arc{}
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
		default:
			if !p.legacyRouting(e, fp) {
				p.warnf(e.keyN, fp, "unknown key %q in an arc is ignored", e.key)
			}
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
