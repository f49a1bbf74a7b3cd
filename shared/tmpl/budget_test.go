package tmpl

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
)

// renderWith renders src against vars drawing from b.
func renderWith(t *testing.T, src string, vars map[string]any, b *Budget) (any, error) {
	t.Helper()
	tp, err := Compile(src)
	if err != nil {
		t.Fatalf("%q: %v", src, err)
	}
	return tp.Render(Env{Vars: vars, Budget: b})
}

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// wantBudgetError checks err is the budget's, naming limit.
func wantBudgetError(t *testing.T, src string, err error, limit string) {
	t.Helper()
	var be *BudgetError
	if !errors.As(err, &be) || be.Limit != limit {
		t.Fatalf("%.80q: want a %s budget error, got %v", src, limit, err)
	}
	var te *Error
	if !errors.As(err, &te) || te.Line < 1 || !strings.Contains(err.Error(), "render budget exceeded") || !strings.Contains(err.Error(), "limit "+limit) {
		t.Fatalf("%.80q: error %q does not locate the template and name the limit", src, err)
	}
}

// TestChainedReplaceFailsOnBudget is the 277-byte case: each replace
// multiplies a long string by ten. The third would build 100 MB; it fails, naming
// the budget and its size, having built no more than the budget allows.
func TestChainedReplaceFailsOnBudget(t *testing.T) {
	src := "{{ ('a' * 100000)|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa') }}"
	b := NewBudget()
	var err error
	alloc := allocated(func() { _, err = renderWith(t, src, nil, b) })
	wantBudgetError(t, src, err, "MaxRenderBytes")
	if !strings.Contains(err.Error(), "more than 16 MiB of text (limit MaxRenderBytes = 16777216 bytes per render)") {
		t.Fatalf("message %q", err)
	}
	var te *Error
	errors.As(err, &te)
	if want := strings.LastIndex(src, "|replace") + 1; te.Offset != want {
		t.Errorf("error at offset %d, want %d (the third replace)", te.Offset, want)
	}
	bytes, _ := b.Built()
	if bytes != 100_000+1_000_000+10_000_000 {
		t.Errorf("built %d bytes before refusing; want the first two results", bytes)
	}
	if alloc > 3*MaxRenderBytes {
		t.Errorf("the refused render allocated %d bytes", alloc)
	}
}

// TestMultiplyingTemplatesFailOnBudget: every way a template multiplies what it
// builds ends in a budget error, allocating a bounded amount.
func TestMultiplyingTemplatesFailOnBudget(t *testing.T) {
	six := strings.Repeat("x", 6<<20)
	deep := any(int64(1))
	for range 3000 {
		deep = []any{deep}
	}
	vars := map[string]any{
		"six":   six,
		"lists": slices.Repeat([]any{[]any{int64(1), int64(2), int64(3)}}, 2000),
		"deep":  deep,
		"n":     int64(100),
	}
	cases := []struct{ src, limit string }{
		{"{{ 'x' * 20000000 }}", "MaxRenderBytes"},
		{"{{ ('x' * 1000000) ~ ('x' * 1000000) ~ ('x' * 1000000) ~ ('x' * 1000000) ~ ('x' * 1000000) ~ ('x' * 1000000) ~ ('x' * 1000000) ~ ('x' * 1000000) ~ ('x' * 1000000) }}", "MaxRenderBytes"},
		{"{{ six ~ six ~ six }}", "MaxRenderBytes"},
		{"{{ six + six + six }}", "MaxRenderBytes"},
		{"{{ [six, six, six] }}", "MaxRenderBytes"},
		{"{{ {'a': six, 'b': six, 'c': six} }}", "MaxRenderBytes"},
		{"{{ [six] * 3 }}", "MaxRenderBytes"},
		{"{{ [[[1] * 1000] * 1000] * 1000 }}", "MaxRenderElements"},
		{"{{ [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10] * 1000] * 1000 }}", "MaxRenderElements"},
		{"{{ range(5000000) }}", "MaxRenderElements"},
		{"{{ range(n)|map('string')|join('x' * 1000000) }}", "MaxRenderBytes"},
		{"{{ range(n)|map('string')|map('replace', '', 'x' * 1000000) }}", "MaxRenderBytes"},
		{"{{ ('a' * 10000)|replace('', 'b' * 10000) }}", "MaxRenderBytes"},
		{"{{ ('a' * 10000).replace('a', 'b' * 10000) }}", "MaxRenderBytes"},
		{"{{ deep|tojson(16) }}", "MaxRenderBytes"},
		{"{{ lists|sum(start=[]) }}", "MaxRenderElements"},
		{"{{ (six ~ six)|upper }}", "MaxRenderBytes"},
		{"{{ six|list }}", "MaxRenderElements"},
		{"{{ [six, six, six]|tojson }}", "MaxRenderBytes"},
		{"{% for i in range(1000) %}{{ 'x' * 100000 }}{% endfor %}", "MaxRenderBytes"},
		{"{% for i in range(200) %}{% for j in range(200) %}{{ [i, j] * 100 }}{% endfor %}{% endfor %}", "MaxRenderElements"},
	}
	for _, c := range cases {
		t.Run(c.src[:min(len(c.src), 60)], func(t *testing.T) {
			b := NewBudget()
			var err error
			alloc := allocated(func() { _, err = renderWith(t, c.src, vars, b) })
			wantBudgetError(t, c.src, err, c.limit)
			if bytes, elems := b.Built(); bytes > MaxRenderBytes || elems > MaxRenderElements {
				t.Errorf("built %d bytes and %d elements", bytes, elems)
			}
			// Inputs here are up to 6 MiB; a step may allocate a few times what it
			// builds, never the multiplied size.
			if alloc > 8*MaxRenderBytes {
				t.Errorf("allocated %d bytes", alloc)
			}
		})
	}
}

