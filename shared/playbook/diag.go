package playbook

import (
	"fmt"
	"strings"
)

// Severity of a Diagnostic.
type Severity string

const (
	SeverityError   Severity = "error"
	SeverityWarning Severity = "warning"
)

// Diagnostic is one problem found in a playbook, located by its YAML path
// (`workflow[3].next.arcs[0].step`) and, when known, the source line and column.
type Diagnostic struct {
	Severity Severity `json:"severity"`
	Path     string   `json:"path"`
	Line     int      `json:"line,omitempty"`
	Column   int      `json:"column,omitempty"`
	Message  string   `json:"message"`
}

func (d Diagnostic) String() string {
	var b strings.Builder
	if d.Path != "" {
		b.WriteString(d.Path)
		b.WriteString(": ")
	}
	b.WriteString(d.Message)
	if d.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", d.Line)
	}
	return b.String()
}

// Diagnostics is every problem a parse found, in document order.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error (warnings never block).
func (ds Diagnostics) HasErrors() bool {
	for _, d := range ds {
		if d.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Errors returns only the errors.
func (ds Diagnostics) Errors() Diagnostics { return ds.filter(SeverityError) }

// Warnings returns only the warnings.
func (ds Diagnostics) Warnings() Diagnostics { return ds.filter(SeverityWarning) }

func (ds Diagnostics) filter(s Severity) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}

// Err returns nil without errors, else an error listing every error.
func (ds Diagnostics) Err() error {
	errs := ds.Errors()
	if len(errs) == 0 {
		return nil
	}
	return &InvalidPlaybookError{Diagnostics: errs}
}

// InvalidPlaybookError carries every error a parse found.
type InvalidPlaybookError struct{ Diagnostics Diagnostics }

func (e *InvalidPlaybookError) Error() string {
	lines := make([]string, len(e.Diagnostics))
	for i, d := range e.Diagnostics {
		lines[i] = d.String()
	}
	return fmt.Sprintf("invalid playbook (%d errors): %s", len(lines), strings.Join(lines, "; "))
}
