package tmpl

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Runtime helpers called by the generated expr programs. Each implements one Jinja
// operation with Python semantics over jsonx values; they never mutate their inputs.

var errDivZero = errors.New("division by zero")

// getPath is member and index access along a path. Missing keys, out-of-range indexes
// and access on null or a non-container give null (R-T5, R-W7), never an error.
func getPath(obj any, keys []any) any {
	for _, k := range keys {
		if obj == nil {
			return nil
		}
		obj = getItem(obj, k)
	}
	return obj
}

// getPathW is getPath charging what each step reads (MaxRenderWork): a key's
// bytes, which a map lookup hashes, and the characters walked to index a
// string. Paths whose keys are all short constants use getPath (gen.expr).
func getPathW(b *Budget, obj any, keys []any) (any, error) {
	for _, k := range keys {
		if obj == nil {
			return nil, nil
		}
		if err := b.read(keyWork(obj, k)); err != nil {
			return nil, err
		}
		obj = getItem(obj, k)
	}
	return obj, nil
}

// keyWork is what reading key of obj costs: one, plus a string key's bytes, plus
// the bytes walked to a string's character (all of them from the end).
func keyWork(obj, key any) int64 {
	n := int64(1)
	if k, ok := key.(string); ok {
		n += int64(len(k))
	}
	if s, ok := obj.(string); ok && isNumber(key) {
		i, _ := toInt(key)
		if i < 0 || i >= int64(len(s)) {
			i = int64(len(s))
		}
		n += i
	}
	return n
}

// getItem reads one member or index. An object without a `data` member is its own
// `data`: NoETL exposes every step result that way (playbooks write
// {{ step.data.field }} for results that are not wrapped in data), and R-T5's null
// for a missing member would make such playbooks read nothing.
func getItem(obj, key any) any {
	switch o := obj.(type) {
	case map[string]any:
		if k, ok := mapKey(key); ok {
			if v, has := o[k]; has || k != "data" {
				return v
			}
			return o
		}
	case []any:
		if i, ok := index(key, len(o)); ok {
			return o[i]
		}
	case string:
		if !isNumber(key) {
			return nil
		}
		// Walk to the character instead of converting the string: reading is free
		// (Budget), so it must not allocate the string's size.
		i, ok := toInt(key)
		if ok && i < 0 {
			i += int64(utf8.RuneCountInString(o))
		}
		if !ok || i < 0 {
			return nil
		}
		for _, r := range o {
			if i == 0 {
				return string(r)
			}
			i--
		}
	}
	return nil
}

// mapKey turns a subscript into an object key. JSON keys are strings, so an integral
// number finds its decimal key (m[1] reads m["1"]).
func mapKey(key any) (string, bool) {
	if s, ok := key.(string); ok {
		return s, true
	}
	if isNumber(key) {
		if i, ok := toInt(key); ok {
			return strconv.FormatInt(i, 10), true
		}
	}
	return "", false
}

// index resolves a list subscript, negative from the end as in Python.
func index(key any, n int) (int, bool) {
	if !isNumber(key) {
		return 0, false
	}
	i, ok := toInt(key)
	if !ok {
		return 0, false
	}
	if i < 0 {
		i += int64(n)
	}
	if i < 0 || i >= int64(n) {
		return 0, false
	}
	return int(i), true
}

// has is the R-T3 `is defined` check of one step: the key exists, even if its value is null.
func has(obj, key any) bool {
	switch o := obj.(type) {
	case map[string]any:
		if k, ok := mapKey(key); ok {
			_, found := o[k]
			return found || k == "data" // an object is its own data (getItem)
		}
	case []any:
		_, ok := index(key, len(o))
		return ok
	case string:
		_, ok := index(key, utf8.RuneCountInString(o))
		return ok
	}
	return false
}

