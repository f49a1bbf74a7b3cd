package tmpl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// filterDef describes a filter: its parameters after the piped value (so keyword and
// positional arguments resolve at compile time) and its implementation, which receives
// the render's Budget and every parameter, defaults filled in. A filter's result is
// charged to the budget (Budget.call) unless the filter is marked free.
type filterDef struct {
	helper string // the expr function it compiles to
	params []string
	defs   []any // defaults, parallel to params; required marks a mandatory one
	fn     filterFn
	free   bool
	flat   bool // free, and its work does not grow with its input (helper.flat)
}

type filterFn = func(b *Budget, x any, a []any) (any, error)

// pure adapts a filter that needs no Budget of its own (it is still charged).
func pure(f func(x any, a []any) (any, error)) filterFn {
	return func(_ *Budget, x any, a []any) (any, error) { return f(x, a) }
}

// reads marks a filter free: it returns its input, a part of it, a number or a bool.
func (d *filterDef) reads() *filterDef {
	d.free = true
	return d
}

// flatWork marks a free filter flat: it reads a number or passes its input on.
func (d *filterDef) flatWork() *filterDef {
	d.free, d.flat = true, true
	return d
}

// asHelper is the filter as the helper it compiles to.
func (d *filterDef) asHelper() helper {
	return helper{fn: func(b *Budget, a []any) (any, error) { return d.fn(b, a[0], a[1:]) }, free: d.free, flat: d.flat}
}

type requiredArg struct{}

// required marks a parameter without a default.
var required = requiredArg{}

func fdef(helper string, fn filterFn, params ...any) *filterDef {
	d := &filterDef{helper: "$f_" + helper, fn: fn}
	for i := 0; i+1 < len(params); i += 2 {
		d.params = append(d.params, params[i].(string))
		d.defs = append(d.defs, params[i+1])
	}
	return d
}

// filters is the read-only filter table (dsl.md §5). "map" is compiled specially: its
// first argument names another filter, or it takes attribute=.
var filters = func() map[string]*filterDef {
	length := fdef("length", fLength).reads()
	def := fdef("default", pure(fDefault), "default_value", "", "boolean", false).flatWork()
	return map[string]*filterDef{
		"int":        fdef("int", readsText(fInt), "default", int64(0), "base", int64(10)).reads(),
		"float":      fdef("float", readsText(fFloat), "default", 0.0).reads(),
		"string":     fdef("string", pure(func(x any, _ []any) (any, error) { return Text(x), nil })),
		"bool":       fdef("bool", readsText(func(x any, _ []any) (any, error) { return WhenTrue(x), nil })).reads(),
		"length":     length,
		"count":      length,
		"default":    def,
		"d":          def,
		"tojson":     fdef("tojson", fToJSON, "indent", nil),
		"fromjson":   fdef("fromjson", readsText(fFromJSON)),
		"lower":      fdef("lower", textFilter(strings.ToLower)),
		"upper":      fdef("upper", textFilter(strings.ToUpper)),
		"capitalize": fdef("capitalize", textFilter(capitalize)),
		"title":      fdef("title", textFilter(jinjaTitle)),
		"quote":      fdef("quote", textFilter(ShellQuote)),
		"trim":       fdef("trim", fTrim, "chars", nil),
		"replace":    fdef("replace", fReplace, "old", required, "new", required, "count", nil),
		"split":      fdef("split", fSplit, "sep", nil, "maxsplit", int64(-1)),
		"join":       fdef("join", fJoin, "d", "", "attribute", nil),
		"first":      fdef("first", edge(false)).reads(),
		"last":       fdef("last", edge(true)).reads(),
		"keys":       fdef("keys", fKeys),
		"values":     fdef("values", pure(fValues)),
		"items":      fdef("items", pure(fItems)),
		"sum":        fdef("sum", fSum, "attribute", nil, "start", int64(0)),
		"min":        fdef("min", minMax(-1), "case_sensitive", false, "attribute", nil).reads(),
		"max":        fdef("max", minMax(1), "case_sensitive", false, "attribute", nil).reads(),
		"round":      fdef("round", pure(fRound), "precision", int64(0), "method", "common").flatWork(),
		"abs":        fdef("abs", pure(fAbs)).flatWork(),
		"unique":     fdef("unique", fUnique, "case_sensitive", false, "attribute", nil),
		"sort":       fdef("sort", fSort, "reverse", false, "case_sensitive", false, "attribute", nil),
		"reverse":    fdef("reverse", pure(fReverse)),
		"list":       fdef("list", fList),
		"dict":       fdef("dict", pure(fDict)),
	}
}()

