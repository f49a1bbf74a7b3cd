package tmpl

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
)

// The Jinja AST compiles to expr source. Names of the generated code never collide with
// template names because they start with '$', which Jinja names cannot contain:
//
//	$name(…)  a helper from the helpers table, registered with expr.Function
//	$_N       a let variable (and/or operands, loop variables, chained comparisons)
//	$$N       constant N, patched into the AST as a typed value (int64 stays int64,
//	          strings keep their exact bytes) instead of being re-quoted as source
//
// Control flow stays native expr: `let`, `c ? a : b`, `&&`, `!` and the `map` builtin
// for {% for %}, so short-circuiting and Jinja's operand-returning and/or cost no
// helper call.

// span maps a helper call in the generated source to the template offset it came from,
// so a runtime error reported by expr at that call points into the template.
type span struct{ gen, tmpl int }

type gen struct {
	b       strings.Builder
	used    map[string]bool // helpers the code calls; only those are registered
	consts  []any
	spans   []span
	roots   map[string]bool
	scopes  []map[string]string // {% for %} names → let variables, innermost last
	nvars   int
	usesNow bool
	metered bool // some helper call takes the render's Budget
	ops     int  // helper calls emitted since the innermost loop body began
	// unsupported names the functions the template calls that compile but cannot
	// run here (token()), so registration can warn.
	unsupported []string
}

// budgetVar holds the render's Budget in generated code; every helper that is not
// free gets it as its first argument.
const budgetVar = "$b"

func (g *gen) w(s string) { g.b.WriteString(s) }

// call opens a helper call and records where it came from.
func (g *gen) call(helper string, pos int) {
	g.spans = append(g.spans, span{gen: g.b.Len(), tmpl: pos})
	g.open(helper)
}

// open opens a call of a helper that cannot fail. A helper that is not flat gets
// the render's Budget first, so no call can skip the accounting.
func (g *gen) open(helper string) {
	g.ops++
	g.used[helper] = true
	g.w(helper)
	g.w("(")
	if !helpers[helper].flat {
		g.metered = true
		g.w(budgetVar + ", ")
	}
}

func (g *gen) newVar() string {
	g.nvars++
	return "$_" + strconv.Itoa(g.nvars)
}

func (g *gen) constant(v any) {
	switch x := v.(type) {
	case nil:
		g.w("nil")
	case bool:
		g.w(strconv.FormatBool(x))
	default:
		g.w("$$" + strconv.Itoa(len(g.consts)))
		g.consts = append(g.consts, v)
	}
}

func (g *gen) local(name string) (string, bool) {
	for i := len(g.scopes) - 1; i >= 0; i-- {
		if v, ok := g.scopes[i][name]; ok {
			return v, true
		}
	}
	return "", false
}

// exprWords are expr keywords a Jinja name may spell; they are read through $env.
var exprWords = map[string]bool{
	"nil": true, "let": true, "matches": true, "contains": true, "startsWith": true, "endsWith": true,
}

func (g *gen) name(n string) {
	if v, ok := g.local(n); ok {
		g.w(v)
		return
	}
	g.roots[n] = true
	if exprWords[n] {
		g.w(`$env["` + n + `"]`)
		return
	}
	// A plain identifier compiles to expr's fast map load; a missing key is nil
	// (AllowUndefinedVariables), which is what an undefined name renders as.
	g.w(n)
}

func (g *gen) list(nodes []node) error {
	for i, n := range nodes {
		if i > 0 {
			g.w(", ")
		}
		if err := g.expr(n); err != nil {
			return err
		}
	}
	return nil
}

// helper emits helper(args…) for a node.
func (g *gen) helper(name string, pos int, args ...node) error {
	g.call(name, pos)
	if err := g.list(args); err != nil {
		return err
	}
	g.w(")")
	return nil
}

var arith = map[string]string{"+": "$add", "-": "$sub", "*": "$mul", "/": "$div", "//": "$floordiv", "%": "$mod", "**": "$pow"}

