package parser

import (
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/playbook"
)

// Document is a playbook's YAML read as one JSON value in jsonx's
// convention, aliases and merge keys expanded: what NoETL's catalog calls an
// entry's payload. It reads the document only (no validation, no template
// compiling), within the same expansion limits as Parse; nil with the problem
// when the text is not a YAML mapping or passes a limit.
func Document(src []byte) (map[string]any, playbook.Diagnostics) {
	p := &parser{pb: &playbook.Playbook{Source: src}}
	root, err := p.document(src)
	if err != nil || !p.expand(root) {
		return nil, p.diags
	}
	m, _ := p.value(root, "").(map[string]any)
	return m, p.diags
}

// FormField is one workload key as a form shows it (NoETL's ui_schema): its
// kind and default are read from the value the playbook declares, in document
// order, nested mappings as children.
type FormField struct {
	Name string
	// Kind is string, integer, number, boolean, object, array, null, or enum
	// (a `# ui:enum=[a,b]` directive).
	Kind    string
	Default any
	// From `# ui:` directives on the key's line (top-level keys only, as
	// NoETL reads them): description=…, secret, credential=<glob>, enum=[…].
	Description string
	Secret      bool
	Credential  string
	Options     []any
	Children    []FormField
}

// WorkloadForm infers the form of a playbook's workload: one field per
// top-level key, in the order written. A playbook without a workload has no
// fields; nil with the problem when the text cannot be read (Document's rules).
func WorkloadForm(src []byte) ([]FormField, playbook.Diagnostics) {
	p := &parser{pb: &playbook.Playbook{Source: src}}
	root, err := p.document(src)
	if err != nil || !p.expand(root) {
		return nil, p.diags
	}
	fields := []FormField{}
	for _, e := range p.fields(root, "", "the playbook") {
		if e.key == "workload" && resolve(e.value).Kind == yaml.MappingNode {
			fields = p.formFields(e.value, "workload", true)
		}
	}
	return fields, p.diags
}

func (p *parser) formFields(n *yaml.Node, path string, directives bool) []FormField {
	es := p.fields(n, path, "a mapping")
	out := make([]FormField, 0, len(es))
	for _, e := range es {
		fp := join(path, e.key)
		f := FormField{Name: e.key, Default: p.value(e.value, fp)}
		switch f.Default.(type) {
		case bool:
			f.Kind = "boolean"
		case int64:
			f.Kind = "integer"
		case float64:
			f.Kind = "number"
		case nil:
			f.Kind = "null"
		case map[string]any:
			f.Kind, f.Children = "object", p.formFields(e.value, fp, false)
		case []any:
			f.Kind = "array"
		default:
			f.Kind = "string"
		}
		if directives {
			applyDirectives(&f, e.keyN.LineComment+" "+resolve(e.value).LineComment)
		}
		out = append(out, f)
	}
	return out
}

// applyDirectives reads `# ui:name[=value]` directives from a line's comment:
// several may share a line; a value runs to the next #.
func applyDirectives(f *FormField, comment string) {
	for _, part := range strings.Split(comment, "#") {
		name, ok := strings.CutPrefix(strings.TrimSpace(part), "ui:")
		if !ok {
			continue
		}
		name, value, _ := strings.Cut(name, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch name {
		case "description":
			f.Description = unquote(value)
		case "secret":
			f.Secret = true
		case "credential":
			f.Credential = unquote(value)
		case "enum":
			f.Kind, f.Children, f.Options = "enum", nil, []any{}
			list := strings.TrimSuffix(strings.TrimPrefix(value, "["), "]")
			for _, o := range strings.Split(list, ",") {
				if o = unquote(strings.TrimSpace(o)); o != "" {
					f.Options = append(f.Options, o)
				}
			}
		}
	}
}

func unquote(s string) string {
	if len(s) >= 2 && (s[0] == '"' || s[0] == '\'') && s[len(s)-1] == s[0] {
		return s[1 : len(s)-1]
	}
	return s
}