// slice is Python's obj[lo:hi:step] on lists and strings; on anything else it is null
// like other access (R-T5). Strings are walked, never converted to runes whole.
func slice(obj, lo, hi, step any) (any, error) {
	var n int
	switch o := obj.(type) {
	case []any:
		n = len(o)
	case string:
		n = utf8.RuneCountInString(o)
	default:
		return nil, nil
	}
	st := int64(1)
	if step != nil {
		s, ok := intArg(step)
		if !ok {
			return nil, fmt.Errorf("slice step must be an integer, got %s", typeName(step))
		}
		if s == 0 {
			return nil, errors.New("slice step cannot be zero")
		}
		st = s
	}
	start, err := sliceBound(lo, n, st, true)
	if err != nil {
		return nil, err
	}
	stop, err := sliceBound(hi, n, st, false)
	if err != nil {
		return nil, err
	}
	// picked reports whether index i is in the slice; count is how many are.
	var count int64
	picked := func(int64) bool { return false }
	if st > 0 && stop > start {
		count = (stop - start + st - 1) / st
		picked = func(i int64) bool { return i >= start && i < stop && (i-start)%st == 0 }
	} else if st < 0 && start > stop {
		count = (start - stop - st - 1) / -st
		picked = func(i int64) bool { return i <= start && i > stop && (start-i)%-st == 0 }
	}
	if s, ok := obj.(string); ok {
		var b strings.Builder
		var i int64
		for _, r := range s {
			if picked(i) {
				b.WriteRune(r)
			}
			i++
		}
		if st > 0 {
			return b.String(), nil
		}
		rs := []rune(b.String()) // only the picked characters
		slices.Reverse(rs)
		return string(rs), nil
	}
	src := obj.([]any)
	out := make([]any, 0, count)
	for i := start; int64(len(out)) < count; i += st {
		out = append(out, src[i])
	}
	return out, nil
}

// sliceBound clamps one slice bound as Python's slice.indices does.
func sliceBound(b any, n int, step int64, isStart bool) (int64, error) {
	ln := int64(n)
	if b == nil {
		switch {
		case step > 0 && isStart:
			return 0, nil
		case step > 0:
			return ln, nil
		case isStart:
			return ln - 1, nil
		default:
			return -1, nil
		}
	}
	i, ok := intArg(b)
	if !ok {
		return 0, fmt.Errorf("slice indices must be integers, got %s", typeName(b))
	}
	if i < 0 {
		i += ln
		if i < 0 {
			if step > 0 {
				return 0, nil
			}
			return -1, nil
		}
	}
	if i >= ln {
		if step > 0 {
			return ln, nil
		}
		return ln - 1, nil
	}
	return i, nil
}

// intArg reads an integer operand: int64, an integral float (R-A9) or a bool.
func intArg(v any) (int64, bool) {
	if _, _, _, ok := toNum(v); !ok {
		return 0, false
	}
	return toInt(v)
}

func opError(op string, a, b any) error {
	return fmt.Errorf("unsupported operand types for %s: %s and %s", op, typeName(a), typeName(b))
}

var errOverflow = errors.New("integer overflow")

// finite keeps NaN and infinities out of results: JSON cannot carry them.
func finite(f float64) (any, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errors.New("result is not a finite number")
	}
	return f, nil
}

// numbers reads both operands as numbers; isInt when both are integral kinds.
func numbers(a, b any) (ai, bi int64, af, bf float64, isInt, ok bool) {
	ai, af, aInt, aok := toNum(a)
	bi, bf, bInt, bok := toNum(b)
	return ai, bi, af, bf, aInt && bInt, aok && bok
}

func add(a, b any) (any, error) {
	if ai, bi, af, bf, isInt, ok := numbers(a, b); ok {
		if isInt {
			r := ai + bi
			if (bi > 0 && r < ai) || (bi < 0 && r > ai) {
				return nil, errOverflow
			}
			return r, nil
		}
		return finite(af + bf)
	}
	switch x := a.(type) {
	case string:
		if y, ok := b.(string); ok {
			return x + y, nil
		}
	case []any:
		if y, ok := b.([]any); ok {
			out := make([]any, 0, len(x)+len(y))
			return append(append(out, x...), y...), nil
		}
	}
	return nil, opError("+", a, b)
}

func sub(a, b any) (any, error) {
	ai, bi, af, bf, isInt, ok := numbers(a, b)
	if !ok {
		return nil, opError("-", a, b)
	}
	if isInt {
		r := ai - bi
		if (bi > 0 && r > ai) || (bi < 0 && r < ai) {
			return nil, errOverflow
		}
		return r, nil
	}
	return finite(af - bf)
}

func mulInt(a, b int64) (int64, error) {
	if a == 0 || b == 0 {
		return 0, nil
	}
	r := a * b
	if r/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, errOverflow
	}
	return r, nil
}

// mul multiplies numbers, or repeats a string or list; a repetition's size is
// checked against the budget before it is built.
func mul(bud *Budget, a, b any) (any, error) {
	if ai, bi, af, bf, isInt, ok := numbers(a, b); ok {
		if isInt {
			return mulInt(ai, bi)
		}
		return finite(af * bf)
	}
	// Repetition: "ab" * 3, 3 * "ab", [1] * 3.
	seq, n := a, b
	if isNumber(a) || isBool(a) {
		seq, n = b, a
	}
	count, ok := intArg(n)
	if !ok {
		return nil, opError("*", a, b)
	}
	count = max(count, 0)
	switch s := seq.(type) {
	case string:
		if err := bud.fits(extent{bytes: int64(len(s))}.times(count)); err != nil {
			return nil, err
		}
		return strings.Repeat(s, int(count)), nil
	case []any:
		one, ok := measure(s, bud.room())
		if !ok {
			return nil, bud.fits(one)
		}
		if err := bud.fits(one.times(count)); err != nil {
			return nil, err
		}
		if len(s) == 0 {
			return []any{}, nil // [] * n: no copies to loop over, however large n
		}
		out := make([]any, 0, len(s)*int(count))
		for range count {
			out = append(out, s...)
		}
		return out, nil
	}
	return nil, opError("*", a, b)
}