func (g *gen) expr(n node) error {
	switch n := n.(type) {
	case *constExpr:
		g.constant(n.val)
	case *nameExpr:
		g.name(n.name)
	case *listExpr:
		return g.helper("$list", n.pos, n.items...)
	case *dictExpr:
		args := make([]node, 0, 2*len(n.keys))
		for i := range n.keys {
			args = append(args, n.keys[i], n.vals[i])
		}
		return g.helper("$dict", n.pos, args...)
	case *getExpr:
		// a.b[c].d becomes one $get(a, "b", c, "d").
		var keys []node
		var base node = n
		for {
			ge, ok := base.(*getExpr)
			if !ok {
				break
			}
			keys = append(keys, ge.key)
			base = ge.obj
		}
		for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
			keys[i], keys[j] = keys[j], keys[i]
		}
		get := "$get"
		if slices.ContainsFunc(keys, longKey) {
			get = "$getw"
		}
		return g.helper(get, n.pos, append([]node{base}, keys...)...)
	case *sliceExpr:
		return g.helper("$slice", n.pos, n.obj, orNil(n.lo, n.pos), orNil(n.hi, n.pos), orNil(n.step, n.pos))
	case *unaryExpr:
		switch n.op {
		case "not":
			g.w("!")
			return g.helper("$t", n.pos, n.x)
		case "-":
			// Fold negative literals (xs[-1]) into constants.
			if c, ok := n.x.(*constExpr); ok {
				switch v := c.val.(type) {
				case int64:
					g.constant(-v)
					return nil
				case float64:
					g.constant(-v)
					return nil
				}
			}
			return g.helper("$neg", n.pos, n.x)
		}
		return g.helper("$pos", n.pos, n.x)
	case *binExpr:
		if n.op == "and" || n.op == "or" {
			return g.andOr(n)
		}
		return g.helper(arith[n.op], n.pos, n.l, n.r)
	case *catExpr:
		return g.helper("$cat", n.pos, n.parts...)
	case *cmpExpr:
		return g.compare(n)
	case *condExpr:
		g.w("(")
		if err := g.helper("$t", n.pos, n.test); err != nil {
			return err
		}
		g.w(" ? ")
		if err := g.expr(n.then); err != nil {
			return err
		}
		g.w(" : ")
		if err := g.expr(orNil(n.els, n.pos)); err != nil {
			return err
		}
		g.w(")")
	case *callExpr:
		return g.callGlobal(n)
	case *filterExpr:
		return g.filter(n)
	case *testExpr:
		return g.test(n)
	case *methodExpr:
		return g.method(n)
	default:
		return errAt(n.at(), fmt.Sprintf("internal: unexpected node %T", n))
	}
	return nil
}

// maxFlatKey bounds the constant keys a flat $get reads: a lookup hashes its
// key and indexing a string walks to its character, so only short constants
// cost a step whatever the value.
const maxFlatKey = 64

// longKey reports that a flat $get may not read key k: only a constant string
// of at most maxFlatKey bytes or a constant index from 0 to maxFlatKey is short.
func longKey(k node) bool {
	c, ok := k.(*constExpr)
	if !ok {
		return true
	}
	switch v := c.val.(type) {
	case string:
		return len(v) > maxFlatKey
	case int64:
		return v < 0 || v > maxFlatKey
	}
	return true
}

func orNil(n node, pos int) node {
	if n == nil {
		return &constExpr{pos: pos}
	}
	return n
}

// andOr returns an operand as Jinja does (R-T1): `a or b` is a if a is truthy, else b;
// b is evaluated only when needed.
func (g *gen) andOr(n *binExpr) error {
	v := g.newVar()
	g.w("(let " + v + " = ")
	if err := g.expr(n.l); err != nil {
		return err
	}
	g.w("; ")
	g.call("$t", n.pos)
	g.w(v + ") ? ")
	if n.op == "and" {
		if err := g.expr(n.r); err != nil {
			return err
		}
		g.w(" : " + v + ")")
		return nil
	}
	g.w(v + " : ")
	if err := g.expr(n.r); err != nil {
		return err
	}
	g.w(")")
	return nil
}

var cmpHelpers = map[string]string{
	"==": "$eq", "!=": "!$eq", "<": "$lt", "<=": "$le", ">": "$gt", ">=": "$ge", "in": "$in", "not in": "!$in",
}

