package tmpl

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// Env is what a template sees when it renders.
type Env struct {
	Vars map[string]any // bindings; a missing key is undefined (R-T3)
	Now  time.Time      // what now() returns (R-T4): the triggering event's time
	// Budget is what the render may build; nil gives each Render its own full
	// budget. Pass one Budget to every render of one decision to bound them together.
	Budget *Budget
}

// Template is a compiled template. It is immutable and safe for concurrent use.
type Template struct {
	src     string
	text    any // src boxed once, so rendering a literal does not allocate
	literal bool
	native  bool
	prog    *vm.Program
	spans   []span
	roots   []string
	usesNow bool
	metered bool // some helper takes the Budget
	// unsupported lists functions the template calls that fail when rendered here.
	unsupported []string
	// machines recycles expr VMs, and the variable maps of templates that need
	// their own (now(), the budget), between renders: they are the main per-render
	// allocations. A machine is only ever used by one goroutine at a time.
	machines *sync.Pool
}

// machine is what one render runs on.
type machine struct {
	vm   vm.VM
	vars map[string]any
}

// Compile parses src and compiles it to an expr program. Errors are *Error.
func Compile(src string) (tp *Template, err error) {
	t := &Template{src: src, text: src}
	if !HasTemplate(src) {
		t.literal = true
		return t, nil
	}
	defer func() {
		// A bug in this package must fail one template, not the registering process
		// (rendering has the same net in expr's VM). Fuzzing treats "internal:" as a bug.
		if r := recover(); r != nil {
			tp, err = nil, newError(src, 0, fmt.Sprintf("internal: %v", r), nil)
		}
	}()
	if cerr := t.compile(); cerr != nil {
		var se *syntaxError
		if errors.As(cerr, &se) {
			return nil, newError(src, se.pos, se.msg, nil)
		}
		return nil, newError(src, 0, cerr.Error(), cerr)
	}
	return t, nil
}

func (t *Template) compile() error {
	segs, err := split(t.src)
	if err != nil {
		return err
	}
	g := &gen{roots: map[string]bool{}, used: map[string]bool{}}
	if out := nativeOutput(segs); out != nil {
		t.native = true
		e, err := parseOutput(out.toks)
		if err != nil {
			return err
		}
		if err := g.expr(e); err != nil {
			return err
		}
	} else {
		i := 0
		body, _, err := parseBody(segs, &i, nil, 0)
		if err != nil {
			return err
		}
		if err := g.body(body); err != nil {
			return err
		}
	}
	prog, err := expr.Compile(g.source(), g.options()...)
	if err != nil {
		// The generator produced code expr rejects: a bug here, not in the template.
		return errAt(0, "internal: generated code does not compile: "+err.Error())
	}
	t.prog, t.spans, t.usesNow, t.metered = prog, g.spans, g.usesNow, g.metered
	t.roots = sortedRoots(g.roots)
	t.unsupported = g.unsupported
	t.machines = &sync.Pool{New: func() any { return &machine{} }}
	return nil
}

// nativeOutput returns the only output tag when the template is that tag padded with
// whitespace, so it renders to the expression's native value.
func nativeOutput(segs []segment) *segment {
	var out *segment
	for i := range segs {
		switch segs[i].kind {
		case segOut:
			if out != nil {
				return nil
			}
			out = &segs[i]
		case segTag:
			return nil
		case segText:
			if !isBlank(segs[i].text) {
				return nil
			}
		}
	}
	return out
}

// Source is the template text.
func (t *Template) Source() string { return t.src }

// IsLiteral reports that there is nothing to evaluate: Render returns the text as is.
func (t *Template) IsLiteral() bool { return t.literal }

// IsNative reports that the template is exactly one {{ expr }} with only surrounding
// whitespace, so it renders to the expression's native value.
func (t *Template) IsNative() bool { return t.native }

// Roots lists, sorted and unique, the top-level names the template reads ({% for %}
// names excluded), so the store preloads only those (R-S2). The slice is shared; do not
// modify it.
func (t *Template) Roots() []string { return t.roots }

// Unsupported lists the functions the template calls that compile but always fail
// when rendered on this server (token()), so registration can warn about them.
func (t *Template) Unsupported() []string { return t.unsupported }

// errTokenUnsupported is token()'s render error.
var errTokenUnsupported = errors.New("token() is not supported by this server: it mints credential tokens from the keychain while rendering, and templates render where no secrets are held (R-N1); fetch the token in a tool step instead")

// Render evaluates the template. It returns the native value for a native template and
// a string otherwise. The result may share maps and lists with env.Vars; clone before
// mutating it. Errors are *Error.
func (t *Template) Render(env Env) (any, error) {
	if t.literal {
		return t.text, nil
	}
	m := t.machines.Get().(*machine)
	vars := env.Vars
	if t.usesNow || t.metered {
		// now() and the budget are read from the variables, under keys no name can
		// spell; the caller's map is not ours to change.
		if m.vars == nil {
			m.vars = make(map[string]any, len(env.Vars)+2)
		}
		vars = m.vars
		maps.Copy(vars, env.Vars)
		if t.usesNow {
			vars[nowKey] = env.Now
		}
		if t.metered {
			b := env.Budget
			if b == nil {
				b = NewBudget()
			}
			vars[budgetKey] = b
		}
	}
	out, err := m.vm.Run(t.prog, vars)
	// Drop references to this render's values before the machine waits in the pool.
	clear(m.vm.Variables)
	clear(m.vm.Stack)
	clear(m.vars)
	t.machines.Put(m)
	if err != nil {
		return nil, t.renderError(err)
	}
	// Output goes on to the store (commands, events, ctx), which cannot keep
	// a NUL ('\x00' is an escape of literals): the render fails here, naming
	// it, instead of the transaction.
	if err := jsonx.CheckText("output", out); err != nil {
		return nil, newError(t.src, 0, err.Error(), err)
	}
	return out, nil
}

// renderError locates a runtime error: expr reports the generated-code offset of the
// failing helper call, which the spans map back to the template.
func (t *Template) renderError(err error) *Error {
	var fe *file.Error
	if !errors.As(err, &fe) {
		return newError(t.src, 0, err.Error(), err)
	}
	i := sort.Search(len(t.spans), func(i int) bool { return t.spans[i].gen > fe.From }) - 1
	off := 0
	if i >= 0 {
		off = t.spans[i].tmpl
	}
	if fe.Prev != nil {
		return newError(t.src, off, fe.Prev.Error(), fe.Prev)
	}
	return newError(t.src, off, fe.Message, nil)
}
