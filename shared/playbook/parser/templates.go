package parser

import (
	"errors"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/tmpl"
)

// compile compiles a value's templates, reporting each error at its full path.
func (p *parser) compile(n *yaml.Node, path string, v any) *tmpl.Value {
	cv, errs := p.memo.CompileValue(v)
	for _, e := range errs {
		p.templateErr(n, join(path, e.Path), e)
	}
	cv.Templates(func(at string, t *tmpl.Template) { p.unsupportedCalls(n, join(path, at), t) })
	return cv
}

// unsupportedCalls warns about template functions that register but fail when
// rendered here (token(), R-N1).
func (p *parser) unsupportedCalls(n *yaml.Node, path string, t *tmpl.Template) {
	for _, f := range t.Unsupported() {
		p.warnf(n, path, "%s is not supported by this server; rendering this template fails, and so does its step (R-N1)", f)
	}
}

func (p *parser) template(n *yaml.Node, path, what string) *tmpl.Template {
	s, ok := p.str(n, path, what)
	if !ok {
		return nil
	}
	t, err := p.memo.Compile(s)
	if err != nil {
		var te *tmpl.Error
		if errors.As(err, &te) {
			p.templateErr(n, path, te)
		} else {
			p.errf(n, path, "bad template: %v", err)
		}
		return nil
	}
	p.unsupportedCalls(n, path, t)
	return t
}

// templateErr reports a template that failed to compile; the compile cost
// limit, once passed, fails every later template too, and is reported once.
func (p *parser) templateErr(n *yaml.Node, path string, e *tmpl.Error) {
	if errors.Is(e, tmpl.ErrCostLimit) {
		if p.overCost {
			return
		}
		p.overCost = true
	}
	p.errf(n, path, "%s", templateError(e))
}

func templateError(e *tmpl.Error) string {
	c := *e
	c.Path = ""
	return c.Error()
}

// codeTemplate warns about a python code that reads as a template but does not
// compile: it runs as written (NoETL would fail rendering it).
func (p *parser) codeTemplate(n *yaml.Node, path, code string) {
	if !tmpl.HasTemplate(code) || tmpl.Renders(code) {
		return
	}
	_, err := tmpl.Compile(code)
	p.warnf(n, path, "code is rendered like other tool fields (as NoETL does), but this one is not a valid template (%v): it runs as written; write {{ '{{' }} for literal braces", err)
}

// codeWords are the identifiers a python code mentions (words and the words of its
// string literals): the names of the render context its `context` global gets
// (NoETL hands python the whole render context; this engine hands the part the
// code can name, so a command costs what its code reads, R-S2).
func codeWords(code string) []string {
	seen := map[string]bool{}
	start := -1
	for i := 0; i <= len(code); i++ {
		c := byte(0)
		if i < len(code) {
			c = code[i]
		}
		word := c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (start >= 0 && c >= '0' && c <= '9')
		switch {
		case word && start < 0:
			start = i
		case !word && start >= 0:
			seen[code[start:i]] = true
			start = -1
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// rawRoots lists the names a raw tool's templates read, `code` included when it is
// rendered. Errors were already reported when the parts were compiled.
func (p *parser) rawRoots(raw map[string]any, code string) []string {
	c := make(map[string]any, len(raw))
	for k, v := range raw {
		if k != "code" || tmpl.Renders(code) {
			c[k] = v
		}
	}
	v, errs := p.memo.CompileValue(c)
	if len(errs) > 0 || v == nil {
		return nil
	}
	return v.Roots()
}

// quoteTemplate writes s as a template string literal.
func quoteTemplate(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(s) + "'"
}