// compare handles chains as Python does: a < b < c is a < b and b < c, with b
// evaluated once.
func (g *gen) compare(n *cmpExpr) error {
	emitOp := func(k int, left, right func() error) error {
		h := cmpHelpers[n.ops[k]]
		if h[0] == '!' {
			g.w("!")
			h = h[1:]
		}
		g.call(h, n.poss[k])
		if err := left(); err != nil {
			return err
		}
		g.w(", ")
		if err := right(); err != nil {
			return err
		}
		g.w(")")
		return nil
	}
	left := func() error { return g.expr(n.first) }
	opened := 0
	for k := range n.ops {
		if k == len(n.ops)-1 {
			if err := emitOp(k, left, func() error { return g.expr(n.rest[k]) }); err != nil {
				return err
			}
			break
		}
		v := g.newVar()
		g.w("(let " + v + " = ")
		opened++
		if err := g.expr(n.rest[k]); err != nil {
			return err
		}
		g.w("; ")
		if err := emitOp(k, left, func() error { g.w(v); return nil }); err != nil {
			return err
		}
		g.w(" && ")
		left = func() error { g.w(v); return nil }
	}
	g.w(strings.Repeat(")", opened))
	return nil
}

func (g *gen) callGlobal(n *callExpr) error {
	if len(n.kw) > 0 {
		return errAt(n.kw[0].pos, n.fn+"() takes no keyword arguments")
	}
	switch n.fn {
	case "now":
		if len(n.args) != 0 {
			return errAt(n.pos, "now() takes no arguments")
		}
		g.usesNow = true
		g.call("$now", n.pos)
		g.w("$env)")
		return nil
	case "token":
		// NoETL's token(<keychain entry>) mints a credential token (OAuth) while
		// rendering. Here templates render in the pure engine, which holds no
		// secrets, so the call compiles (the playbook registers, R-N1) and fails
		// when rendered, naming the feature.
		if len(n.args) != 1 {
			return errAt(n.pos, "token() takes exactly one argument, the keychain entry")
		}
		g.unsupported = append(g.unsupported, "token()")
		return g.helper("$token", n.pos, n.args...)
	case "range":
		if len(n.args) < 1 || len(n.args) > 3 {
			return errAt(n.pos, "range() takes 1 to 3 arguments")
		}
		return g.helper("$range", n.pos, n.args...)
	default: // len
		if len(n.args) != 1 {
			return errAt(n.pos, "len() takes exactly one argument")
		}
		return g.helper(filters["length"].helper, n.pos, n.args[0])
	}
}

func (g *gen) filter(n *filterExpr) error {
	if n.name == "map" {
		return g.mapFilter(n)
	}
	f, ok := filters[n.name]
	if !ok {
		return errAt(n.pos, fmt.Sprintf("unknown filter '%s'", n.name))
	}
	args, err := bindArgs("filter '"+n.name+"'", f.params, f.defs, n.args, n.kw, n.pos)
	if err != nil {
		return err
	}
	return g.helper(f.helper, n.pos, append([]node{n.x}, args...)...)
}

// mapFilter compiles map(attribute='x', default=v) or map('filter', args…); the named
// filter is checked here so a typo fails at registration.
func (g *gen) mapFilter(n *filterExpr) error {
	if len(n.args) == 0 {
		args, err := bindArgs("filter 'map'", []string{"attribute", "default"}, []any{required, nil}, nil, n.kw, n.pos)
		if err != nil {
			return err
		}
		return g.helper("$mapattr", n.pos, n.x, args[0], args[1])
	}
	c, _ := n.args[0].(*constExpr)
	var name string
	if c != nil {
		name, _ = c.val.(string)
	}
	if name == "" {
		return errAt(n.args[0].at(), "map needs a filter name or attribute=")
	}
	f, ok := filters[name]
	if !ok || name == "map" {
		return errAt(n.args[0].at(), fmt.Sprintf("unknown filter '%s'", name))
	}
	args, err := bindArgs("filter '"+name+"'", f.params, f.defs, n.args[1:], n.kw, n.pos)
	if err != nil {
		return err
	}
	return g.helper("$mapfilter", n.pos, append([]node{n.x, c}, args...)...)
}

