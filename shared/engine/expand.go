package engine

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/tmpl"
)

// Limits on a playbook's expanded size: the YAML as the parser reads it, with every
// alias, merge key and workbook reference replaced by what it stands for. Aliases
// let a few hundred bytes stand for billions of nodes ("billion laughs"), and
// everything downstream (the workload in playbook.started, tool configs in
// commands, the execution view) holds the expansion, so the parser refuses a
// playbook past a limit before it builds any value from it. Templates get limits
// of their own: each is compiled, and a compiled template costs about 20 KB to
// build and 2.5 KB to keep, plus 20 to 45 bytes per byte of its text, for as long
// as the server caches the playbook.
//
// Each limit is far above what real playbooks need: of the 146 in NoETL's public
// corpus that this parser accepts (../shared/conformance, noetl-e2e included),
// none uses an alias, and the largest expand to 920 nodes, 37,795 bytes of text,
// 55 templates and 34,585 bytes of template text; TestConformanceExpansionHeadroom
// keeps every one under a twentieth of each limit. A playbook without aliases that
// fits the API's 512 KiB limit never passes a byte limit; it passes the others
// only by packing in more than 100,000 values (data belongs in the execute
// payload) or 5,000 templates.
const (
	// MaxExpandedNodes bounds the expanded YAML nodes: every mapping, list and
	// scalar, mapping keys included.
	MaxExpandedNodes = 100_000
	// MaxExpandedBytes bounds the expanded scalar text: the bytes of every key and
	// scalar value.
	MaxExpandedBytes = 4 << 20
	// MaxTemplates bounds the expanded strings holding {{ or {% (python code, which
	// is never rendered, aside).
	MaxTemplates = 5_000
	// MaxTemplateBytes bounds the text of those strings.
	MaxTemplateBytes = 1 << 20
)

// Expansion is the size of a playbook once aliases, merge keys and workbook
// references are expanded: what the limits above bound.
type Expansion struct {
	Nodes         int
	Bytes         int
	Templates     int
	TemplateBytes int
}

func (x Expansion) plus(y Expansion) Expansion {
	return Expansion{Nodes: x.Nodes + y.Nodes, Bytes: x.Bytes + y.Bytes,
		Templates: x.Templates + y.Templates, TemplateBytes: x.TemplateBytes + y.TemplateBytes}
}

func (x Expansion) minus(y Expansion) Expansion {
	return Expansion{Nodes: x.Nodes - y.Nodes, Bytes: x.Bytes - y.Bytes,
		Templates: x.Templates - y.Templates, TemplateBytes: x.TemplateBytes - y.TemplateBytes}
}

// over names the limit x passes, or "".
func (x Expansion) over() string {
	switch {
	case x.Nodes > MaxExpandedNodes:
		return fmt.Sprintf("more than %d YAML nodes (limit MaxExpandedNodes)", MaxExpandedNodes)
	case x.Bytes > MaxExpandedBytes:
		return fmt.Sprintf("more than %d bytes of YAML text (limit MaxExpandedBytes, %d MiB)", MaxExpandedBytes, MaxExpandedBytes>>20)
	case x.Templates > MaxTemplates:
		return fmt.Sprintf("more than %d templates (limit MaxTemplates)", MaxTemplates)
	case x.TemplateBytes > MaxTemplateBytes:
		return fmt.Sprintf("more than %d bytes of template text (limit MaxTemplateBytes, %d MiB)", MaxTemplateBytes, MaxTemplateBytes>>20)
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
	msg := "the playbook holds " + e.limit + " once aliases and merge keys are expanded"
	if e.detail != "" {
		msg += "; " + e.detail
	}
	return msg + "; write aliased values out or make the playbook smaller"
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

// walk counts n. compiled is false where a template would not be compiled:
// mapping keys and python code; key is true for a mapping key.
func (x *expander) walk(n *yaml.Node, compiled, key bool) *expandError {
	if n.Kind == yaml.AliasNode {
		return x.alias(n, compiled, key)
	}
	start := x.total
	if n.Anchor != "" {
		x.open[n] = true
	}
	size := Expansion{Nodes: 1, Bytes: len(n.Value)}
	if compiled && n.Kind == yaml.ScalarNode && tmpl.HasTemplate(n.Value) {
		size.Templates, size.TemplateBytes = 1, len(n.Value)
	}
	x.total = x.total.plus(size)
	if limit := x.total.over(); limit != "" {
		return &expandError{node: n, limit: limit}
	}
	// Every value and key of a playbook goes on to the store (workload,
	// commands, events), which cannot keep a NUL; YAML writes one as \0 or \x00.
	if n.Kind == yaml.ScalarNode {
		var te *jsonx.TextError
		if errors.As(jsonx.CheckString("", n.Value), &te) {
			te.Key = key
			return &expandError{node: n, detail: te.Error()}
		}
	}
	for i, c := range n.Content {
		compiledChild := true
		if n.Kind == yaml.MappingNode {
			compiledChild = i%2 == 1
		}
		if err := x.walk(c, compiledChild, n.Kind == yaml.MappingNode && i%2 == 0); err != nil {
			if n.Kind == yaml.SequenceNode {
				err.segs = append(err.segs, fmt.Sprintf("[%d]", i))
			} else if n.Kind == yaml.MappingNode {
				err.segs = append(err.segs, keySegment(n.Content[i&^1]))
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

func (x *expander) alias(n *yaml.Node, compiled, key bool) *expandError {
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
		return x.walk(t, compiled, key)
	}
	x.total = x.total.plus(size)
	if limit := x.total.over(); limit != "" {
		return &expandError{node: n, limit: limit, detail: fmt.Sprintf("the alias *%s here adds %d nodes and %d bytes (%d templates)", n.Value, size.Nodes, size.Bytes, size.Templates)}
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

// keySegment is keyText as a path segment that never carries what the store
// cannot keep: such a key is written quoted, ["a\x00"].
func keySegment(k *yaml.Node) string {
	t := keyText(k)
	if jsonx.CheckString("", t) != nil {
		return "[" + strconv.Quote(t) + "]"
	}
	return t
}

// expand checks the document's expanded size and records it; false (after an
// error naming the limit and where it was passed) when the playbook is too large
// to read.
func (p *parser) expand(root *yaml.Node) bool {
	p.anchors = newExpander()
	err := p.anchors.walk(root, true, false)
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
		_ = x.walk(target, true, false) // the whole document, this entry included, was counted without error
		size = x.total
		p.entrySizes[target] = size
	}
	p.pb.Expanded = p.pb.Expanded.plus(size)
	if limit := p.pb.Expanded.over(); limit != "" {
		p.overExpanded = true
		p.errf(ref, path, "the playbook holds %s once workbook references are expanded (each copies its entry, here %d nodes, %d bytes and %d templates); reference fewer or smaller workbook entries", limit, size.Nodes, size.Bytes, size.Templates)
		return false
	}
	return true
}