// div is true division: always a float, as in Python 3.
// dividing reads the operands of a division operator op: numbers, and a
// divisor that is not zero.
func dividing(op string, a, b any) (ai, bi int64, af, bf float64, isInt bool, err error) {
	ai, bi, af, bf, isInt, ok := numbers(a, b)
	switch {
	case !ok:
		err = opError(op, a, b)
	case bf == 0: // an integer divisor's float too
		err = errDivZero
	}
	return ai, bi, af, bf, isInt, err
}

func div(a, b any) (any, error) {
	_, _, af, bf, _, err := dividing("/", a, b)
	if err != nil {
		return nil, err
	}
	return finite(af / bf)
}

// floorDiv is Python's //: rounds toward negative infinity.
func floorDiv(a, b any) (any, error) {
	ai, bi, af, bf, isInt, err := dividing("//", a, b)
	if err != nil {
		return nil, err
	}
	if isInt {
		if ai == math.MinInt64 && bi == -1 {
			return nil, errOverflow
		}
		q := ai / bi
		if ai%bi != 0 && (ai < 0) != (bi < 0) {
			q--
		}
		return q, nil
	}
	return finite(math.Floor(af / bf))
}

// mod is Python's %: the result takes the divisor's sign.
func mod(a, b any) (any, error) {
	ai, bi, af, bf, isInt, err := dividing("%", a, b)
	if err != nil {
		return nil, err
	}
	if isInt {
		r := ai % bi
		if r != 0 && (r < 0) != (bi < 0) {
			r += bi
		}
		return r, nil
	}
	r := math.Mod(af, bf)
	if r != 0 && (r < 0) != (bf < 0) {
		r += bf
	}
	return finite(r)
}

func pow(a, b any) (any, error) {
	ai, bi, af, bf, isInt, ok := numbers(a, b)
	if !ok {
		return nil, opError("**", a, b)
	}
	if isInt && bi >= 0 {
		r, base, e := int64(1), ai, bi
		for e > 0 {
			var err error
			if e&1 == 1 {
				if r, err = mulInt(r, base); err != nil {
					return nil, err
				}
			}
			e >>= 1
			if e > 0 {
				if base, err = mulInt(base, base); err != nil {
					return nil, err
				}
			}
		}
		return r, nil
	}
	if af == 0 && bf < 0 {
		return nil, errors.New("zero cannot be raised to a negative power")
	}
	if af < 0 && bf != math.Trunc(bf) {
		return nil, errors.New("negative number cannot be raised to a fractional power")
	}
	return finite(math.Pow(af, bf))
}

func neg(x any) (any, error) {
	i, f, isInt, ok := toNum(x)
	switch {
	case !ok:
		return nil, fmt.Errorf("bad operand type for unary -: %s", typeName(x))
	case isInt && i == math.MinInt64:
		return nil, errOverflow
	case isInt:
		return -i, nil
	}
	return -f, nil
}

func plus(x any) (any, error) {
	i, f, isInt, ok := toNum(x)
	switch {
	case !ok:
		return nil, fmt.Errorf("bad operand type for unary +: %s", typeName(x))
	case isInt:
		return i, nil
	}
	return f, nil
}

// cat joins the R-T2 text forms of its operands: Jinja's ~ and the parts of a mixed
// template.
func cat(parts []any) string {
	if len(parts) == 1 {
		return Text(parts[0])
	}
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(Text(p))
	}
	return b.String()
}

// contains is Python's `x in c`. Membership in null (an undefined value) is false.
// It charges what it reads (MaxRenderWork): the items it compares, deeply, a
// map key's bytes, or both strings' bytes.
func contains(b *Budget, x, c any) (bool, error) {
	switch cv := c.(type) {
	case nil:
		return false, nil
	case []any:
		var n int64
		found := false
		for _, e := range cv {
			if equalN(x, e, &n) {
				found = true
				break
			}
		}
		return found, b.read(n)
	case map[string]any:
		k, ok := mapKey(x)
		if !ok {
			return false, nil
		}
		_, found := cv[k]
		return found, b.read(1 + int64(len(k)))
	case string:
		s, ok := x.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' needs a string on the left, got %s", typeName(x))
		}
		if err := b.read(int64(len(cv) + len(s))); err != nil {
			return false, err
		}
		return strings.Contains(cv, s), nil
	}
	return false, fmt.Errorf("cannot test membership in %s", typeName(c))
}