// TestBudgetJustUnderLimit: building exactly the limit is fine; a byte or an
// element more is not.
func TestBudgetJustUnderLimit(t *testing.T) {
	b := NewBudget()
	out, err := renderWith(t, fmt.Sprintf("{{ 'x' * %d }}", MaxRenderBytes), nil, b)
	if err != nil || len(out.(string)) != MaxRenderBytes {
		t.Fatalf("exactly MaxRenderBytes: %v", err)
	}
	if bytes, elems := b.Built(); bytes != MaxRenderBytes || elems != 0 {
		t.Fatalf("built %d bytes, %d elements", bytes, elems)
	}
	_, err = renderWith(t, fmt.Sprintf("{{ 'x' * %d }}", MaxRenderBytes+1), nil, NewBudget())
	wantBudgetError(t, "one byte more", err, "MaxRenderBytes")

	b = NewBudget()
	out, err = renderWith(t, fmt.Sprintf("{{ range(%d) }}", MaxRenderElements), nil, b)
	if err != nil || len(out.([]any)) != MaxRenderElements {
		t.Fatalf("exactly MaxRenderElements: %v", err)
	}
	if _, elems := b.Built(); elems != MaxRenderElements {
		t.Fatalf("built %d elements", elems)
	}
	_, err = renderWith(t, fmt.Sprintf("{{ range(%d) }}", MaxRenderElements+1), nil, NewBudget())
	wantBudgetError(t, "one element more", err, "MaxRenderElements")
}

// TestPassingValuesOnIsFree: a template that hands on what it was given, or a
// part of it, builds nothing, however large the value.
func TestPassingValuesOnIsFree(t *testing.T) {
	big := strings.Repeat("y", 2*MaxRenderBytes)
	rows := make([]any, 2*MaxRenderElements)
	vars := map[string]any{"big": big, "rows": rows, "m": map[string]any{"rows": rows, "big": big}}
	for _, src := range []string{
		"{{ big }}", "{{ rows }}", "{{ m.rows }}", "{{ m['big'] }}", "{{ m.get('rows') }}", "{{ rows|first }}",
		"{{ rows|length }}", "{{ big|length }}", "{{ m.nope|default(big) }}", "{{ big if rows else 1 }}", "{{ big|lower }}",
		"{{ big ~ '' }}", "{{ big|string }}", "{{ big in big }}", "{{ rows == rows }}",
	} {
		b := NewBudget()
		if _, err := renderWith(t, src, vars, b); err != nil {
			t.Errorf("%s: %v", src, err)
		}
		if bytes, elems := b.Built(); bytes != 0 || elems != 0 {
			t.Errorf("%s: built %d bytes and %d elements", src, bytes, elems)
		}
	}
	// Wrapping a value builds a copy of it once stored: it counts in full.
	_, err := renderWith(t, "{{ {'rows': rows} }}", vars, NewBudget())
	wantBudgetError(t, "wrapping", err, "MaxRenderElements")
}