// bindArgs resolves a call's positional and keyword arguments against params at compile
// time; missing optional ones become their defaults.
func bindArgs(what string, params []string, defs []any, args []node, kw []kwArg, pos int) ([]node, error) {
	if len(args) > len(params) {
		return nil, errAt(pos, fmt.Sprintf("%s takes at most %d argument(s), got %d", what, len(params), len(args)))
	}
	out := make([]node, len(params))
	copy(out, args)
	for _, k := range kw {
		i := slices.Index(params, k.name)
		if i < 0 {
			return nil, errAt(k.pos, fmt.Sprintf("%s has no argument '%s'", what, k.name))
		}
		if out[i] != nil {
			return nil, errAt(k.pos, fmt.Sprintf("%s got argument '%s' twice", what, k.name))
		}
		out[i] = k.val
	}
	for i, n := range out {
		if n != nil {
			continue
		}
		if defs[i] == required {
			return nil, errAt(pos, fmt.Sprintf("%s needs argument '%s'", what, params[i]))
		}
		out[i] = &constExpr{val: defs[i], pos: pos}
	}
	return out, nil
}

// readsText adapts a filter that reads the whole of a string it is given
// (parsing, folding): it charges the string's bytes (MaxRenderWork) first.
func readsText(f func(x any, a []any) (any, error)) filterFn {
	return func(b *Budget, x any, a []any) (any, error) {
		if s, ok := x.(string); ok {
			if err := b.readText(s); err != nil {
				return nil, err
			}
		}
		return f(x, a)
	}
}

// fLength is free but counts a string's characters, which reads it.
func fLength(b *Budget, x any, _ []any) (any, error) {
	switch v := x.(type) {
	case nil:
		return int64(0), nil
	case string:
		return int64(utf8.RuneCountInString(v)), b.readText(v)
	case []any:
		return int64(len(v)), nil
	case map[string]any:
		return int64(len(v)), nil
	}
	return nil, fmt.Errorf("%s has no length", typeName(x))
}

// fDefault replaces an undefined or null value (dsl.md §5), and with boolean=true any
// falsy one.
func fDefault(x any, a []any) (any, error) {
	if x == nil || (Truthy(a[1]) && !Truthy(x)) {
		return a[0], nil
	}
	return x, nil
}

// fInt converts like Jinja's int: unconvertible input gives the default, but a number
// beyond int64 is an error rather than a wrong id (R-T10).
func fInt(x any, a []any) (any, error) {
	base, ok := intArg(a[1])
	if !ok || base < 2 || base > 36 {
		return nil, fmt.Errorf("int base must be an integer from 2 to 36, got %s", Text(a[1]))
	}
	switch v := x.(type) {
	case string:
		s := strings.ReplaceAll(strings.TrimSpace(v), "_", "")
		if base != 10 {
			s = stripBasePrefix(s, base)
			if n, err := strconv.ParseInt(s, int(base), 64); err == nil {
				return n, nil
			}
			return a[0], nil
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			if errors.Is(err, strconv.ErrRange) {
				return nil, fmt.Errorf("int: %q is out of range", v)
			}
			return a[0], nil
		}
		return truncInt(f)
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return a[0], nil
		}
		return truncInt(v)
	}
	if i, _, isInt, ok := toNum(x); ok && isInt {
		return i, nil
	}
	if _, f, _, ok := toNum(x); ok {
		return truncInt(f)
	}
	return a[0], nil
}

func truncInt(f float64) (any, error) {
	i, ok := floatToInt(math.Trunc(f))
	if !ok {
		return nil, fmt.Errorf("int: %s is out of range", formatFloat(f))
	}
	return i, nil
}

func stripBasePrefix(s string, base int64) string {
	sign := ""
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		sign, s = s[:1], s[1:]
	}
	if len(s) > 2 && s[0] == '0' {
		p := s[1] | 0x20
		if (base == 16 && p == 'x') || (base == 8 && p == 'o') || (base == 2 && p == 'b') {
			s = s[2:]
		}
	}
	return sign + s
}

func fFloat(x any, a []any) (any, error) {
	if s, ok := x.(string); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return a[0], nil
		}
		return f, nil
	}
	if _, f, _, ok := toNum(x); ok {
		return f, nil
	}
	return a[0], nil
}

// fToJSON is compact JSON with sorted keys and no HTML escaping (the R-T2 form), or
// indented with indent=n. Indenting multiplies size by depth, so its length is
// checked against the budget before it is built.
func fToJSON(b *Budget, x any, a []any) (any, error) {
	if a[0] == nil {
		b, err := jsonx.Marshal(x)
		if err != nil {
			return nil, fmt.Errorf("tojson: %w", err)
		}
		return string(b), nil
	}
	n, ok := intArg(a[0])
	if !ok || n < 0 || n > 16 {
		return nil, fmt.Errorf("tojson indent must be an integer from 0 to 16, got %s", Text(a[0]))
	}
	compact, err := jsonx.Marshal(x)
	if err != nil {
		return nil, fmt.Errorf("tojson: %w", err)
	}
	if err := b.fits(extent{bytes: indentedLen(compact, int(n))}); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, compact, "", strings.Repeat(" ", int(n))); err != nil {
		return nil, fmt.Errorf("tojson: %w", err)
	}
	return buf.String(), nil
}

