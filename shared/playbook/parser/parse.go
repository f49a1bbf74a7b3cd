package parser

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/tmpl"
)

// Parse reads, validates and analyses a playbook. It reports every problem it
// finds, each with its YAML path; the playbook is nil when any is an error.
// Unknown keys are warnings, never silently dropped (dsl.md §1).
func Parse(src []byte) (*playbook.Playbook, playbook.Diagnostics) {
	p := &parser{pb: &playbook.Playbook{Source: src}, byName: map[string]*playbook.Step{}, entrySizes: map[*yaml.Node]playbook.Expansion{}, memo: tmpl.NewMemo()}
	p.memo.Limit, p.memo.LimitName = playbook.MaxTemplateCost, "playbook.MaxTemplateCost, 32 MiB"
	root, err := p.document(src)
	if err != nil || !p.expand(root) {
		return nil, p.diags
	}
	p.playbook(root)
	p.pb.Compiled = playbook.Compiled{Templates: p.memo.Compiles, Cost: p.memo.Cost}
	if p.diags.HasErrors() {
		return nil, p.diags
	}
	p.pb.Analyse()
	for _, s := range p.pb.Steps {
		if !p.pb.Graph().Reachable[s.Index] {
			p.warnf(nil, s.Path, "step %q can never be reached from start; it stays pending (R-W4)", s.Name)
		}
	}
	return p.pb, p.diags
}

type parser struct {
	pb *playbook.Playbook
	// byName holds the steps read so far, for duplicates and arc targets.
	byName   map[string]*playbook.Step
	diags    playbook.Diagnostics
	workbook map[string]*yaml.Node
	// anchors holds the expanded size of every anchored node (expand.go).
	anchors *expander
	// entrySizes caches each referenced workbook entry's expanded size.
	entrySizes map[*yaml.Node]playbook.Expansion
	// overExpanded is set once workbook references pass a limit.
	overExpanded bool
	// memo compiles each distinct template text once: aliases and workbook
	// references repeat them.
	memo *tmpl.Memo
	// overCost is set once compiling passed MaxTemplateCost.
	overCost bool
}

func (p *parser) add(sev playbook.Severity, n *yaml.Node, path, format string, args ...any) {
	d := playbook.Diagnostic{Severity: sev, Path: path, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		d.Line, d.Column = n.Line, n.Column
	}
	p.diags = append(p.diags, d)
}

func (p *parser) errf(n *yaml.Node, path, format string, args ...any) {
	p.add(playbook.SeverityError, n, path, format, args...)
}

func (p *parser) warnf(n *yaml.Node, path, format string, args ...any) {
	p.add(playbook.SeverityWarning, n, path, format, args...)
}