// TestBudgetSharedAcrossRenders: a Budget passed to several renders bounds them
// together, and a Value's leaves share one.
func TestBudgetSharedAcrossRenders(t *testing.T) {
	b := NewBudget()
	src := "{{ 'x' * 10000000 }}"
	if _, err := renderWith(t, src, nil, b); err != nil {
		t.Fatal(err)
	}
	_, err := renderWith(t, src, nil, b)
	wantBudgetError(t, src, err, "MaxRenderBytes")
	if bytes, _ := b.Built(); bytes != 10_000_000 {
		t.Fatalf("a refused render drew %d bytes", bytes-10_000_000)
	}

	leaves := map[string]any{}
	for i := range 100 {
		leaves[fmt.Sprintf("k%03d", i)] = "{{ 'x' * 1000000 }}"
	}
	v, errs := CompileValue(leaves)
	if errs != nil {
		t.Fatal(errs)
	}
	_, err = v.Render(Env{})
	wantBudgetError(t, "100 leaves", err, "MaxRenderBytes")
	var te *Error
	if errors.As(err, &te); te.Path != "k016" {
		t.Fatalf("failed at %q, want the 17th leaf k016", te.Path)
	}
}

// freeHelpers are the helpers whose results the budget does not charge. Adding
// one is a decision: it must return an argument, a part of one, a number, a bool
// or a single character, which TestFreeHelpers checks.
var freeHelpers = []string{
	"$div", "$empty", "$eq", "$f_abs", "$f_bool", "$f_default", "$f_first", "$f_float", "$f_int", "$f_last",
	"$f_length", "$f_max", "$f_min", "$f_round", "$floordiv", "$ge", "$get", "$getw", "$gt", "$has", "$in",
	"$is_boolean", "$is_divisibleby", "$is_even", "$is_false", "$is_float", "$is_integer", "$is_iterable",
	"$is_lower", "$is_mapping", "$is_none", "$is_number", "$is_odd", "$is_sequence", "$is_string", "$is_true",
	"$is_upper", "$le", "$lookup", "$loop", "$lt", "$mod", "$neg", "$pos", "$pow", "$sub", "$t", "$token", "$unpack",
}

// TestFreeHelpers: the free list is exactly freeHelpers, and each free helper,
// on every combination of sample arguments, returns nothing it built ($loop's
// per-iteration map is bounded by MaxLoopIterations instead).
func TestFreeHelpers(t *testing.T) {
	var got []string
	for name, h := range helpers {
		if h.free {
			got = append(got, name)
		}
	}
	sort.Strings(got)
	if !slices.Equal(got, freeHelpers) {
		t.Fatalf("free helpers %v, want %v", got, freeHelpers)
	}
	pool := []any{nil, int64(0), int64(3), 2.5, true, "abc", "common", []any{int64(1), "x", []any{"y"}}, map[string]any{"a": []any{"z"}, "b": "w"}}
	for _, name := range freeHelpers {
		if name == "$loop" || name == "$token" {
			continue // $token only ever fails: it returns nothing at all
		}
		h := helpers[name]
		calls := 0
		for arity := 1; arity <= 3; arity++ {
			for _, args := range tuples(pool, arity) {
				out, err, ok := callSafely(h, args)
				if !ok || err != nil {
					continue // too few arguments for this helper, or refused
				}
				calls++
				if !buildsNothing(out, args) {
					t.Errorf("%s%v returned %#v, which it built", name, args, out)
				}
			}
		}
		if calls == 0 {
			t.Errorf("%s: no sample call succeeded", name)
		}
	}
}

func tuples(pool []any, n int) [][]any {
	if n == 0 {
		return [][]any{nil}
	}
	var out [][]any
	for _, rest := range tuples(pool, n-1) {
		for _, v := range pool {
			out = append(out, append(slices.Clone(rest), v))
		}
	}
	return out
}

func callSafely(h helper, args []any) (out any, err error, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	out, err = NewBudget().call(h, args)
	return out, err, true
}

// buildsNothing: v is a scalar that cannot grow, a single character, or an
// argument or a part of one.
func buildsNothing(v any, args []any) bool {
	switch x := v.(type) {
	case nil, bool, int64, float64:
		return true
	case string:
		if len(x) <= 4 {
			return true
		}
	}
	var within func(a any) bool
	within = func(a any) bool {
		if same(v, a) {
			return true
		}
		switch y := a.(type) {
		case []any:
			return slices.ContainsFunc(y, within)
		case map[string]any:
			for _, e := range y {
				if within(e) {
					return true
				}
			}
		}
		return false
	}
	return slices.ContainsFunc(args, within)
}