// indentedLen is the length json.Indent gives compact JSON: a newline and the
// depth's indent before every value of a non-empty array or object and before its
// closing bracket, and a space after every colon.
func indentedLen(compact []byte, indent int) int64 {
	n := int64(len(compact))
	depth := 0
	inString, escaped := false, false
	for i := 0; i < len(compact); i++ {
		c := compact[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ':':
			n++
		case c == ',':
			n += 1 + int64(depth*indent)
		case c == '{' || c == '[':
			if i+1 < len(compact) && (compact[i+1] == '}' || compact[i+1] == ']') {
				i++ // empty: stays {} or []
				continue
			}
			depth++
			n += 1 + int64(depth*indent)
		case c == '}' || c == ']':
			depth--
			n += 1 + int64(depth*indent)
		}
	}
	return n
}

// fFromJSON parses a JSON string; a value that is already structured passes through,
// since step results often arrive parsed.
func fFromJSON(x any, _ []any) (any, error) {
	s, ok := x.(string)
	if !ok {
		return x, nil
	}
	v, err := jsonx.Decode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("fromjson: %w", err)
	}
	return v, nil
}

// textFilter is a filter of the input's text, which it reads whole (and may
// hand back unchanged, uncharged as built).
func textFilter(f func(string) string) filterFn {
	return func(b *Budget, x any, _ []any) (any, error) {
		s := Text(x)
		if err := b.readText(s); err != nil {
			return nil, err
		}
		return f(s), nil
	}
}

// ShellQuote is the `quote` filter: s (in its R-T2 text form) as one word of
// a POSIX shell command line, as Python's shlex.quote writes it — unchanged
// when it holds only letters, digits and @%+=:,./-_, else in single quotes,
// each ' written '"'"'; the empty string is two single quotes. Values rendered into a shell
// step's command are not quoted otherwise (NoETL's behaviour); passing them
// through the step's env: needs no quoting at all.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(s) && safe; i++ {
		c := s[i]
		safe = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("@%+=:,./-_", c) >= 0
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

func capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 {
		return s
	}
	return string(unicode.ToUpper(r)) + strings.ToLower(s[n:])
}

// jinjaTitle capitalises each word; words start after whitespace, '-' or an opening
// bracket, as in Jinja's title filter.
func jinjaTitle(s string) string {
	var b strings.Builder
	start := true
	for _, r := range s {
		if unicode.IsSpace(r) || strings.ContainsRune("-([{<", r) {
			start = true
			b.WriteRune(r)
			continue
		}
		if start {
			b.WriteRune(unicode.ToUpper(r))
		} else {
			b.WriteRune(unicode.ToLower(r))
		}
		start = false
	}
	return b.String()
}

// pyTitle is Python's str.title: a word is a run of letters.
func pyTitle(s string) string {
	var b strings.Builder
	prev := false
	for _, r := range s {
		if prev {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToUpper(r))
		}
		prev = unicode.IsLetter(r)
	}
	return b.String()
}

func fTrim(b *Budget, x any, a []any) (any, error) {
	s := Text(x)
	if err := b.readText(s); err != nil {
		return nil, err
	}
	if a[0] == nil {
		return strings.TrimSpace(s), nil
	}
	chars, err := strArg("trim", "chars", a[0])
	if err != nil {
		return nil, err
	}
	return strings.Trim(s, chars), nil
}

// strArg reads a text argument; numbers are accepted in their text form.
func strArg(fn, name string, v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	if isNumber(v) {
		return Text(v), nil
	}
	return "", fmt.Errorf("%s: argument '%s' must be a string, got %s", fn, name, typeName(v))
}

