package tmpl

import (
	"fmt"
	"slices"
	"strings"
)

// The Jinja expression AST. Every node keeps the template offset errors point at.
type node interface{ at() int }

type (
	nameExpr struct {
		name string
		pos  int
	}
	// constExpr holds an int64, float64, string, bool or nil.
	constExpr struct {
		val any
		pos int
	}
	listExpr struct {
		items []node
		pos   int
	}
	dictExpr struct {
		keys, vals []node
		pos        int
	}
	// getExpr is a.b, a['b'] or a[0].
	getExpr struct {
		obj, key node
		pos      int
	}
	sliceExpr struct {
		obj, lo, hi, step node // nil when omitted
		pos               int
	}
	// unaryExpr is -x, +x or not x.
	unaryExpr struct {
		op  string
		x   node
		pos int
	}
	// binExpr is arithmetic, and, or.
	binExpr struct {
		op   string
		l, r node
		pos  int
	}
	// catExpr is a ~ b ~ c.
	catExpr struct {
		parts []node
		pos   int
	}
	// cmpExpr is a chain: first ops[0] rest[0] ops[1] rest[1] …
	cmpExpr struct {
		first node
		ops   []string
		rest  []node
		poss  []int
	}
	// condExpr is `then if test else els`; els may be nil.
	condExpr struct {
		test, then, els node
		pos             int
	}
	callExpr struct {
		fn   string
		args []node
		kw   []kwArg
		pos  int
	}
	kwArg struct {
		name string
		val  node
		pos  int
	}
	// filterExpr is x|name(args).
	filterExpr struct {
		x    node
		name string
		args []node
		kw   []kwArg
		pos  int
	}
	// testExpr is x is [not] name(args).
	testExpr struct {
		x    node
		name string
		neg  bool
		args []node
		pos  int
	}
	// methodExpr is obj.name(args), a Python method.
	methodExpr struct {
		obj  node
		name string
		args []node
		pos  int
	}
)

func (n *nameExpr) at() int   { return n.pos }
func (n *constExpr) at() int  { return n.pos }
func (n *listExpr) at() int   { return n.pos }
func (n *dictExpr) at() int   { return n.pos }
func (n *getExpr) at() int    { return n.pos }
func (n *sliceExpr) at() int  { return n.pos }
func (n *unaryExpr) at() int  { return n.pos }
func (n *binExpr) at() int    { return n.pos }
func (n *catExpr) at() int    { return n.pos }
func (n *cmpExpr) at() int    { return n.first.at() }
func (n *condExpr) at() int   { return n.pos }
func (n *callExpr) at() int   { return n.pos }
func (n *filterExpr) at() int { return n.pos }
func (n *testExpr) at() int   { return n.pos }
func (n *methodExpr) at() int { return n.pos }

// The template AST: text, output and the two block kinds (R-T11).
type (
	tnode any
	tText struct{ s string }
	tOut  struct{ e node }
	tIf   struct {
		conds  []node
		bodies [][]tnode
		els    []tnode
	}
	tFor struct {
		names []string // one, or several to unpack each item
		iter  node
		body  []tnode
		els   []tnode // {% else %} of an empty loop
		pos   int
	}
)

// maxDepth bounds nesting (parentheses, blocks, operator chains) so hostile input
// cannot exhaust the stack of the parser, the generator or expr.
const maxDepth = 200

