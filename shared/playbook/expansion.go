package playbook

import "fmt"

// Limits on a playbook's expanded size: the YAML as the parser reads it, with every
// alias, merge key and workbook reference replaced by what it stands for. Aliases
// let a few hundred bytes stand for billions of nodes ("billion laughs"), and
// everything downstream (the workload in started, tool configs in
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

// Plus is x and y together.
func (x Expansion) Plus(y Expansion) Expansion {
	return Expansion{Nodes: x.Nodes + y.Nodes, Bytes: x.Bytes + y.Bytes,
		Templates: x.Templates + y.Templates, TemplateBytes: x.TemplateBytes + y.TemplateBytes}
}

// Minus is x without y.
func (x Expansion) Minus(y Expansion) Expansion {
	return Expansion{Nodes: x.Nodes - y.Nodes, Bytes: x.Bytes - y.Bytes,
		Templates: x.Templates - y.Templates, TemplateBytes: x.TemplateBytes - y.TemplateBytes}
}

// Over names the limit x passes, or "".
func (x Expansion) Over() string {
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