// fReplace is str.replace; the result's length is checked against the budget
// before it is built (it grows by the occurrences times the growth of each).
func fReplace(b *Budget, x any, a []any) (any, error) {
	old, err := strArg("replace", "old", a[0])
	if err != nil {
		return nil, err
	}
	repl, err := strArg("replace", "new", a[1])
	if err != nil {
		return nil, err
	}
	n := int64(-1)
	if a[2] != nil {
		var ok bool
		if n, ok = intArg(a[2]); !ok {
			return nil, fmt.Errorf("replace: count must be an integer, got %s", typeName(a[2]))
		}
		if n < 0 {
			n = -1
		}
	}
	s := Text(x)
	if err := b.read(int64(len(s) + len(old))); err != nil {
		return nil, err
	}
	if grow := int64(len(repl) - len(old)); grow > 0 {
		var hits int64
		if old == "" {
			hits = int64(utf8.RuneCountInString(s)) + 1
		} else {
			hits = int64(strings.Count(s, old))
		}
		if n >= 0 {
			hits = min(hits, n)
		}
		if err := b.fits(extent{bytes: int64(len(s))}.plus(extent{bytes: grow}.times(hits))); err != nil {
			return nil, err
		}
	}
	return strings.Replace(s, old, repl, int(min(n, math.MaxInt32))), nil
}

// fSplit is Python's str.split: without a separator it splits on runs of whitespace.
func fSplit(b *Budget, x any, a []any) (any, error) {
	maxSplit, ok := intArg(a[1])
	if !ok {
		return nil, fmt.Errorf("split: maxsplit must be an integer, got %s", typeName(a[1]))
	}
	s := Text(x)
	if err := b.readText(s); err != nil {
		return nil, err
	}
	return pySplit(s, a[0], maxSplit)
}

func pySplit(s string, sepArg any, maxSplit int64) (any, error) {
	var parts []string
	if sepArg == nil {
		parts = splitSpace(s, maxSplit)
	} else {
		sep, err := strArg("split", "sep", sepArg)
		if err != nil {
			return nil, err
		}
		if sep == "" {
			return nil, errors.New("split: empty separator")
		}
		if maxSplit < 0 {
			parts = strings.Split(s, sep)
		} else {
			parts = strings.SplitN(s, sep, int(min(maxSplit, math.MaxInt32-1))+1)
		}
	}
	out := make([]any, len(parts))
	for i, p := range parts {
		out[i] = p
	}
	return out, nil
}

func splitSpace(s string, maxSplit int64) []string {
	if maxSplit < 0 {
		return strings.Fields(s)
	}
	var parts []string
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	for s != "" && int64(len(parts)) < maxSplit {
		i := strings.IndexFunc(s, unicode.IsSpace)
		if i < 0 {
			break
		}
		parts = append(parts, s[:i])
		s = strings.TrimLeftFunc(s[i:], unicode.IsSpace)
	}
	if s != "" {
		parts = append(parts, s)
	}
	return parts
}

// seq reads the items a list filter works on: lists, map keys (sorted), string
// characters; null is empty. The list made for a map or a string is checked
// against b first (see iterate), and the filter's reading of every item is
// charged (MaxRenderWork): an item or entry each, a string's bytes.
func seq(b *Budget, name string, x any) ([]any, error) {
	var n int
	switch v := x.(type) {
	case nil:
	case []any:
		n = len(v)
	case map[string]any:
		n = len(v)
	case string:
		n = len(v)
	default:
		return nil, fmt.Errorf("%s needs a list, got %s", name, typeName(x))
	}
	if err := b.read(int64(n)); err != nil {
		return nil, err
	}
	return iterate(b, x)
}

// attrWork is what reading attribute= of each item costs (attrPath): its
// parts, split from the path, and the lookup of each.
func attrWork(attr any) int64 {
	if s, ok := attr.(string); ok {
		return 1 + int64(len(s))
	}
	return 1
}

// readAttrs charges reading attribute= of n items; nothing without one.
func readAttrs(b *Budget, n int, attr any) error {
	if attr == nil {
		return nil
	}
	return b.read(int64(n) * attrWork(attr))
}

// seqAttrs is seq for a filter that reads attribute= of each item once,
// that reading charged.
func seqAttrs(b *Budget, filter string, x, attr any) ([]any, error) {
	items, err := seq(b, filter, x)
	if err != nil {
		return nil, err
	}
	return items, readAttrs(b, len(items), attr)
}

// attrPath reads attribute= of filters: a dotted path, numeric parts index lists.
func attrPath(item, attr any) any {
	if attr == nil {
		return item
	}
	s, ok := attr.(string)
	if !ok {
		return getItem(item, attr)
	}
	for _, part := range strings.Split(s, ".") {
		var key any = part
		if n, err := strconv.ParseInt(part, 10, 64); err == nil {
			key = n
		}
		item = getItem(item, key)
	}
	return item
}

// fJoin joins the items' text; the separators' share is checked against the
// budget first (a long separator between many items multiplies).
func fJoin(b *Budget, x any, a []any) (any, error) {
	items, err := seqAttrs(b, "join", x, a[1])
	if err != nil {
		return nil, err
	}
	sep := Text(a[0])
	if len(items) > 1 {
		if err := b.fits(extent{bytes: int64(len(sep))}.times(int64(len(items) - 1))); err != nil {
			return nil, err
		}
	}
	var out strings.Builder
	for i, it := range items {
		if i > 0 {
			out.WriteString(sep)
		}
		out.WriteString(Text(attrPath(it, a[1])))
	}
	return out.String(), nil
}

