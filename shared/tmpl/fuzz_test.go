package tmpl

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fuzzEnv() Env {
	return Env{Vars: testVars(), Now: time.Unix(1700000000, 0)}
}

var fuzzSeeds = []string{
	"{{ n }}", "a {{ s|upper }} b", "{% for x in xs %}{{ loop.index }}{{ x }}{% endfor %}",
	"{% if n > 1 %}a{% elif t %}b{% else %}c{% endif %}", "{{ m.in.x|default('d') ~ xs[1:] }}",
	"{{ {'a': [1, 2.5, none]}|tojson }}", "{{ json|fromjson }}", "{{ 1 < n < 10 and s or f }}",
	"{{ users|map(attribute='name')|join(',') }}", "{{ x is defined }}", "{{ now() }}",
	"{{ '\\x41\\u00e9' * 2 }}", "{{- n -}}", "}} { } {# x #}", "{{ range(3)|sum }}",
	"{{ s.split(' ')|reverse|first }}", "{{ 7 // -2 ** 2 % 3 }}", "{% for k, v in m|items %}{{k}}{% endfor %}",
	"{{ xs[::-1][0:2] }}", "{{ m.get('a', 1) is number }}", "{{ 'x' if n is odd else 'y' }}",
	"{{ users|sort(attribute='age', reverse=true)|map(attribute='name')|list }}", "{{ xs|unique|sum(start=1) }}",
	"{{ f|round(1, 'floor') }} {{ '0x1f'|int(0, 16) }} {{ n|float }}", "{{ not (n in xs) and m['in'] }}",
	"{% for x in xs %}{% for y in x|string %}{{ loop.index }}{{ y }}{% endfor %}{% else %}-{% endfor %}",
	"{{ {'a': n, s: [1, 2][-1]}|items|dict|tojson(2) }}", "{{ csv|split(',')|join('|')|upper|length }}",
}

// errorIsBug flags failures that only a bug in the engine produces: Go runtime panics
// that expr's VM recovered, and generated code expr rejected.
func errorIsBug(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "runtime error") || strings.Contains(s, "internal:") ||
		strings.Contains(s, "interface conversion") || strings.Contains(s, "invalid memory")
}

func FuzzCompile(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tp, err := Compile(src)
		if err != nil {
			if errorIsBug(err) {
				t.Fatalf("%q: %v", src, err)
			}
			te, ok := err.(*Error)
			if !ok || te.Template != src || te.Offset < 0 || te.Offset > len(src) || te.Line < 1 || te.Column < 1 {
				t.Fatalf("%q: bad error %#v", src, err)
			}
			_ = te.Error()
			return
		}
		if tp.IsLiteral() != !HasTemplate(src) {
			t.Fatalf("%q: IsLiteral = %v", src, tp.IsLiteral())
		}
		out, err := tp.Render(fuzzEnv())
		if errorIsBug(err) {
			t.Fatalf("%q: %v", src, err)
		}
		// Rendering is deterministic: map order never shows.
		out2, err2 := tp.Render(fuzzEnv())
		if !reflect.DeepEqual(out, out2) || (err == nil) != (err2 == nil) || (err != nil && err.Error() != err2.Error()) {
			t.Fatalf("%q: renders differ: %#v, %v / %#v, %v", src, out, err, out2, err2)
		}
		if err != nil {
			if te, ok := err.(*Error); !ok || te.Offset < 0 || te.Offset > len(src) {
				t.Fatalf("%q: bad render error %#v", src, err)
			}
			return
		}
		if !inConvention(out) {
			t.Fatalf("%q: rendered a value outside the jsonx convention: %#v", src, out)
		}
		if !tp.IsNative() {
			if _, ok := out.(string); !ok {
				t.Fatalf("%q: non-native template rendered %T", src, out)
			}
			return
		}
		// The same expression inside text renders the value's text form.
		mixed, err := Compile("<" + src + ">")
		if err != nil {
			t.Fatalf("%q: native compiles but mixed does not: %v", src, err)
		}
		mout, err := mixed.Render(fuzzEnv())
		var be *BudgetError
		if errors.As(err, &be) && be.Limit == "MaxRenderBytes" {
			// Writing the value as text builds its bytes a second time: a
			// value just under the text budget natively (say '0'*1e7) may go
			// over it in text, and a budget error is the bounded answer.
			return
		}
		if err != nil {
			t.Fatalf("%q: native renders but mixed fails: %v", src, err)
		}
		if ms, ok := mout.(string); !ok || !strings.Contains(ms, Text(out)) {
			t.Fatalf("%q: mixed render %#v does not hold %q", src, mout, Text(out))
		}
	})
}

