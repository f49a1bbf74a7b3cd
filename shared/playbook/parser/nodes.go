package parser

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/tmpl"
)

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

func findKey(es []entry, k string) *yaml.Node {
	for _, e := range es {
		if e.key == k {
			return e.value
		}
	}
	return nil
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