// dict builds a map literal; keys are expressions (Jinja) turned into JSON keys.
func dict(kv []any) (any, error) {
	m := make(map[string]any, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		switch kv[i].(type) {
		case map[string]any, []any:
			return nil, fmt.Errorf("a map key cannot be %s", typeName(kv[i]))
		}
		m[Text(kv[i])] = kv[i+1]
	}
	return m, nil
}

// rangeList is Python's range(stop) / range(start, stop[, step]) as a list, its
// length checked against the budget before it is built.
func rangeList(b *Budget, args []any) (any, error) {
	var n [3]int64
	for i, a := range args {
		v, ok := intArg(a)
		if !ok || isBool(a) {
			return nil, fmt.Errorf("range() needs integers, got %s", typeName(a))
		}
		n[i] = v
	}
	start, stop, step := int64(0), n[0], int64(1)
	if len(args) > 1 {
		start, stop = n[0], n[1]
	}
	if len(args) > 2 {
		step = n[2]
	}
	if step == 0 {
		return nil, errors.New("range() step cannot be zero")
	}
	var count float64
	if step > 0 && stop > start {
		count = math.Ceil((float64(stop) - float64(start)) / float64(step))
	} else if step < 0 && stop < start {
		count = math.Ceil((float64(start) - float64(stop)) / -float64(step))
	}
	if err := b.fits(extent{elems: int64(min(count, 1<<62))}); err != nil {
		return nil, err
	}
	out := make([]any, 0, int(count))
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		out = append(out, i)
		if (step > 0 && i > math.MaxInt64-step) || (step < 0 && i < math.MinInt64-step) {
			break
		}
	}
	return out, nil
}

// iterate is what {% for %} walks: a list, a map's sorted keys (deterministic output), a
// string's characters; null (undefined) walks nothing. The list it makes for a map
// or a string is checked against b first when b is not nil.
func iterate(b *Budget, x any) ([]any, error) {
	switch v := x.(type) {
	case nil:
		return nil, nil
	case []any:
		return v, nil
	case map[string]any:
		if b != nil {
			if err := b.fits(extent{elems: int64(len(v))}); err != nil {
				return nil, err
			}
		}
		keys := slices.Sorted(maps.Keys(v))
		out := make([]any, len(keys))
		for i, k := range keys {
			out[i] = k
		}
		return out, nil
	case string:
		if b != nil {
			if err := b.fits(extent{elems: int64(utf8.RuneCountInString(v))}); err != nil {
				return nil, err
			}
		}
		out := make([]any, 0, len(v))
		for _, r := range v {
			out = append(out, string(r))
		}
		return out, nil
	}
	return nil, fmt.Errorf("cannot iterate over %s", typeName(x))
}

// loopInfo is Jinja's loop variable for iteration i of items.
func loopInfo(i int, n int) map[string]any {
	return map[string]any{
		"index": int64(i + 1), "index0": int64(i), "first": i == 0, "last": i == n-1,
		"length": int64(n), "revindex": int64(n - i), "revindex0": int64(n - i - 1),
	}
}

// unpack reads element i of an item that a {% for a, b in … %} splits into n names.
func unpack(item any, n, i int) (any, error) {
	l, ok := item.([]any)
	if !ok || len(l) != n {
		return nil, fmt.Errorf("cannot unpack %s into %d loop variables", typeName(item), n)
	}
	return l[i], nil
}

// nowKey holds Env.Now in the variables a template that calls now() runs with, and
// budgetKey the render's Budget. They are not valid names, so no template can read
// or shadow them. budgetKey is an expr identifier (a '$' name, which Jinja names
// cannot contain), so the generated code loads it as a plain variable: reading
// it through $env[…] would copy it by reflection, an allocation per render.
const (
	nowKey    = " now"
	budgetKey = "$budget"
)

// nowText is now(): the triggering event's time (R-T4), as RFC 3339 in UTC so the text
// is the same on every replay whatever the machine's zone.
func nowText(env any) (any, error) {
	m, _ := env.(map[string]any)
	t, ok := m[nowKey].(time.Time)
	if !ok || t.IsZero() {
		return nil, errors.New("now() needs Env.Now (the triggering event's time)")
	}
	return t.UTC().Format(time.RFC3339Nano), nil
}