// inConvention reports whether v uses only jsonx's value kinds, recursively.
func inConvention(v any) bool {
	switch x := v.(type) {
	case nil, string, bool, int64:
		return true
	case float64:
		return !math.IsNaN(x) && !math.IsInf(x, 0)
	case []any:
		for _, e := range x {
			if !inConvention(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !inConvention(e) {
				return false
			}
		}
		return true
	}
	return false
}

// FuzzRender drives expressions against values from the fuzzer, so filters and
// operators see arbitrary strings and numbers.
func FuzzRender(f *testing.F) {
	exprs := []string{
		"x|int", "x|float", "x|fromjson", "x|split(y)", "x|replace(y, 'z')", "x * y", "x + y",
		"x // y", "x % y", "x ** y", "x[y]", "x[y:]", "x in y", "x < y", "x|round(y)", "x|trim(y)",
		"x|list|sort", "x|unique", "range(y)", "x|tojson|fromjson == x", "x.split(y)",
	}
	for i := range exprs {
		f.Add(uint8(i), "12", "3", int64(4), 2.5)
	}
	f.Add(uint8(0), "9223372036854775808", "", int64(-9223372036854775808), -0.0)
	f.Fuzz(func(t *testing.T, which uint8, xs, ys string, xi int64, xf float64) {
		src := "{{ " + exprs[int(which)%len(exprs)] + " }}"
		tp, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []any{xs, xi, xf, []any{xs, xi}, map[string]any{xs: xi}} {
			for _, y := range []any{ys, xi, xf, nil} {
				_, err := tp.Render(Env{Vars: map[string]any{"x": x, "y": y}})
				if errorIsBug(err) {
					t.Fatalf("%s with x=%#v y=%#v: %v", src, x, y, err)
				}
			}
		}
	})
}

// FuzzRenderBudget chains operations that multiply what a template builds, as the
// fuzzer picks them, and renders against a small budget: every render either
// succeeds within the budget or fails with an error that is not a bug; the budget
// never draws past its limits, and a result never holds more than the budget plus
// the inputs.
func FuzzRenderBudget(f *testing.F) {
	starts := []string{"s", "xs", "m", "'ab'", "[s, s]", "range(n)", "{'a': s, 'b': xs}", "[[s]]"}
	ops := []func(x string) string{
		func(x string) string { return x + "|replace('a', 'aaaa')" },
		func(x string) string { return "(" + x + ") * 7" },
		func(x string) string { return "(" + x + ") ~ (" + x + ")" },
		func(x string) string { return "(" + x + ") + (" + x + ")" },
		func(x string) string { return "[" + x + ", " + x + "]" },
		func(x string) string { return "{'k': " + x + ", 'j': " + x + "}" },
		func(x string) string { return x + "|join(s)" },
		func(x string) string { return x + "|tojson" },
		func(x string) string { return x + "|tojson(4)" },
		func(x string) string { return x + "|list" },
		func(x string) string { return x + "|items" },
		func(x string) string { return x + "|string" },
		func(x string) string { return x + "|map('string')" },
		func(x string) string { return "[" + x + "]|sum(start=[])" },
		func(x string) string { return x + "|upper" },
		func(x string) string { return x + "|split('a')" },
		func(x string) string { return x + "|unique|sort" },
		func(x string) string { return "(" + x + ")[::-1]" },
		func(x string) string { return "(" + x + ").replace('', s)" },
		func(x string) string { return x + "|first" },
		func(x string) string { return x + "|map('replace', 'a', s)" },
		func(x string) string { return "range(n)|map('string')|join(" + x + "|string)" },
	}
	f.Add([]byte{0, 0, 0, 0}, "aaaa", uint8(10), false)
	f.Add([]byte{3, 2, 2, 2, 2}, "abc", uint8(3), true)
	f.Add([]byte{4, 1, 4, 1, 4, 1}, "x", uint8(200), false)
	f.Add([]byte{5, 8, 6, 18}, "a-a", uint8(50), true)
	f.Add([]byte{2, 13, 13, 13}, "ab", uint8(20), false)
	cache := NewCache(1 << 12) // compiling is most of an input's cost; shapes recur
	f.Fuzz(func(t *testing.T, prog []byte, s string, n uint8, loop bool) {
		if len(prog) == 0 {
			return
		}
		s = s[:min(len(s), 256)]
		x := starts[int(prog[0])%len(starts)]
		for _, p := range prog[1:min(len(prog), 7)] {
			if next := ops[int(p)%len(ops)](x); len(next) <= 600 {
				x = next
			}
		}
		src := "{{ " + x + " }}"
		if loop {
			src = "{% for i in range(n) %}" + src + "{% endfor %}"
		}
		tp, err := cache.Compile(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		vars := map[string]any{"s": s, "n": int64(n % 64), "xs": []any{s, int64(n), []any{s}}, "m": map[string]any{"a": s, "b": []any{s}}}
		in, _ := measure(vars, extent{1 << 62, 1 << 62})
		b := newBudget(1<<14, 1<<8)
		out, err := tp.Render(Env{Vars: vars, Budget: b})
		if errorIsBug(err) {
			t.Fatalf("%s: %v", src, err)
		}
		if bytes, elems := b.Built(); bytes > b.maxBytes || elems > b.maxElems {
			t.Fatalf("%s: built %d bytes and %d elements past the budget", src, bytes, elems)
		}
		if err != nil {
			return
		}
		if got, _ := measure(out, extent{1 << 62, 1 << 62}); got.bytes > b.maxBytes+in.bytes || got.elems > b.maxElems+in.elems {
			t.Fatalf("%s: result of %+v past the budget and the inputs", src, got)
		}
	})
}