// edge is the first or last filter. Both are free: a string's character is read in
// place rather than listing them all, and a map's first or last key is found in
// one pass rather than sorting them.
func edge(last bool) filterFn {
	name, decode := "first", utf8.DecodeRuneInString
	if last {
		name, decode = "last", utf8.DecodeLastRuneInString
	}
	return func(b *Budget, x any, _ []any) (any, error) {
		switch v := x.(type) {
		case string:
			if v == "" {
				return nil, nil
			}
			r, _ := decode(v)
			return string(r), nil
		case map[string]any:
			var n int64
			var best string
			found := false
			for k := range v {
				n += 1 + int64(len(k))
				if !found || (k > best) == last {
					best, found = k, true
				}
			}
			if err := b.read(n); err != nil || !found {
				return nil, err
			}
			return best, nil
		case nil:
			return nil, nil
		case []any:
			if len(v) == 0 {
				return nil, nil
			}
			if last {
				return v[len(v)-1], nil
			}
			return v[0], nil
		}
		return nil, fmt.Errorf("%s needs a list, got %s", name, typeName(x))
	}
}

func mapArg(name string, x any) (map[string]any, error) {
	switch m := x.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return m, nil
	}
	return nil, fmt.Errorf("%s needs an object, got %s", name, typeName(x))
}

func fKeys(b *Budget, x any, _ []any) (any, error) {
	m, err := mapArg("keys", x)
	if err != nil {
		return nil, err
	}
	return iterate(b, m)
}

func fValues(x any, _ []any) (any, error) {
	return entries("values", x, func(_ string, v any) any { return v })
}

func fItems(x any, _ []any) (any, error) {
	return entries("items", x, func(k string, v any) any { return []any{k, v} })
}

// entries lists what entry makes of each entry of the object x, in key order
// (values, items); name is the filter's, for its error.
func entries(name string, x any, entry func(k string, v any) any) (any, error) {
	m, err := mapArg(name, x)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, entry(k, m[k]))
	}
	return out, nil
}

// fSum adds the items; each partial sum is charged (summing lists concatenates
// them, and every partial list is a new one).
func fSum(b *Budget, x any, a []any) (any, error) {
	items, err := seqAttrs(b, "sum", x, a[0])
	if err != nil {
		return nil, err
	}
	total := a[1]
	// Integers are added here, unboxed: the common case, and a sum of many
	// must cost about what reading them is charged (MaxRenderWork).
	acc, isInt := total.(int64)
	for _, it := range items {
		v := attrPath(it, a[0])
		if y, ok := v.(int64); ok && isInt {
			r := acc + y
			if (y > 0 && r < acc) || (y < 0 && r > acc) {
				return nil, fmt.Errorf("sum: %w", errOverflow)
			}
			acc = r
			continue
		}
		if isInt {
			total = acc
		}
		if total, err = b.call(sumAdd, []any{total, v}); err != nil {
			var be *BudgetError
			if errors.As(err, &be) {
				return nil, err
			}
			return nil, fmt.Errorf("sum: %w", err)
		}
		acc, isInt = total.(int64)
	}
	if isInt {
		return acc, nil
	}
	return total, nil
}

// sumAdd is + as sum applies it, its partial results charged.
var sumAdd = metered(fn2(add))

// sortKey folds strings for the case-insensitive default of min, max, sort and unique.
func sortKey(v any, caseSensitive bool) any {
	var n int64
	return sortKeyN(v, caseSensitive, &n)
}

// sortKeyN is sortKey adding the bytes it folds to *n (MaxRenderWork).
func sortKeyN(v any, caseSensitive bool, n *int64) any {
	if s, ok := v.(string); ok && !caseSensitive {
		*n += int64(len(s))
		return strings.ToLower(s)
	}
	return v
}

