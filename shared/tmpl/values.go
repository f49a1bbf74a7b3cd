package tmpl

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// HasTemplate reports whether s contains template syntax ("{{" or "{%"), so callers can
// skip compiling the many plain strings of a playbook.
func HasTemplate(s string) bool {
	return strings.Contains(s, "{{") || strings.Contains(s, "{%")
}

// Renders reports that s holds template syntax that compiles. Python code is
// rendered only then: NoETL renders code, and a code whose braces are Python's own
// (and do not compile as a template) runs as written.
func Renders(s string) bool {
	if !HasTemplate(s) {
		return false
	}
	_, err := Compile(s)
	return err == nil
}

// Truthy is Python truthiness (R-T1): false, null, 0, 0.0, "", and empty lists and maps
// are false; everything else is true. Every condition inside a template uses it.
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	case float64:
		return x != 0
	case int64:
		return x != 0
	}
	if i, f, isInt, ok := toNum(v); ok {
		if isInt {
			return i != 0
		}
		return f != 0
	}
	return true
}

// WhenTrue decides the final value of a `when`: Truthy, plus dsl.md §5's string rule,
// because a mixed template such as "{{ a }}" renders "false" as text and must still
// read as false. Surrounding whitespace is ignored (YAML block scalars add newlines).
func WhenTrue(v any) bool {
	s, ok := v.(string)
	if !ok {
		return Truthy(v)
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "false", "0", "no", "none", "null", "off":
		return false
	}
	return true
}

// Text is the R-T2 text form of a value inside a mixed template: null is "", integral
// numbers have no ".0", other numbers the shortest decimal (as JSON writes them),
// booleans true/false, and maps and lists compact JSON with sorted keys.
func Text(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		if x {
			return "true"
		}
		return "false"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatFloat(x)
	case map[string]any, []any:
		b, err := jsonx.Marshal(x)
		if err != nil {
			// Only values outside the convention (NaN, Go funcs) get here.
			return fmt.Sprint(x)
		}
		return string(b)
	}
	if i, f, isInt, ok := toNum(v); ok {
		if isInt {
			return strconv.FormatInt(i, 10)
		}
		return formatFloat(f)
	}
	return Text(jsonx.Normalize(v))
}

// formatFloat writes a float the way encoding/json does (so Text and tojson agree):
// plain decimal between 1e-6 and 1e21, exponent form outside, no trailing ".0".
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		// encoding/json shortens a two-digit negative exponent: 1e-07 becomes 1e-7.
		if n := len(s); n >= 4 && s[n-4] == 'e' && s[n-3] == '-' && s[n-2] == '0' {
			s = s[:n-2] + s[n-1:]
		}
		return s
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// toNum reads a number. Booleans count as 0 and 1, as in Python, so True + 1 == 2 and
// True == 1; other Go integer kinds are accepted for callers that did not normalise.
func toNum(v any) (i int64, f float64, isInt bool, ok bool) {
	switch x := v.(type) {
	case int64:
		return x, float64(x), true, true
	case float64:
		return 0, x, false, true
	case bool:
		if x {
			return 1, 1, true, true
		}
		return 0, 0, true, true
	}
	if n, ok := jsonx.GoNumber(v); ok {
		return toNum(n)
	}
	return 0, 0, false, false
}

// isNumber is a number in the JSON sense (booleans excluded).
func isNumber(v any) bool {
	if _, ok := v.(bool); ok {
		return false
	}
	_, _, _, ok := toNum(v)
	return ok
}

// floatToInt converts an integral float that fits int64 (R-A9: integral floats count as
// integers where an integer is expected).
func floatToInt(f float64) (int64, bool) {
	if f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, false
	}
	return int64(f), true
}

// toInt reads an integer argument (indexes, counts); integral floats are accepted.
func toInt(v any) (int64, bool) {
	i, f, isInt, ok := toNum(v)
	if !ok {
		return 0, false
	}
	if isInt {
		return i, true
	}
	return floatToInt(f)
}

// typeName names a value's type in messages, in JSON terms.
func typeName(v any) string {
	if _, _, _, ok := toNum(v); ok && !isBool(v) {
		return "number"
	}
	return jsonx.TypeName(v)
}

func isBool(v any) bool {
	_, ok := v.(bool)
	return ok
}

// equal is Python equality over JSON values: numbers compare by value across int64 and
// float64 (1 == 1.0, and True == 1 as in Python), lists and maps compare deeply.
func equal(a, b any) bool {
	var n int64
	return equalN(a, b, &n)
}

// equalN is equal adding what it reads to *n (MaxRenderWork): one per value
// visited, the bytes of two strings of one length and of the keys it looks up.
func equalN(a, b any, n *int64) bool {
	*n++
	if x, ok := a.(int64); ok { // the common case, before the general one
		if y, ok := b.(int64); ok {
			return x == y
		}
	}
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		if ok && len(x) == len(y) {
			*n += int64(len(x))
		}
		return ok && x == y
	case nil:
		return b == nil
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalN(x[i], y[i], n) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			*n += int64(len(k))
			yv, ok := y[k]
			if !ok || !equalN(xv, yv, n) {
				return false
			}
		}
		return true
	}
	ai, af, aInt, aok := toNum(a)
	bi, bf, bInt, bok := toNum(b)
	if aok && bok {
		switch {
		case aInt && bInt:
			return ai == bi
		case aInt:
			return intEqFloat(ai, bf)
		case bInt:
			return intEqFloat(bi, af)
		default:
			return af == bf
		}
	}
	return false
}

// intEqFloat compares exactly, so 2^53+1 does not equal 2^53 as a float.
func intEqFloat(i int64, f float64) bool {
	fi, ok := floatToInt(f)
	return ok && fi == i
}

// compareN orders two values the way Python does for the types JSON has: numbers with
// numbers, strings with strings, lists lexicographically. Anything else is a type error.
// It adds what it reads to *n (MaxRenderWork), as equalN does.
func compareN(op string, a, b any, n *int64) (int, error) {
	*n++
	if as, ok := a.(string); ok {
		if bs, ok := b.(string); ok {
			*n += int64(min(len(as), len(bs)))
			return strings.Compare(as, bs), nil
		}
	}
	ai, af, aInt, aok := toNum(a)
	bi, bf, bInt, bok := toNum(b)
	if aok && bok {
		if aInt && bInt {
			return cmpInt(ai, bi), nil
		}
		switch {
		case aInt:
			return -cmpFloatInt(bf, ai), nil
		case bInt:
			return cmpFloatInt(af, bi), nil
		}
		switch {
		case af < bf:
			return -1, nil
		case af > bf:
			return 1, nil
		}
		return 0, nil
	}
	if al, ok := a.([]any); ok {
		if bl, ok := b.([]any); ok {
			for i := 0; i < len(al) && i < len(bl); i++ {
				if equalN(al[i], bl[i], n) {
					continue
				}
				return compareN(op, al[i], bl[i], n)
			}
			return cmpInt(int64(len(al)), int64(len(bl))), nil
		}
	}
	return 0, fmt.Errorf("cannot compare %s and %s with %s", typeName(a), typeName(b), op)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpFloatInt orders a float against an int without losing the int's precision.
func cmpFloatInt(f float64, i int64) int {
	switch {
	case math.IsNaN(f):
		return 1
	case f < -(1 << 63):
		return -1
	case f >= 1<<63:
		return 1
	}
	t := math.Trunc(f)
	if c := cmpInt(int64(t), i); c != 0 {
		return c
	}
	switch {
	case f > t:
		return 1
	case f < t:
		return -1
	}
	return 0
}