func (g *gen) test(n *testExpr) error {
	if n.name == "defined" || n.name == "undefined" {
		if len(n.args) > 0 {
			return errAt(n.pos, "test '"+n.name+"' takes no arguments")
		}
		if (n.name == "defined") != n.neg {
			return g.defined(n)
		}
		g.w("!(")
		if err := g.defined(n); err != nil {
			return err
		}
		g.w(")")
		return nil
	}
	t, ok := tests[n.name]
	if !ok {
		return errAt(n.pos, fmt.Sprintf("unknown test '%s'", n.name))
	}
	if len(n.args) != t.nargs {
		return errAt(n.pos, fmt.Sprintf("test '%s' takes %d argument(s), got %d", n.name, t.nargs, len(n.args)))
	}
	if n.neg {
		g.w("!")
	}
	return g.helper("$is_"+n.name, n.pos, append([]node{n.x}, n.args...)...)
}

// defined is R-T3: a name or path is defined when the binding or key exists, even with
// a null value; a loop variable always is. Any other expression is defined when not null.
func (g *gen) defined(n *testExpr) error {
	switch x := n.x.(type) {
	case *nameExpr:
		if _, ok := g.local(x.name); ok {
			g.w("true")
			return nil
		}
		g.roots[x.name] = true
		g.call("$has", n.pos)
		g.w("$env, ")
		g.constant(x.name)
		g.w(")")
		return nil
	case *getExpr:
		return g.helper("$has", n.pos, x.obj, x.key)
	}
	g.w("!")
	return g.helper("$is_none", n.pos, n.x)
}

func (g *gen) method(n *methodExpr) error {
	m, ok := methods[n.name]
	if !ok {
		return errAt(n.pos, fmt.Sprintf("unknown method '%s'", n.name))
	}
	if len(n.args) < m.min || len(n.args) > m.max {
		return errAt(n.pos, fmt.Sprintf("method '%s' takes %d to %d argument(s), got %d", n.name, m.min, m.max, len(n.args)))
	}
	if n.name == "get" {
		return g.helper("$lookup", n.pos, append([]node{n.obj}, n.args...)...)
	}
	return g.helper("$method", n.pos, append([]node{n.obj, &constExpr{val: n.name, pos: n.pos}}, n.args...)...)
}

// body compiles the parts of a mixed template into one string: $cat(parts…).
func (g *gen) body(nodes []tnode) error {
	if len(nodes) == 0 {
		g.constant("")
		return nil
	}
	if t, ok := nodes[0].(*tText); ok && len(nodes) == 1 {
		g.constant(t.s)
		return nil
	}
	g.open("$cat")
	for i, n := range nodes {
		if i > 0 {
			g.w(", ")
		}
		var err error
		switch n := n.(type) {
		case *tText:
			g.constant(n.s)
		case *tOut:
			err = g.expr(n.e)
		case *tIf:
			err = g.ifBlock(n)
		case *tFor:
			err = g.forBlock(n)
		}
		if err != nil {
			return err
		}
	}
	g.w(")")
	return nil
}

func (g *gen) ifBlock(n *tIf) error {
	for k, c := range n.conds {
		g.w("(")
		if err := g.helper("$t", c.at(), c); err != nil {
			return err
		}
		g.w(" ? ")
		if err := g.body(n.bodies[k]); err != nil {
			return err
		}
		g.w(" : ")
	}
	if err := g.body(n.els); err != nil {
		return err
	}
	g.w(strings.Repeat(")", len(n.conds)))
	return nil
}