func minMax(sign int) filterFn {
	name := "min"
	if sign > 0 {
		name = "max"
	}
	return func(b *Budget, x any, a []any) (any, error) {
		cs := Truthy(a[0])
		var best any
		var n int64 // what comparing read, charged once done
		first := true
		consider := func(it any) error {
			if first {
				best, first = it, false
				return nil
			}
			c, err := compareN(name, sortKeyN(attrPath(it, a[1]), cs, &n), sortKeyN(attrPath(best, a[1]), cs, &n), &n)
			if c*sign > 0 {
				best = it
			}
			return err
		}
		// A string's characters are read in place: min and max are free.
		if s, ok := x.(string); ok {
			if err := b.readText(s); err != nil {
				return nil, err
			}
			for _, r := range s {
				if err := consider(string(r)); err != nil {
					return nil, err
				}
			}
			return best, b.read(n)
		}
		switch x.(type) {
		case nil, []any, map[string]any:
		default:
			return nil, fmt.Errorf("%s needs a list, got %s", name, typeName(x))
		}
		// The list of a map's keys is not kept: it is not charged as built.
		items, _ := iterate(nil, x)
		err := b.read(int64(len(items)))
		if err == nil {
			err = readAttrs(b, 2*len(items), a[1])
		}
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if err := consider(it); err != nil {
				return nil, err
			}
		}
		return best, b.read(n)
	}
}

// fRound follows Python's round (half to even on the exact binary value) for "common",
// keeps integers integral, and supports ceil and floor like Jinja.
func fRound(x any, a []any) (any, error) {
	p, ok := intArg(a[0])
	if !ok {
		return nil, fmt.Errorf("round: precision must be an integer, got %s", typeName(a[0]))
	}
	method, _ := a[1].(string)
	if method != "common" && method != "ceil" && method != "floor" {
		return nil, fmt.Errorf("round: method must be common, ceil or floor, got %s", Text(a[1]))
	}
	i, f, isInt, ok := toNum(x)
	if !ok {
		return nil, fmt.Errorf("round needs a number, got %s", typeName(x))
	}
	if isInt && p >= 0 {
		if method == "common" {
			return i, nil
		}
		return float64(i), nil
	}
	p = max(-20, min(p, 20))
	scale := math.Pow(10, float64(p))
	switch method {
	case "ceil":
		return finite(math.Ceil(f*scale) / scale)
	case "floor":
		return finite(math.Floor(f*scale) / scale)
	}
	if p >= 0 {
		r, err := strconv.ParseFloat(strconv.FormatFloat(f, 'f', int(p), 64), 64)
		if err != nil {
			return nil, fmt.Errorf("round: %w", err)
		}
		if isInt {
			return truncInt(r)
		}
		return r, nil
	}
	r := math.RoundToEven(f*scale) / scale
	if isInt {
		return truncInt(r)
	}
	return finite(r)
}

func fAbs(x any, _ []any) (any, error) {
	i, f, isInt, ok := toNum(x)
	switch {
	case !ok:
		return nil, fmt.Errorf("abs needs a number, got %s", typeName(x))
	case isInt && i < 0:
		return neg(x) // -i, or the overflow of math.MinInt64
	case isInt:
		return i, nil
	}
	return math.Abs(f), nil
}

// hashKey groups values Python would call equal (1 and 1.0, "a" and "A" when folding),
// so unique stays linear.
func hashKey(v any) string {
	switch x := v.(type) {
	case nil:
		return "n"
	case string:
		return "s" + x
	case []any, map[string]any:
		return "j" + Text(x)
	}
	if i, f, isInt, ok := toNum(v); ok {
		if !isInt {
			if fi, ok := floatToInt(f); ok {
				i, isInt = fi, true
			}
		}
		if isInt {
			return "i" + strconv.FormatInt(i, 10)
		}
		return "f" + strconv.FormatFloat(f, 'g', -1, 64)
	}
	return "o" + Text(v)
}

func fUnique(b *Budget, x any, a []any) (any, error) {
	items, err := seqAttrs(b, "unique", x, a[1])
	if err != nil {
		return nil, err
	}
	cs := Truthy(a[0])
	seen := make(map[string]bool, len(items))
	out := make([]any, 0, len(items))
	for _, it := range items {
		k := hashKey(sortKey(attrPath(it, a[1]), cs))
		// The key is as long as the item's text, which folding and hashing read.
		if err := b.read(2 * int64(len(k))); err != nil {
			return nil, err
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, it)
		}
	}
	return out, nil
}

func fSort(b *Budget, x any, a []any) (any, error) {
	items, err := seq(b, "sort", x)
	if err != nil {
		return nil, err
	}
	// Sorting compares about n·log2(n) pairs; charged before it starts, so a
	// sort too large for what is left never begins. What the comparisons read
	// beyond one item each is charged once it is done.
	cmps := int64(len(items)) * int64(bits.Len(uint(len(items))))
	if err := b.read(cmps); err != nil {
		return nil, err
	}
	if err := readAttrs(b, 2*int(cmps), a[2]); err != nil {
		return nil, err
	}
	out := slices.Clone(items)
	reverse, cs := Truthy(a[0]), Truthy(a[1])
	var cmpErr error
	var n int64
	slices.SortStableFunc(out, func(p, q any) int {
		c, err := compareN("sort", sortKeyN(attrPath(p, a[2]), cs, &n), sortKeyN(attrPath(q, a[2]), cs, &n), &n)
		if err != nil && cmpErr == nil {
			cmpErr = err
		}
		if reverse {
			return -c
		}
		return c
	})
	if cmpErr != nil {
		return nil, cmpErr
	}
	return orEmpty(out), b.read(n)
}

