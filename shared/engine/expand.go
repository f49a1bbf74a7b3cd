package engine

import (
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"
)

// Limits on a playbook's expanded size: the YAML as the parser reads it, with every
// alias, merge key and workbook reference replaced by what it stands for. Aliases
// let a few hundred bytes stand for billions of nodes ("billion laughs"), and
// everything downstream (the workload in playbook.started, tool configs in
// commands, the execution view) holds the expansion, so the parser refuses a
// playbook past either limit before it builds any value from it.
//
// Both are about 100 times what real playbooks need: the largest of the 146 that
// NoETL's public corpus holds and this parser accepts (../shared/conformance,
// noetl-e2e included) expands to 920 nodes and 37,795 bytes of text, none uses an
// alias, and TestConformanceExpansionHeadroom keeps every one under a twentieth of
// each limit. A playbook without aliases that fits the API's 512 KiB limit never
// passes the byte limit; it passes the node limit only by packing more than
// 100,000 values into the playbook, data that belongs in the execute payload.
const (
	// MaxExpandedNodes bounds the expanded YAML nodes: every mapping, list and
	// scalar, mapping keys included.
	MaxExpandedNodes = 100_000
	// MaxExpandedBytes bounds the expanded scalar text: the bytes of every key and
	// scalar value.
	MaxExpandedBytes = 4 << 20
)

// Expansion is the size of a playbook once aliases, merge keys and workbook
// references are expanded: what MaxExpandedNodes and MaxExpandedBytes bound.
type Expansion struct {
	Nodes int
	Bytes int
}

func (x Expansion) plus(y Expansion) Expansion {
	return Expansion{Nodes: x.Nodes + y.Nodes, Bytes: x.Bytes + y.Bytes}
}

func (x Expansion) minus(y Expansion) Expansion {
	return Expansion{Nodes: x.Nodes - y.Nodes, Bytes: x.Bytes - y.Bytes}
}

// over names the limit x passes, or "".
func (x Expansion) over() string {
	switch {
	case x.Nodes > MaxExpandedNodes:
		return fmt.Sprintf("more than %d YAML nodes (limit MaxExpandedNodes)", MaxExpandedNodes)
	case x.Bytes > MaxExpandedBytes:
		return fmt.Sprintf("more than %d bytes of YAML text (limit MaxExpandedBytes, %d MiB)", MaxExpandedBytes, MaxExpandedBytes>>20)
	}
	return ""
}

// expander counts a document's expanded size in one pass over its source nodes:
// an anchored node is counted once and remembered, so an alias adds its size
// without walking it again, and the pass costs what the source holds, not what
// it expands to.
type expander struct {
	total Expansion
	sizes map[*yaml.Node]Expansion // anchored nodes counted so far
	open  map[*yaml.Node]bool      // anchored nodes being counted: an alias to one is a cycle
}

// expandError is where counting stopped: the node, its path from the root
// (segments innermost first, added as the walk unwinds), the limit passed (empty
// for a recursive alias) and what the node adds.
type expandError struct {
	node   *yaml.Node
	segs   []string
	limit  string
	detail string
}

func (e *expandError) message() string {
	if e.limit == "" {
		return e.detail
	}
	msg := "the playbook expands to " + e.limit + " once aliases and merge keys are expanded"
	if e.detail != "" {
		msg += "; " + e.detail
	}
	return msg + "; write the values out or make them smaller"
}

func (e *expandError) path() string {
	path := ""
	for _, s := range slices.Backward(e.segs) {
		path = join(path, s)
	}
	return path
}

func newExpander() *expander {
	return &expander{sizes: map[*yaml.Node]Expansion{}, open: map[*yaml.Node]bool{}}
}

func (x *expander) walk(n *yaml.Node) *expandError {
	if n.Kind == yaml.AliasNode {
		return x.alias(n)
	}
	start := x.total
	if n.Anchor != "" {
		x.open[n] = true
	}
	x.total = x.total.plus(Expansion{Nodes: 1, Bytes: len(n.Value)})
	if limit := x.total.over(); limit != "" {
		return &expandError{node: n, limit: limit}
	}
	for i, c := range n.Content {
		if err := x.walk(c); err != nil {
			if n.Kind == yaml.SequenceNode {
				err.segs = append(err.segs, fmt.Sprintf("[%d]", i))
			} else if n.Kind == yaml.MappingNode {
				err.segs = append(err.segs, keyText(n.Content[i&^1]))
			}
			return err
		}
	}
	if n.Anchor != "" {
		delete(x.open, n)
		x.sizes[n] = x.total.minus(start)
	}
	return nil
}

func (x *expander) alias(n *yaml.Node) *expandError {
	t := n.Alias
	if t == nil {
		return nil
	}
	if x.open[t] {
		return &expandError{node: n, detail: fmt.Sprintf("alias *%s refers to a node that contains it: a recursive alias never ends", n.Value)}
	}
	size, counted := x.sizes[t]
	if !counted {
		// YAML defines an anchor before its aliases, so this is not reached; if it
		// were, counting the target here is still right.
		return x.walk(t)
	}
	x.total = x.total.plus(size)
	if limit := x.total.over(); limit != "" {
		return &expandError{node: n, limit: limit, detail: fmt.Sprintf("the alias *%s here adds %d nodes and %d bytes", n.Value, size.Nodes, size.Bytes)}
	}
	return nil
}

// keyText is a mapping key as a path segment.
func keyText(k *yaml.Node) string {
	k = resolve(k)
	if k != nil && k.Kind == yaml.ScalarNode {
		return k.Value
	}
	return "?"
}

// expand checks the document's expanded size and records it; false (after an
// error naming the limit and where it was passed) when the playbook is too large
// to read.
func (p *parser) expand(root *yaml.Node) bool {
	p.anchors = newExpander()
	err := p.anchors.walk(root)
	p.pb.Expanded = p.anchors.total
	if err != nil {
		p.errf(err.node, err.path(), "%s", err.message())
		return false
	}
	return true
}

// chargeReference adds what the workbook reference ref copies: the expanded size
// of the entry's tool, target. false (after one error naming the limit) once the playbook
// passes a limit; further references then copy nothing.
func (p *parser) chargeReference(ref, target *yaml.Node, path string) bool {
	if p.overExpanded {
		return false
	}
	size, seen := p.entrySizes[target]
	if !seen {
		// Aliases inside the entry reuse the sizes expand remembered, so this costs
		// the entry's source, once.
		x := &expander{sizes: p.anchors.sizes, open: map[*yaml.Node]bool{}}
		_ = x.walk(target) // the whole document, this entry included, was counted without error
		size = x.total
		p.entrySizes[target] = size
	}
	p.pb.Expanded = p.pb.Expanded.plus(size)
	if limit := p.pb.Expanded.over(); limit != "" {
		p.overExpanded = true
		p.errf(ref, path, "the playbook expands to %s once workbook references are expanded (each copies its entry, here %d nodes and %d bytes); reference fewer or smaller workbook entries", limit, size.Nodes, size.Bytes)
		return false
	}
	return true
}