// forBlock compiles {% for %} to expr's map over the items, each iteration binding the
// loop names as let variables, then joins the rendered bodies.
func (g *gen) forBlock(n *tFor) error {
	items := g.newVar()
	g.w("(let " + items + " = ")
	if err := g.helper("$iter", n.pos, n.iter); err != nil {
		return err
	}
	g.w("; ")
	if n.els != nil {
		g.open("$empty")
		g.w(items + ") ? ")
		if err := g.body(n.els); err != nil {
			return err
		}
		g.w(" : ")
	}
	g.open("$joins")
	g.w("map(" + items + ", ")
	// What one iteration runs is counted from here: its helper calls, each
	// charged as a unit of work (MaxRenderWork) by $acc, so a long body of
	// cheap operations cannot multiply the iterations allowed. Inner loops
	// charge their own iterations.
	outer := g.ops
	g.ops = 0
	scope := map[string]string{}
	if refersToLoop(n.body) {
		v := g.newVar()
		g.w("let " + v + " = ")
		g.open("$loop")
		g.w("#index, " + items + "); ")
		scope["loop"] = v
	}
	if len(n.names) == 1 {
		v := g.newVar()
		g.w("let " + v + " = #; ")
		scope[n.names[0]] = v
	} else {
		item := g.newVar()
		g.w("let " + item + " = #; ")
		for i, name := range n.names {
			v := g.newVar()
			g.w("let " + v + " = ")
			g.call("$unpack", n.pos)
			g.w(item + ", ")
			g.constant(int64(len(n.names)))
			g.w(", ")
			g.constant(int64(i))
			g.w("); ")
			scope[name] = v
		}
	}
	g.scopes = append(g.scopes, scope)
	g.call("$acc", n.pos)
	cost := len(g.consts)
	g.constant(int64(0)) // the body's helper calls, known once it is compiled
	g.w(", ")
	err := g.body(n.body)
	g.scopes = g.scopes[:len(g.scopes)-1]
	if err != nil {
		return err
	}
	g.consts[cost] = int64(g.ops)
	g.ops = outer
	g.w("))))")
	return nil
}

// source is the generated program: the body, preceded by the binding of the
// render's Budget when a helper takes it. Spans move with the body.
func (g *gen) source() string {
	if !g.metered {
		return g.b.String()
	}
	prefix := "let " + budgetVar + " = " + budgetKey + "; "
	for i := range g.spans {
		g.spans[i].gen += len(prefix)
	}
	return prefix + g.b.String()
}

// refersToLoop reports whether a loop body reads `loop`, so loops that do not pay
// nothing for it.
func refersToLoop(body []tnode) bool {
	found := false
	var visit func(n node)
	visit = func(n node) {
		if found || n == nil {
			return
		}
		walkExpr(n, func(x node) {
			if nm, ok := x.(*nameExpr); ok && nm.name == "loop" {
				found = true
			}
		})
	}
	var walkBody func([]tnode)
	walkBody = func(nodes []tnode) {
		for _, t := range nodes {
			switch t := t.(type) {
			case *tOut:
				visit(t.e)
			case *tIf:
				for i, c := range t.conds {
					visit(c)
					walkBody(t.bodies[i])
				}
				walkBody(t.els)
			case *tFor:
				visit(t.iter)
				walkBody(t.body)
				walkBody(t.els)
			}
		}
	}
	walkBody(body)
	return found
}

// walkExpr calls fn on n and every node below it.
func walkExpr(n node, fn func(node)) {
	if n == nil {
		return
	}
	fn(n)
	each := func(ns ...node) {
		for _, c := range ns {
			walkExpr(c, fn)
		}
	}
	switch n := n.(type) {
	case *listExpr:
		each(n.items...)
	case *dictExpr:
		each(n.keys...)
		each(n.vals...)
	case *getExpr:
		each(n.obj, n.key)
	case *sliceExpr:
		each(n.obj, n.lo, n.hi, n.step)
	case *unaryExpr:
		each(n.x)
	case *binExpr:
		each(n.l, n.r)
	case *catExpr:
		each(n.parts...)
	case *cmpExpr:
		each(n.first)
		each(n.rest...)
	case *condExpr:
		each(n.test, n.then, n.els)
	case *callExpr:
		each(n.args...)
		for _, k := range n.kw {
			each(k.val)
		}
	case *filterExpr:
		each(n.x)
		each(n.args...)
		for _, k := range n.kw {
			each(k.val)
		}
	case *testExpr:
		each(n.x)
		each(n.args...)
	case *methodExpr:
		each(n.obj)
		each(n.args...)
	}
}

// constPatch replaces the $$N placeholders with their typed constants.
type constPatch struct{ consts []any }

