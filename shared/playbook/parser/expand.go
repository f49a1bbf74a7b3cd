package parser

import (
	"errors"
	"fmt"
	"slices"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/tmpl"
)

// expander counts a document's expanded size in one pass over its source nodes:
// an anchored node is counted once and remembered, so an alias adds its size
// without walking it again, and the pass costs what the source holds, not what
// it expands to.
type expander struct {
	total playbook.Expansion
	sizes map[*yaml.Node]playbook.Expansion // anchored nodes counted so far
	open  map[*yaml.Node]bool               // anchored nodes being counted: an alias to one is a cycle
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
	return &expander{sizes: map[*yaml.Node]playbook.Expansion{}, open: map[*yaml.Node]bool{}}
}

// walk counts n. compiled is false where a template would not be compiled:
// mapping keys (python code is rendered, as NoETL renders it, so it counts);
// key is true for a mapping key.
func (x *expander) walk(n *yaml.Node, compiled, key bool) *expandError {
	if n.Kind == yaml.AliasNode {
		return x.alias(n, compiled, key)
	}
	start := x.total
	if n.Anchor != "" {
		x.open[n] = true
	}
	size := playbook.Expansion{Nodes: 1, Bytes: len(n.Value)}
	if compiled && n.Kind == yaml.ScalarNode && tmpl.HasTemplate(n.Value) {
		size.Templates, size.TemplateBytes = 1, len(n.Value)
		// Only the tags compile to programs; the text between them is kept as
		// written, so a long SQL or python text with one tag costs its length.
		if tags := tmpl.TagBytes(n.Value); tags > playbook.MaxTemplateTagBytes {
			return &expandError{node: n, detail: fmt.Sprintf("this template holds %d bytes inside {{ }} and {%% %%} tags, more than %d (limit playbook.MaxTemplateTagBytes, 64 KiB): compiled tags keep up to 660 bytes per byte; split the expression across fields or steps, or move the logic into a python step", tags, playbook.MaxTemplateTagBytes)}
		}
	}
	x.total = x.total.Plus(size)
	if limit := x.total.Over(); limit != "" {
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
		x.sizes[n] = x.total.Minus(start)
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
	x.total = x.total.Plus(size)
	if limit := x.total.Over(); limit != "" {
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
	p.pb.Expanded = p.pb.Expanded.Plus(size)
	if limit := p.pb.Expanded.Over(); limit != "" {
		p.overExpanded = true
		p.errf(ref, path, "the playbook holds %s once workbook references are expanded (each copies its entry, here %d nodes, %d bytes and %d templates); reference fewer or smaller workbook entries", limit, size.Nodes, size.Bytes, size.Templates)
		return false
	}
	return true
}
