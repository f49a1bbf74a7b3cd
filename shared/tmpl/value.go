package tmpl

import (
	"maps"
	"slices"
	"strconv"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// Value is a compiled JSON/YAML value: maps and lists recursively, keys literal, string
// leaves templates. It is immutable and safe for concurrent use.
type Value struct {
	lit   any       // a literal subtree, privately owned (set when tmpl, keys and elems are empty)
	tmpl  *Template // a templated string leaf
	path  string    // where this node sits, for errors
	isMap bool
	keys  []string // sorted map keys, parallel to elems
	elems []*Value // map values or list items
	roots []string
}

// CompileValue compiles every string leaf of v and returns ALL errors, each with its
// Path relative to v (params.offset, items[2].url), so registration reports everything
// at once. v is copied: later changes to it do not affect the Value.
func CompileValue(v any) (*Value, []*Error) { return compileValueWith(v, Compile) }

func compileValueWith(v any, compile func(string) (*Template, error)) (*Value, []*Error) {
	var errs []*Error
	val := compileValue(jsonx.Normalize(jsonx.Clone(v)), "", compile, &errs)
	if len(errs) > 0 {
		return nil, errs
	}
	return val, nil
}

func compileValue(v any, path string, compile func(string) (*Template, error), errs *[]*Error) *Value {
	switch x := v.(type) {
	case string:
		if !HasTemplate(x) {
			return &Value{lit: x, path: path}
		}
		t, err := compile(x)
		if err != nil {
			*errs = append(*errs, err.(*Error).withPath(path))
			return nil
		}
		return &Value{tmpl: t, path: path, roots: t.Roots()}
	case map[string]any:
		out := &Value{isMap: true, path: path, keys: slices.Sorted(maps.Keys(x))}
		for _, k := range out.keys {
			out.elems = append(out.elems, compileValue(x[k], jsonx.PathKey(path, k), compile, errs))
		}
		return out.collapse(x)
	case []any:
		out := &Value{path: path}
		for i, e := range x {
			out.elems = append(out.elems, compileValue(e, path+"["+strconv.Itoa(i)+"]", compile, errs))
		}
		return out.collapse(x)
	}
	return &Value{lit: v, path: path}
}

// collapse turns a container without templates into one literal, so rendering it is a
// single clone; otherwise it gathers the children's roots.
func (v *Value) collapse(orig any) *Value {
	set := map[string]bool{}
	literal := true
	for _, e := range v.elems {
		if e == nil {
			return v // a child failed to compile; the Value is discarded
		}
		if !e.IsLiteral() {
			literal = false
		}
		for _, r := range e.roots {
			set[r] = true
		}
	}
	if literal {
		return &Value{lit: orig, path: v.path}
	}
	v.roots = sortedRoots(set)
	return v
}

// Render renders every templated leaf and rebuilds the containers, so the result never
// shares maps or lists with the Value (it may share with env.Vars, as Template.Render
// does). Map keys are rendered in sorted order, so the first error is deterministic.
// All leaves draw from one budget: env.Budget, or a new one for this call.
func (v *Value) Render(env Env) (any, error) {
	if env.Budget == nil && !v.IsLiteral() {
		env.Budget = NewBudget()
	}
	return v.render(env)
}

func (v *Value) render(env Env) (any, error) {
	switch {
	case v.tmpl != nil:
		out, err := v.tmpl.Render(env)
		if err != nil {
			return nil, err.(*Error).withPath(v.path)
		}
		return out, nil
	case v.isMap:
		m := make(map[string]any, len(v.keys))
		for i, k := range v.keys {
			e, err := v.elems[i].render(env)
			if err != nil {
				return nil, err
			}
			m[k] = e
		}
		return m, nil
	case v.elems != nil:
		l := make([]any, len(v.elems))
		for i, e := range v.elems {
			r, err := e.render(env)
			if err != nil {
				return nil, err
			}
			l[i] = r
		}
		return l, nil
	}
	return jsonx.Clone(v.lit), nil
}

// Roots lists, sorted and unique, the top-level names the value's templates read.
func (v *Value) Roots() []string { return v.roots }

// Templates calls fn with every templated leaf and its path in the value
// (params.offset, items[2].url), in key order.
func (v *Value) Templates(fn func(path string, t *Template)) {
	if v == nil {
		return
	}
	if v.tmpl != nil {
		fn(v.path, v.tmpl)
	}
	for _, e := range v.elems {
		e.Templates(fn)
	}
}

// IsLiteral reports that the value holds no template: Render returns a copy of it.
func (v *Value) IsLiteral() bool { return v.tmpl == nil && !v.isMap && v.elems == nil }