func (p constPatch) Visit(n *ast.Node) {
	id, ok := (*n).(*ast.IdentifierNode)
	if !ok || !strings.HasPrefix(id.Value, "$$") {
		return
	}
	i, err := strconv.Atoi(id.Value[2:])
	if err != nil || i < 0 || i >= len(p.consts) {
		return
	}
	ast.Patch(n, &ast.ConstantNode{Value: p.consts[i]})
}

// fn1 and fn2 adapt helpers of one and two values that take no Budget.
func fn1(f func(any) (any, error)) func(*Budget, []any) (any, error) {
	return func(_ *Budget, a []any) (any, error) { return f(a[0]) }
}

func fn2(f func(any, any) (any, error)) func(*Budget, []any) (any, error) {
	return func(_ *Budget, a []any) (any, error) { return f(a[0], a[1]) }
}

// baseOptions configure every compile: a map environment so names compile to fast
// lookups, undefined names as nil, no builtins but map (so no expr name can shadow a
// template name) and no optimizer (it could fold values into shared constants).
func baseOptions() []expr.Option {
	return []expr.Option{
		expr.Env(map[string]any{}),
		expr.AllowUndefinedVariables(),
		expr.DisableAllBuiltins(),
		expr.EnableBuiltin("map"),
		expr.Optimize(false),
		expr.MaxNodes(1 << 20),
	}
}

// flat, free and metered make the three kinds of helper table entries (see
// helper.free and helper.flat).
func flat(fn func(*Budget, []any) (any, error)) helper    { return helper{fn: fn, free: true, flat: true} }
func free(fn func(*Budget, []any) (any, error)) helper    { return helper{fn: fn, free: true} }
func metered(fn func(*Budget, []any) (any, error)) helper { return helper{fn: fn} }