type parser struct {
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) peekAt(k int) token {
	if p.i+k < len(p.toks) {
		return p.toks[p.i+k]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEnd {
		p.i++
	}
	return t
}

func (p *parser) isOp(s string) bool { t := p.peek(); return t.kind == tOp && t.s == s }
func (p *parser) isKw(s string) bool { t := p.peek(); return t.kind == tName && t.s == s }

func (p *parser) expectOp(s string) (token, error) {
	if !p.isOp(s) {
		return token{}, p.unexpected("'" + s + "'")
	}
	return p.next(), nil
}

func (p *parser) expectEnd() error {
	if p.peek().kind != tEnd {
		return p.unexpected("end of tag")
	}
	return nil
}

func (p *parser) unexpected(want string) error {
	t := p.peek()
	return errAt(t.pos, fmt.Sprintf("expected %s, found %s", want, describe(t)))
}

func describe(t token) string {
	switch t.kind {
	case tEnd:
		return "end of tag"
	case tName:
		return "'" + t.s + "'"
	case tStr:
		return "string"
	case tInt, tFloat:
		return "number"
	}
	return "'" + t.s + "'"
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return errAt(p.peek().pos, "expression nested too deeply")
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// grow counts one more operand of a left-associative chain: the generated code nests
// one call deeper per operand, so chains count against maxDepth like parentheses.
// The caller restores the depth when the chain ends.
func (p *parser) grow() error {
	p.depth++
	if p.depth > maxDepth {
		return errAt(p.peek().pos, "expression nested too deeply")
	}
	return nil
}

func (p *parser) restore(depth int) { p.depth = depth }

// chain parses a left-associative chain, operand (op operand)*, of the
// operators ops (keywords or symbols): every binary level but comparison and
// ~ (their own nodes). Each operand after the first counts against maxDepth.
func (p *parser) chain(operand func() (node, error), ops ...string) (node, error) {
	defer p.restore(p.depth)
	at := func(op string) bool { return p.isOp(op) || p.isKw(op) }
	l, err := operand()
	for err == nil && slices.ContainsFunc(ops, at) {
		t := p.next()
		if err = p.grow(); err != nil {
			break
		}
		var r node
		if r, err = operand(); err == nil {
			l = &binExpr{op: t.s, l: l, r: r, pos: t.pos}
		}
	}
	return l, err
}

// keywords cannot be names.
var keywords = map[string]bool{"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true}

// parseExpr is Jinja's conditional expression: a if c else b (else optional).
func (p *parser) parseExpr() (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	for p.isKw("if") {
		pos := p.next().pos
		test, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var els node
		if p.isKw("else") {
			p.next()
			if els, err = p.parseExpr(); err != nil {
				return nil, err
			}
		}
		e = &condExpr{test: test, then: e, els: els, pos: pos}
	}
	return e, nil
}

func (p *parser) parseOr() (node, error)  { return p.chain(p.parseAnd, "or") }
func (p *parser) parseAnd() (node, error) { return p.chain(p.parseNot, "and") }
func (p *parser) parseNot() (node, error) {
	if !p.isKw("not") {
		return p.parseCompare()
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	pos := p.next().pos
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	return &unaryExpr{op: "not", x: x, pos: pos}, nil
}

var cmpOps = map[string]bool{"==": true, "!=": true, "<": true, "<=": true, ">": true, ">=": true}

func (p *parser) parseCompare() (node, error) {
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	c := &cmpExpr{first: first}
	defer p.restore(p.depth)
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == tOp && cmpOps[t.s]:
			op = t.s
			p.next()
		case p.isKw("in"):
			op = "in"
			p.next()
		case p.isKw("not") && p.peekAt(1).kind == tName && p.peekAt(1).s == "in":
			op = "not in"
			p.next()
			p.next()
		}
		if op == "" {
			break
		}
		if err := p.grow(); err != nil {
			return nil, err
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
		c.poss = append(c.poss, t.pos)
	}
	if len(c.ops) == 0 {
		return first, nil
	}
	return c, nil
}

func (p *parser) parseMath1() (node, error) { return p.chain(p.parseConcat, "+", "-") }
func (p *parser) parseConcat() (node, error) {
	first, err := p.parseMath2()
	if err != nil || !p.isOp("~") {
		return first, err
	}
	c := &catExpr{parts: []node{first}, pos: p.peek().pos}
	for p.isOp("~") {
		p.next()
		r, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		c.parts = append(c.parts, r)
	}
	return c, nil
}

func (p *parser) parseMath2() (node, error) { return p.chain(p.parsePow, "*", "/", "//", "%") }

// parsePow is left-associative, as in Jinja (2 ** 3 ** 2 is 64).
func (p *parser) parsePow() (node, error) {
	return p.chain(func() (node, error) { return p.parseUnary(true) }, "**")
}

// parseUnary follows Jinja: filters bind to the whole signed operand (-x|abs is
// abs(-x)), and tests bind tighter than arithmetic.
func (p *parser) parseUnary(withFilter bool) (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	var n node
	var err error
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		x, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		n = &unaryExpr{op: t.s, x: x, pos: t.pos}
	} else {
		if n, err = p.parsePrimary(); err != nil {
			return nil, err
		}
	}
	if n, err = p.parsePostfix(n); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilters(n)
	}
	return n, nil
}

// globals are the callable names; calling anything else is a compile error.
var globals = map[string]bool{"now": true, "range": true, "len": true, "token": true}

func (p *parser) parsePrimary() (node, error) {
	t := p.peek()
	switch t.kind {
	case tName:
		if keywords[t.s] {
			return nil, p.unexpected("an expression")
		}
		p.next()
		switch t.s {
		case "true", "True":
			return &constExpr{val: true, pos: t.pos}, nil
		case "false", "False":
			return &constExpr{val: false, pos: t.pos}, nil
		case "none", "None", "null":
			return &constExpr{val: nil, pos: t.pos}, nil
		}
		if p.isOp("(") {
			if !globals[t.s] {
				return nil, errAt(t.pos, fmt.Sprintf("unknown function '%s' (callable: len, now, range, token)", t.s))
			}
			p.next()
			args, kw, err := p.parseArgs()
			if err != nil {
				return nil, err
			}
			return &callExpr{fn: t.s, args: args, kw: kw, pos: t.pos}, nil
		}
		return &nameExpr{name: t.s, pos: t.pos}, nil
	case tInt, tFloat:
		p.next()
		return &constExpr{val: t.val, pos: t.pos}, nil
	case tStr:
		p.next()
		s := t.val.(string)
		// Adjacent string literals concatenate, as in Python.
		for p.peek().kind == tStr {
			s += p.next().val.(string)
		}
		return &constExpr{val: s, pos: t.pos}, nil
	case tOp:
		switch t.s {
		case "(":
			return p.parseParen()
		case "[":
			p.next()
			items, err := p.parseList("]")
			if err != nil {
				return nil, err
			}
			return &listExpr{items: items, pos: t.pos}, nil
		case "{":
			return p.parseDict()
		}
	}
	return nil, p.unexpected("an expression")
}

// parseParen reads a parenthesised expression or a tuple (which becomes a list).
func (p *parser) parseParen() (node, error) {
	open := p.next()
	if p.isOp(")") {
		p.next()
		return &listExpr{pos: open.pos}, nil
	}
	e, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if p.isOp(")") {
		p.next()
		return e, nil
	}
	if !p.isOp(",") {
		return nil, p.unexpected("')'")
	}
	p.next()
	rest, err := p.parseList(")")
	if err != nil {
		return nil, err
	}
	return &listExpr{items: append([]node{e}, rest...), pos: open.pos}, nil
}

// parseList reads comma-separated expressions up to close (a trailing comma is allowed).
func (p *parser) parseList(close string) ([]node, error) {
	var items []node
	for !p.isOp(close) {
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
		if err := p.comma(close); err != nil {
			return nil, err
		}
	}
	p.next()
	return items, nil
}

// comma reads the comma after an item of a bracketed sequence (list, dict,
// call arguments; a trailing one is allowed), or stands at its close.
func (p *parser) comma(close string) error {
	if p.isOp(",") {
		p.next()
		return nil
	}
	if !p.isOp(close) {
		return p.unexpected("',' or '" + close + "'")
	}
	return nil
}

func (p *parser) parseDict() (node, error) {
	open := p.next()
	d := &dictExpr{pos: open.pos}
	for !p.isOp("}") {
		k, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		if _, err := p.expectOp(":"); err != nil {
			return nil, err
		}
		v, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		d.keys = append(d.keys, k)
		d.vals = append(d.vals, v)
		if err := p.comma("}"); err != nil {
			return nil, err
		}
	}
	p.next()
	return d, nil
}

// parseArgs reads call arguments after "(": positional, then name=value keywords.
func (p *parser) parseArgs() ([]node, []kwArg, error) {
	var args []node
	var kw []kwArg
	for !p.isOp(")") {
		t := p.peek()
		if t.kind == tName && p.peekAt(1).kind == tOp && p.peekAt(1).s == "=" {
			p.next()
			p.next()
			v, err := p.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			kw = append(kw, kwArg{name: t.s, val: v, pos: t.pos})
		} else {
			if len(kw) > 0 {
				return nil, nil, errAt(t.pos, "positional argument after keyword argument")
			}
			v, err := p.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			args = append(args, v)
		}
		if err := p.comma(")"); err != nil {
			return nil, nil, err
		}
	}
	p.next()
	return args, kw, nil
}

// parsePositional reads the arguments of a call that takes no keywords; what
// names the callees for the error ("methods", "tests").
func (p *parser) parsePositional(what string) ([]node, error) {
	args, kw, err := p.parseArgs()
	if err != nil {
		return nil, err
	}
	if len(kw) > 0 {
		return nil, errAt(kw[0].pos, what+" take no keyword arguments")
	}
	return args, nil
}

func (p *parser) parsePostfix(n node) (node, error) {
	defer p.restore(p.depth)
	for {
		t := p.peek()
		if t.kind != tOp || (t.s != "." && t.s != "[") {
			if t.kind == tOp && t.s == "(" {
				return nil, errAt(t.pos, "only len(), now(), range() and methods can be called")
			}
			return n, nil
		}
		if err := p.grow(); err != nil {
			return nil, err
		}
		switch t.s {
		case ".":
			p.next()
			k := p.peek()
			var key node
			switch k.kind {
			case tName:
				key = &constExpr{val: k.s, pos: k.pos}
			case tInt:
				key = &constExpr{val: k.val, pos: k.pos}
			default:
				return nil, p.unexpected("a name after '.'")
			}
			p.next()
			if k.kind == tName && p.isOp("(") {
				p.next()
				args, err := p.parsePositional("methods")
				if err != nil {
					return nil, err
				}
				n = &methodExpr{obj: n, name: k.s, args: args, pos: k.pos}
				continue
			}
			n = &getExpr{obj: n, key: key, pos: t.pos}
		case "[":
			p.next()
			var err error
			if n, err = p.parseSubscript(n, t.pos); err != nil {
				return nil, err
			}
		}
	}
}

// parseSubscript reads what follows "[": an index or a Python slice lo:hi:step.
func (p *parser) parseSubscript(obj node, pos int) (node, error) {
	var parts [3]node
	k := 0
	sliced := false
	for {
		if !p.isOp(":") && !p.isOp("]") {
			e, err := p.parseExpr()
			if err != nil {
				return nil, err
			}
			parts[k] = e
		}
		if p.isOp("]") {
			p.next()
			break
		}
		if !p.isOp(":") || k == 2 {
			return nil, p.unexpected("']'")
		}
		p.next()
		sliced = true
		k++
	}
	if !sliced {
		if parts[0] == nil {
			return nil, errAt(pos, "empty subscript")
		}
		return &getExpr{obj: obj, key: parts[0], pos: pos}, nil
	}
	return &sliceExpr{obj: obj, lo: parts[0], hi: parts[1], step: parts[2], pos: pos}, nil
}

func (p *parser) parseFilters(n node) (node, error) {
	defer p.restore(p.depth)
	for {
		if !p.isOp("|") && !p.isKw("is") {
			return n, nil
		}
		if err := p.grow(); err != nil {
			return nil, err
		}
		switch {
		case p.isOp("|"):
			p.next()
			t := p.peek()
			if t.kind != tName {
				return nil, p.unexpected("a filter name after '|'")
			}
			p.next()
			f := &filterExpr{x: n, name: t.s, pos: t.pos}
			if p.isOp("(") {
				p.next()
				var err error
				if f.args, f.kw, err = p.parseArgs(); err != nil {
					return nil, err
				}
			}
			n = f
		case p.isKw("is"):
			p.next()
			te := &testExpr{x: n}
			if p.isKw("not") {
				p.next()
				te.neg = true
			}
			t := p.peek()
			if t.kind != tName {
				return nil, p.unexpected("a test name after 'is'")
			}
			p.next()
			te.name, te.pos = t.s, t.pos
			if p.isOp("(") {
				p.next()
				args, err := p.parsePositional("tests")
				if err != nil {
					return nil, err
				}
				te.args = args
			}
			n = te
		}
	}
}

// parseOutput parses the tokens of a {{ }} tag.
func parseOutput(toks []token) (node, error) {
	p := &parser{toks: toks}
	if p.peek().kind == tEnd {
		return nil, errAt(p.peek().pos, "empty expression")
	}
	e, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	return e, p.expectEnd()
}

// unsupportedTags are Jinja tags outside the dialect (R-T11); they get a clearer message
// than an unknown word.
var unsupportedTags = map[string]bool{
	"set": true, "endset": true, "macro": true, "endmacro": true, "include": true, "import": true,
	"from": true, "raw": true, "endraw": true, "block": true, "endblock": true, "extends": true,
	"call": true, "endcall": true, "filter": true, "endfilter": true, "with": true, "endwith": true,
	"autoescape": true, "endautoescape": true, "do": true, "break": true, "continue": true,
}

// tag is a parsed {% %} tag.
type tag struct {
	name  string
	pos   int
	expr  node     // if, elif, for (the iterable)
	names []string // for
}

func parseTag(seg segment) (tag, error) {
	p := &parser{toks: seg.toks}
	t := p.peek()
	if t.kind != tName {
		return tag{}, p.unexpected("a tag name")
	}
	p.next()
	tg := tag{name: t.s, pos: seg.pos}
	switch t.s {
	case "if", "elif":
		e, err := p.parseExpr()
		if err != nil {
			return tag{}, err
		}
		tg.expr = e
	case "else", "endif", "endfor":
	case "for":
		for {
			n := p.peek()
			if n.kind != tName || keywords[n.s] {
				return tag{}, p.unexpected("a loop variable name")
			}
			p.next()
			tg.names = append(tg.names, n.s)
			if !p.isOp(",") {
				break
			}
			p.next()
		}
		if !p.isKw("in") {
			return tag{}, p.unexpected("'in'")
		}
		p.next()
		// The iterable is an or-expression so a trailing "if" is not taken as x if c else y.
		e, err := p.parseOr()
		if err != nil {
			return tag{}, err
		}
		e, err = p.parseFilters(e)
		if err != nil {
			return tag{}, err
		}
		if p.isKw("if") || p.isKw("recursive") {
			return tag{}, errAt(p.peek().pos, "'for … "+p.peek().s+"' is not supported")
		}
		tg.expr = e
	default:
		if unsupportedTags[t.s] {
			return tag{}, errAt(t.pos, fmt.Sprintf("unsupported tag '%s' (only if/elif/else/endif and for/else/endfor)", t.s))
		}
		return tag{}, errAt(t.pos, fmt.Sprintf("unknown tag '%s'", t.s))
	}
	return tg, p.expectEnd()
}

// parseBody builds the block tree from segments starting at *i, stopping at a tag named
// in stop (which it returns) or at the end of the template when stop is empty.
func parseBody(segs []segment, i *int, stop []string, depth int) ([]tnode, tag, error) {
	if depth > maxDepth {
		return nil, tag{}, errAt(segs[*i].pos, "blocks nested too deeply")
	}
	var out []tnode
	for *i < len(segs) {
		seg := segs[*i]
		*i++
		switch seg.kind {
		case segText:
			if seg.text != "" {
				out = append(out, &tText{s: seg.text})
			}
		case segOut:
			e, err := parseOutput(seg.toks)
			if err != nil {
				return nil, tag{}, err
			}
			out = append(out, &tOut{e: e})
		case segTag:
			tg, err := parseTag(seg)
			if err != nil {
				return nil, tag{}, err
			}
			for _, s := range stop {
				if tg.name == s {
					return out, tg, nil
				}
			}
			switch tg.name {
			case "if":
				n, err := parseIf(segs, i, tg, depth)
				if err != nil {
					return nil, tag{}, err
				}
				out = append(out, n)
			case "for":
				n, err := parseFor(segs, i, tg, depth)
				if err != nil {
					return nil, tag{}, err
				}
				out = append(out, n)
			default:
				return nil, tag{}, errAt(tg.pos, fmt.Sprintf("unexpected '{%% %s %%}'", tg.name))
			}
		}
	}
	if len(stop) > 0 {
		return nil, tag{}, errAt(-1, "missing {% "+stop[len(stop)-1]+" %}")
	}
	return out, tag{}, nil
}

func parseIf(segs []segment, i *int, open tag, depth int) (tnode, error) {
	n := &tIf{}
	cur := open
	for {
		body, end, err := parseBody(segs, i, []string{"elif", "else", "endif"}, depth+1)
		if err != nil {
			return nil, fixMissing(err, open.pos)
		}
		n.conds = append(n.conds, cur.expr)
		n.bodies = append(n.bodies, body)
		switch end.name {
		case "elif":
			cur = end
		case "else":
			els, _, err := parseBody(segs, i, []string{"endif"}, depth+1)
			if err != nil {
				return nil, fixMissing(err, open.pos)
			}
			n.els = els
			return n, nil
		default:
			return n, nil
		}
	}
}

func parseFor(segs []segment, i *int, open tag, depth int) (tnode, error) {
	n := &tFor{names: open.names, iter: open.expr, pos: open.pos}
	body, end, err := parseBody(segs, i, []string{"else", "endfor"}, depth+1)
	if err != nil {
		return nil, fixMissing(err, open.pos)
	}
	n.body = body
	if end.name == "else" {
		if n.els, _, err = parseBody(segs, i, []string{"endfor"}, depth+1); err != nil {
			return nil, fixMissing(err, open.pos)
		}
	}
	return n, nil
}

// fixMissing points a "missing {% endX %}" error at the block that is left open.
func fixMissing(err error, pos int) error {
	if se, ok := err.(*syntaxError); ok && se.pos < 0 {
		return errAt(pos, se.msg)
	}
	return err
}

// isBlank reports whether text is only whitespace (a native template may be padded).
func isBlank(s string) bool { return strings.TrimSpace(s) == "" }