// orEmpty is l, or an empty list for nil: a list a filter gives is [], never
// null.
func orEmpty(l []any) []any {
	if l == nil {
		return []any{}
	}
	return l
}

func fReverse(x any, _ []any) (any, error) {
	switch v := x.(type) {
	case nil:
		return nil, nil
	case string:
		rs := []rune(v)
		slices.Reverse(rs)
		return string(rs), nil
	case []any:
		out := slices.Clone(v)
		slices.Reverse(out)
		return out, nil
	}
	return nil, fmt.Errorf("reverse needs a list or a string, got %s", typeName(x))
}

func fList(b *Budget, x any, _ []any) (any, error) {
	items, err := seq(b, "list", x)
	if err != nil {
		return nil, err
	}
	if l, ok := x.([]any); ok {
		return slices.Clone(l), nil
	}
	return orEmpty(items), nil
}

// fDict copies a map or builds one from [key, value] pairs (the output of items).
func fDict(x any, _ []any) (any, error) {
	switch v := x.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = e
		}
		return m, nil
	case []any:
		kv := make([]any, 0, 2*len(v))
		for _, it := range v {
			p, ok := it.([]any)
			if !ok || len(p) != 2 {
				return nil, fmt.Errorf("dict needs [key, value] pairs, got %s", typeName(it))
			}
			kv = append(kv, p[0], p[1])
		}
		return dict(kv)
	}
	return nil, fmt.Errorf("dict needs an object or a list of pairs, got %s", typeName(x))
}

// mapAttr is map(attribute=…, default=…).
func mapAttr(b *Budget, x, attr, def any) (any, error) {
	items, err := seqAttrs(b, "map", x, attr)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	for i, it := range items {
		v := attrPath(it, attr)
		if v == nil {
			v = def
		}
		out[i] = v
	}
	return out, nil
}