// helpers are the functions generated code calls, registered with expr.Function per
// compile (only those a template uses). Built once and only read.
var helpers = func() map[string]helper {
	h := map[string]helper{
		"$t":    flat(func(_ *Budget, a []any) (any, error) { return Truthy(a[0]), nil }),
		"$get":  flat(func(_ *Budget, a []any) (any, error) { return getPath(a[0], a[1:]), nil }),
		"$getw": free(func(b *Budget, a []any) (any, error) { return getPathW(b, a[0], a[1:]) }),
		"$has": free(func(b *Budget, a []any) (any, error) {
			n := keyWork(a[0], a[1])
			if s, ok := a[0].(string); ok {
				n = 1 + int64(len(s)) // has counts the characters
			}
			return has(a[0], a[1]), b.read(n)
		}),
		"$slice": metered(func(b *Budget, a []any) (any, error) {
			if s, ok := a[0].(string); ok {
				if err := b.readText(s); err != nil { // slicing walks the whole string
					return nil, err
				}
			}
			return slice(a[0], a[1], a[2], a[3])
		}),
		"$neg":      flat(fn1(neg)),
		"$pos":      flat(fn1(plus)),
		"$add":      metered(fn2(add)),
		"$sub":      flat(fn2(sub)),
		"$mul":      metered(func(b *Budget, a []any) (any, error) { return mul(b, a[0], a[1]) }),
		"$div":      flat(fn2(div)),
		"$floordiv": flat(fn2(floorDiv)),
		"$mod":      flat(fn2(mod)),
		"$pow":      flat(fn2(pow)),
		"$cat":      metered(func(_ *Budget, a []any) (any, error) { return cat(a), nil }),
		"$eq": free(func(b *Budget, a []any) (any, error) {
			var n int64
			eq := equalN(a[0], a[1], &n)
			return eq, b.read(n)
		}),
		"$lt":     free(cmpFn("<", func(c int) bool { return c < 0 })),
		"$le":     free(cmpFn("<=", func(c int) bool { return c <= 0 })),
		"$gt":     free(cmpFn(">", func(c int) bool { return c > 0 })),
		"$ge":     free(cmpFn(">=", func(c int) bool { return c >= 0 })),
		"$in":     free(func(b *Budget, a []any) (any, error) { return contains(b, a[0], a[1]) }),
		"$list":   metered(func(_ *Budget, a []any) (any, error) { return append([]any{}, a...), nil }),
		"$dict":   metered(func(_ *Budget, a []any) (any, error) { return dict(a) }),
		"$now":    metered(func(_ *Budget, a []any) (any, error) { return nowText(a[0]) }),
		"$range":  metered(func(b *Budget, a []any) (any, error) { return rangeList(b, a) }),
		"$token":  flat(func(_ *Budget, _ []any) (any, error) { return nil, errTokenUnsupported }),
		"$method": metered(func(b *Budget, a []any) (any, error) { return callMethod(b, a[0], a[1].(string), a[2:]) }),
		"$lookup": free(func(b *Budget, a []any) (any, error) {
			if err := b.read(keyWork(nil, a[1])); err != nil {
				return nil, err
			}
			return lookup(a[0], a[1], a[2:])
		}),
		"$iter": metered(func(b *Budget, a []any) (any, error) {
			items, err := iterate(b, a[0])
			if err == nil {
				items = orEmpty(items)
			}
			return items, err
		}),
		"$empty": flat(func(_ *Budget, a []any) (any, error) { l, _ := a[0].([]any); return len(l) == 0, nil }),
		"$joins": metered(func(_ *Budget, a []any) (any, error) { l, _ := a[0].([]any); return cat(l), nil }),
		// loop's map is bookkeeping of one iteration, bounded by MaxLoopIterations.
		"$loop": flat(func(_ *Budget, a []any) (any, error) {
			i, _ := a[0].(int)
			l, _ := a[1].([]any)
			return loopInfo(i, len(l)), nil
		}),
		"$unpack": flat(func(_ *Budget, a []any) (any, error) {
			n, _ := a[1].(int64)
			i, _ := a[2].(int64)
			return unpack(a[0], int(n), int(i))
		}),
		// acc counts an iteration and the helper calls its body may make (one unit
		// of work each), and hands the body on (charged where it was built).
		"$acc": metered(func(b *Budget, a []any) (any, error) {
			ops, _ := a[0].(int64)
			s, _ := a[1].(string)
			if err := b.iterate(); err != nil {
				return nil, err
			}
			return s, b.read(ops)
		}),
		"$mapattr":   metered(func(b *Budget, a []any) (any, error) { return mapAttr(b, a[0], a[1], a[2]) }),
		"$mapfilter": metered(func(b *Budget, a []any) (any, error) { return mapFilter(b, a[0], a[1].(string), a[2:]) }),
	}
	for _, f := range filters {
		h[f.helper] = f.asHelper()
	}
	for name, t := range tests {
		if t.text {
			// The test reads a whole string (lower, upper).
			h["$is_"+name] = free(func(b *Budget, a []any) (any, error) {
				if s, ok := a[0].(string); ok {
					if err := b.readText(s); err != nil {
						return nil, err
					}
				}
				return t.fn(a[0], a[1:])
			})
			continue
		}
		h["$is_"+name] = flat(func(_ *Budget, a []any) (any, error) { return t.fn(a[0], a[1:]) })
	}
	return h
}()

func cmpFn(op string, want func(int) bool) func(*Budget, []any) (any, error) {
	return func(b *Budget, a []any) (any, error) {
		var n int64
		c, err := compareN(op, a[0], a[1], &n)
		if err == nil {
			err = b.read(n)
		}
		if err != nil {
			return nil, err
		}
		return want(c), nil
	}
}

// register adapts a helper to expr.Function. A helper that is not flat receives
// the render's Budget as its first argument (gen.open puts it there) and runs
// through Budget.call, which charges its result unless it is free.
func (h helper) register() func(...any) (any, error) {
	if h.flat {
		return func(a ...any) (any, error) { return h.fn(nil, a) }
	}
	return func(a ...any) (any, error) {
		b, ok := a[0].(*Budget)
		if !ok {
			return nil, errors.New("internal: rendered without a budget")
		}
		return b.call(h, a[1:])
	}
}

// options are the expr options for the generated code: the base, the helpers it uses
// and the constant patch.
func (g *gen) options() []expr.Option {
	opts := baseOptions()
	for name := range g.used {
		opts = append(opts, expr.Function(name, helpers[name].register()))
	}
	return append(opts, expr.Patch(constPatch{consts: g.consts}))
}

// sortedRoots lists the names a template reads.
func sortedRoots(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
