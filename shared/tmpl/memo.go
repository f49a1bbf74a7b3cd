package tmpl

import (
	"errors"
	"fmt"
)

// Memo compiles each distinct text once and hands every later request the same
// Template (templates are immutable, so sharing one renders exactly as a fresh
// compile would). A parser uses one per playbook: YAML aliases and workbook
// references repeat a template many times over, and compiling each copy would
// cost what the expansion holds rather than what the source does. Not safe for
// concurrent use.
type Memo struct {
	done map[string]memoResult
	// Compiles counts the texts compiled; Cost sums their Template.Cost.
	Compiles int
	Cost     int
	// Limit, when positive, bounds Cost: once a compile passes it, that text
	// and every one after fail with an error wrapping ErrCostLimit, naming
	// LimitName, and nothing more is compiled.
	Limit     int
	LimitName string
}

// ErrCostLimit is wrapped by the errors of a Memo past its Limit.
var ErrCostLimit = errors.New("compiled templates over the limit")

type memoResult struct {
	t   *Template
	err *Error
}

// NewMemo is an empty Memo.
func NewMemo() *Memo { return &Memo{done: map[string]memoResult{}} }

// Compile is Compile(src), once per distinct src. Each caller of a text that
// failed gets its own copy of the *Error.
func (m *Memo) Compile(src string) (*Template, error) {
	r, ok := m.done[src]
	if !ok && m.Limit > 0 && m.Cost > m.Limit {
		return nil, m.overLimit(src)
	}
	if !ok {
		t, err := Compile(src)
		r.t = t
		if err != nil {
			r.err = err.(*Error)
		} else if !t.literal {
			m.Compiles++
			m.Cost += t.Cost()
		}
		if m.Limit > 0 && m.Cost > m.Limit {
			r = memoResult{err: m.overLimit(src)}
		}
		m.done[src] = r
	}
	if r.err != nil {
		cp := *r.err
		return nil, &cp
	}
	return r.t, nil
}

func (m *Memo) overLimit(src string) *Error {
	msg := fmt.Sprintf("the playbook's compiled templates keep about %d bytes, more than %d (limit %s); templates compile to programs up to 660 times their text (long chains of comparisons, or and filters cost the most): write fewer or simpler templates, or move the logic into a python step", m.Cost, m.Limit, m.LimitName)
	return newError(src, 0, msg, ErrCostLimit)
}

// CompileValue is CompileValue(v) with every template compiled through m.
func (m *Memo) CompileValue(v any) (*Value, []*Error) { return compileValueWith(v, m.Compile) }

// Cost estimates the bytes a compiled template keeps, from its program's
// length: expr's program holds its syntax tree and types besides the bytecode,
// about 160 bytes per instruction on top of about 1 KB (measured over shapes
// from one output tag to long chains of comparisons, which cost the most per
// byte of text: 660 bytes).
func (t *Template) Cost() int {
	if t.prog == nil {
		return len(t.src)
	}
	return 1024 + 160*len(t.prog.Bytecode) + len(t.src)
}