// mapFilter is map('name', args…): the named filter applied to every item, each
// through the budget like a filter written out.
func mapFilter(b *Budget, x any, name string, args []any) (any, error) {
	f := filters[name].asHelper()
	items, err := seq(b, "map", x)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	for i, it := range items {
		if out[i], err = b.call(f, append([]any{it}, args...)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// testDef is a Jinja test (x is name(args)); defined/undefined compile specially.
type testDef struct {
	nargs int
	fn    func(x any, a []any) (bool, error)
	text  bool // reads the whole of a string (charged, MaxRenderWork)
}

func simpleTest(f func(any) bool) testDef {
	return testDef{fn: func(x any, _ []any) (bool, error) { return f(x), nil }}
}

func textTest(f func(any) bool) testDef {
	d := simpleTest(f)
	d.text = true
	return d
}

var tests = map[string]testDef{
	"none":   simpleTest(func(x any) bool { return x == nil }),
	"number": simpleTest(func(x any) bool { _, _, _, ok := toNum(x); return ok }), // bools too, as in Jinja
	"integer": simpleTest(func(x any) bool {
		_, _, isInt, ok := toNum(x)
		return ok && isInt && !isBool(x)
	}),
	"float":   simpleTest(func(x any) bool { _, ok := x.(float64); return ok }),
	"string":  simpleTest(func(x any) bool { _, ok := x.(string); return ok }),
	"mapping": simpleTest(func(x any) bool { _, ok := x.(map[string]any); return ok }),
	"boolean": simpleTest(isBool),
	"true":    simpleTest(func(x any) bool { return x == true }),
	"false":   simpleTest(func(x any) bool { return x == false }),
	"iterable": simpleTest(func(x any) bool {
		switch x.(type) {
		case []any, map[string]any, string:
			return true
		}
		return false
	}),
	"sequence": simpleTest(func(x any) bool {
		switch x.(type) {
		case []any, map[string]any, string:
			return true
		}
		return false
	}),
	"lower": textTest(func(x any) bool { s, ok := x.(string); return ok && strings.ToLower(s) == s }),
	"upper": textTest(func(x any) bool { s, ok := x.(string); return ok && strings.ToUpper(s) == s }),
	"even": {fn: func(x any, _ []any) (bool, error) {
		r, err := mod(x, int64(2))
		return err == nil && equal(r, int64(0)), numErr("even", x, err)
	}},
	"odd": {fn: func(x any, _ []any) (bool, error) {
		r, err := mod(x, int64(2))
		return err == nil && equal(r, int64(1)), numErr("odd", x, err)
	}},
	"divisibleby": {nargs: 1, fn: func(x any, a []any) (bool, error) {
		r, err := mod(x, a[0])
		if err != nil {
			return false, fmt.Errorf("divisibleby: %w", err)
		}
		return equal(r, int64(0)), nil
	}},
}

func numErr(test string, x any, err error) error {
	if err != nil {
		return fmt.Errorf("%s needs a number, got %s", test, typeName(x))
	}
	return nil
}

// methodDef is a Python method NoETL playbooks call on values (d.get('k'), s.split(',')).
// get compiles to the free helper $lookup (it returns a part of its object); the
// others to $method, which the budget charges.
type methodDef struct{ min, max int }

var methods = map[string]methodDef{
	"get": {1, 2}, "keys": {0, 0}, "values": {0, 0}, "items": {0, 0},
	"upper": {0, 0}, "lower": {0, 0}, "strip": {0, 1}, "lstrip": {0, 1}, "rstrip": {0, 1},
	"split": {0, 2}, "startswith": {1, 1}, "endswith": {1, 1}, "replace": {2, 3},
	"join": {1, 1}, "title": {0, 0}, "capitalize": {0, 0},
}

// lookup is d.get(key[, default]); on null it gives null, like other access on an
// undefined value (R-T5).
func lookup(obj, key any, def []any) (any, error) {
	switch o := obj.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		if k, ok := mapKey(key); ok {
			if v, found := o[k]; found {
				return v, nil
			}
		}
		if len(def) > 0 {
			return def[0], nil
		}
		return nil, nil
	}
	return nil, fmt.Errorf("%s has no method 'get'", typeName(obj))
}

// callMethod runs a method other than get; on null it gives null, like other access
// on an undefined value (R-T5).
func callMethod(b *Budget, obj any, name string, args []any) (any, error) {
	switch o := obj.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		switch name {
		case "keys":
			return fKeys(b, o, nil)
		case "values":
			return fValues(o, nil)
		case "items":
			return fItems(o, nil)
		}
	case string:
		return stringMethod(b, o, name, args)
	}
	return nil, fmt.Errorf("%s has no method '%s'", typeName(obj), name)
}

func stringMethod(b *Budget, s, name string, args []any) (any, error) {
	switch name {
	case "upper", "lower", "title", "capitalize", "strip", "lstrip", "rstrip", "split":
		if err := b.readText(s); err != nil { // each reads the whole string
			return nil, err
		}
	}
	arg := func(i int, what string) (string, error) { return strArg(name, what, args[i]) }
	trim := func(f func(string, string) string, g func(string, func(rune) bool) string) (any, error) {
		if len(args) == 0 || args[0] == nil {
			return g(s, unicode.IsSpace), nil
		}
		chars, err := arg(0, "chars")
		if err != nil {
			return nil, err
		}
		return f(s, chars), nil
	}
	switch name {
	case "upper":
		return strings.ToUpper(s), nil
	case "lower":
		return strings.ToLower(s), nil
	case "title":
		return pyTitle(s), nil
	case "capitalize":
		return capitalize(s), nil
	case "strip":
		return trim(strings.Trim, strings.TrimFunc)
	case "lstrip":
		return trim(strings.TrimLeft, strings.TrimLeftFunc)
	case "rstrip":
		return trim(strings.TrimRight, strings.TrimRightFunc)
	case "split":
		var sep any
		maxSplit := int64(-1)
		if len(args) > 0 {
			sep = args[0]
		}
		if len(args) > 1 {
			var ok bool
			if maxSplit, ok = intArg(args[1]); !ok {
				return nil, fmt.Errorf("split: maxsplit must be an integer, got %s", typeName(args[1]))
			}
		}
		return pySplit(s, sep, maxSplit)
	case "startswith", "endswith":
		has := strings.HasPrefix
		if name == "endswith" {
			has = strings.HasSuffix
		}
		// Python accepts a tuple of candidates.
		cands, ok := args[0].([]any)
		if !ok {
			cands = []any{args[0]}
		}
		for _, c := range cands {
			p, err := strArg(name, "prefix", c)
			if err == nil {
				err = b.read(1 + int64(len(p)))
			}
			if err != nil {
				return nil, err
			}
			if has(s, p) {
				return true, nil
			}
		}
		return false, nil
	case "replace":
		count := any(nil)
		if len(args) > 2 {
			count = args[2]
		}
		return fReplace(b, s, []any{args[0], args[1], count})
	case "join":
		return fJoin(b, args[0], []any{s, nil})
	}
	return nil, fmt.Errorf("string has no method '%s'", name)
}
