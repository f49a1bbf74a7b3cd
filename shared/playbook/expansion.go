package playbook

import "fmt"

// Limits on a playbook's expanded size: the YAML as the parser reads it, with every
// alias, merge key and workbook reference replaced by what it stands for. Aliases
// let a few hundred bytes stand for billions of nodes ("billion laughs"), and
// everything downstream (the workload in started, tool configs in
// commands, the execution view) holds the expansion, so the parser refuses a
// playbook past a limit before it builds any value from it. Templates get limits
// of their own: each distinct text is compiled once (an alias shares it), and a
// compiled template keeps about 1 KB plus 10 to 660 bytes per byte of its text
// for as long as the server caches the playbook; MaxTemplateCost bounds what
// they keep together, MaxTemplateTagBytes one template's tags.
//
// Each limit is far above what real playbooks need: of the 166 in NoETL's public
// corpus that this parser accepts (../shared/conformance, noetl-e2e included),
// none uses an alias, and the largest expand to 1,654 nodes, 61,734 bytes of
// text, 84 templates and 52,230 bytes of template text, the longest template is
// 10,993 bytes, the most inside one template's tags 1,103 bytes, and the most
// their compiled templates keep 467,561 bytes; TestConformanceExpansionHeadroom
// keeps every one under a twentieth of each limit. A playbook without aliases
// that fits the API's 512 KiB limit never passes a byte limit; it passes the
// others only by packing in more than 100,000 values (data belongs in the
// execute payload), 5,000 templates, 64 KiB of expression in one template, or
// templates that compile to programs over 32 MiB.
const (
	// MaxExpandedNodes bounds the expanded YAML nodes: every mapping, list and
	// scalar, mapping keys included.
	MaxExpandedNodes = 100_000
	// MaxExpandedBytes bounds the expanded scalar text: the bytes of every key and
	// scalar value.
	MaxExpandedBytes = 4 << 20
	// MaxTemplates bounds the expanded strings holding {{ or {% (python code
	// included: it is rendered, as NoETL renders it).
	MaxTemplates = 5_000
	// MaxTemplateBytes bounds the text of those strings.
	MaxTemplateBytes = 1 << 20
	// MaxTemplateTagBytes bounds the bytes inside one template's {{ }} and {% %}
	// tags (tmpl.TagBytes): compiling keeps up to 660 bytes per byte of them, and
	// a template is compiled whole before MaxTemplateCost can be checked. The
	// text between tags compiles to a constant, so it is not counted: a 1 MiB
	// literal with one tag keeps about 2 KB besides its text.
	MaxTemplateTagBytes = 64 << 10
)

// MaxTemplateCost bounds what a playbook's compiled templates keep
// (tmpl.Template.Cost, summed over distinct texts: an aliased template is
// compiled once). The text limits above count the expansion, not what it
// compiles to, which is 10 to 660 bytes per byte of text; this one counts the
// programs. NoETL's corpus keeps at most 467,561 bytes (55 templates). Checked
// as each template compiles, so a playbook passes it by at most one template
// (MaxTemplateTagBytes: about 10 MB for 64 KiB of comparisons in one tag).
const MaxTemplateCost = 32 << 20

// Expansion is the size of a playbook once aliases, merge keys and workbook
// references are expanded: what the limits above bound.
type Expansion struct {
	Nodes         int
	Bytes         int
	Templates     int
	TemplateBytes int
}

// Compiled is what compiling a playbook's templates kept: each distinct text
// is compiled once (tmpl.Memo), however often aliases and workbook references
// repeat it.
type Compiled struct {
	// Templates counts the texts compiled.
	Templates int
	// Cost estimates the bytes they keep (tmpl.Template.Cost).
	Cost int
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