// TestIndentedLen matches json.Indent's output length.
func TestIndentedLen(t *testing.T) {
	for _, v := range []any{
		nil, "a\"b\\c", []any{}, map[string]any{}, []any{int64(1), []any{}, map[string]any{"k": []any{"x", "]"}}},
		map[string]any{"a": map[string]any{"b": []any{int64(1), int64(2)}, "c": "{[,:]}"}, "d": map[string]any{}},
	} {
		for _, indent := range []int64{0, 2, 16} {
			got, err := fToJSON(NewBudget(), v, []any{indent})
			if err != nil {
				t.Fatal(err)
			}
			compact, _ := fToJSON(NewBudget(), v, []any{nil})
			if n := indentedLen([]byte(compact.(string)), int(indent)); n != int64(len(got.(string))) {
				t.Errorf("%v indent %d: indentedLen %d, actual %d", v, indent, n, len(got.(string)))
			}
		}
	}
}

// TestSliceMatchesPython: slicing walks strings instead of converting them; it
// still matches Python's slice semantics on lists and strings, bounds and steps
// of every sign, multi-byte characters included.
func TestSliceMatchesPython(t *testing.T) {
	// pyIndices is CPython's slice.indices followed by range().
	pyIndices := func(n int64, lo, hi, step any) []int64 {
		st := int64(1)
		if step != nil {
			st = step.(int64)
		}
		lower, upper := int64(0), n
		if st < 0 {
			lower, upper = -1, n-1
		}
		bound := func(v any, dflt int64) int64 {
			if v == nil {
				return dflt
			}
			i := v.(int64)
			if i < 0 {
				i = max(i+n, lower)
			} else {
				i = min(i, upper)
			}
			return i
		}
		start, stop := bound(lo, lower), bound(hi, upper)
		if st < 0 {
			start, stop = bound(lo, upper), bound(hi, lower)
		}
		var out []int64
		for i := start; (st > 0 && i < stop) || (st < 0 && i > stop); i += st {
			out = append(out, i)
		}
		return out
	}
	str := "añ€𝄞bcdé"
	runes := []rune(str)
	list := []any{int64(0), int64(1), int64(2), int64(3), int64(4), int64(5), int64(6), int64(7)}
	bounds := []any{nil, int64(-9), int64(-3), int64(-1), int64(0), int64(2), int64(5), int64(9)}
	for _, lo := range bounds {
		for _, hi := range bounds {
			for _, step := range []any{nil, int64(-3), int64(-1), int64(1), int64(2), int64(5)} {
				idx := pyIndices(int64(len(runes)), lo, hi, step)
				var wantS strings.Builder
				wantL := []any{}
				for _, i := range idx {
					wantS.WriteRune(runes[i])
					wantL = append(wantL, list[i])
				}
				gotS, err := slice(str, lo, hi, step)
				if err != nil || gotS != wantS.String() {
					t.Errorf("%q[%v:%v:%v] = %q, %v; want %q", str, lo, hi, step, gotS, err, wantS.String())
				}
				gotL, err := slice(list, lo, hi, step)
				if err != nil || !slices.Equal(gotL.([]any), wantL) {
					t.Errorf("list[%v:%v:%v] = %v, %v; want %v", lo, hi, step, gotL, err, wantL)
				}
			}
		}
	}
	for i, want := range []any{"a", "ñ", "€", "𝄞", "b", "c", "d", "é", nil} {
		if got := getItem(str, int64(i)); got != want {
			t.Errorf("%q[%d] = %v, want %v", str, i, got, want)
		}
		if i < len(runes) {
			if got := getItem(str, int64(i-len(runes))); got != want {
				t.Errorf("%q[%d] = %v, want %v", str, i-len(runes), got, want)
			}
		}
	}
}

// TestTokenFails: token() compiles, is reported as unsupported, and fails when
// rendered with an error naming it (R-N1).
func TestTokenFails(t *testing.T) {
	tp, err := Compile("Bearer {{ token(google_auth) }}")
	if err != nil {
		t.Fatal(err)
	}
	if got := tp.Unsupported(); !slices.Equal(got, []string{"token()"}) {
		t.Fatalf("Unsupported() = %v", got)
	}
	if _, err := tp.Render(Env{Vars: map[string]any{"google_auth": "g"}}); err == nil || !strings.Contains(err.Error(), "token() is not supported") {
		t.Fatalf("render error = %v", err)
	}
	if _, err := Compile("{{ token(a, b) }}"); err == nil {
		t.Fatal("token() with two arguments compiled")
	}
}
