package tmpl

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestReviewTemplateFailsOnWork is the security review's template: a loop
// testing membership in the list it walks. It read N² items within every other
// limit (N = 499,999: about half an hour holding the render's transaction); now
// it stops once it has read MaxRenderWork, naming the limit, with the iterations
// and what it built still within theirs.
func TestReviewTemplateFailsOnWork(t *testing.T) {
	src := "{% for L in [range(20000)] %}{% for i in L %}{% if -1 in L %}{% endif %}{% endfor %}{% endfor %}"
	b := NewBudget()
	_, err := renderWith(t, src, nil, b)
	wantBudgetError(t, src, err, "MaxRenderWork")
	if !strings.Contains(err.Error(), "test membership in a map instead of a list") {
		t.Errorf("message %q does not say how to fix it", err)
	}
	// It stops within one scan (20,000 items) and one iteration's calls of the limit.
	if w := b.Read(); w <= MaxRenderWork || w > MaxRenderWork+20_000+10 {
		t.Errorf("read %d, want just past %d", w, MaxRenderWork)
	}
	if b.iterations >= MaxLoopIterations/100 {
		t.Errorf("ran %d iterations: the scans, not the loop, should have stopped it", b.iterations)
	}
}

// workVars are the inputs of TestScanningLoopsFailOnWork: values a template
// reads without building them, so only what reading them costs can stop it.
func workVars(n int) map[string]any {
	big := make([]any, n)
	dups := make([]any, n)
	empties := make([]any, n)
	rows := make([]any, n)
	m := make(map[string]any, n)
	for i := range big {
		big[i] = int64(i)
		dups[i] = "same"
		empties[i] = ""
		rows[i] = map[string]any{"n": int64(i)}
		m[fmt.Sprintf("k%06d", i)] = int64(i)
	}
	return map[string]any{
		"big": big, "big2": slices.Clone(big), "dups": dups, "empties": empties, "rows": rows,
		"m": m, "m2": func() map[string]any {
			c := make(map[string]any, len(m))
			for k, v := range m {
				c[k] = v
			}
			return c
		}(),
		"s":   strings.Repeat("ab", 10*n), // lower case, no spaces, no "zz"
		"num": strings.Repeat("1", 10*n),
		"pad": strings.Repeat(" ", 20*n) + "1",
	}
}

// TestScanningLoopsFailOnWork: every operation whose time grows with its input,
// repeated in a loop, stops on the budget. Reading is charged against
// MaxRenderWork (here a budget of 1,000,000, so the loops stay small); what the
// operation builds is stopped by the build limits, as before.
func TestScanningLoopsFailOnWork(t *testing.T) {
	const n = 2000 // n iterations of a scan of n: 4,000,000 read
	vars := workVars(n)
	loop := func(cond string) string {
		return "{% for i in big %}{% if " + cond + " %}x{% endif %}{% endfor %}"
	}
	cases := []struct{ src, limit string }{
		{loop("-1 in big"), "MaxRenderWork"},
		{loop("-1 not in big"), "MaxRenderWork"},
		{loop("'zz' in s"), "MaxRenderWork"},
		{loop("big == big2"), "MaxRenderWork"},
		{loop("big != big2"), "MaxRenderWork"},
		{loop("big < big2"), "MaxRenderWork"},
		{loop("m == m2"), "MaxRenderWork"},
		{loop("s == s ~ ''"), "MaxRenderWork"},
		{loop("s|length == 0"), "MaxRenderWork"},
		{loop("len(s) == 0"), "MaxRenderWork"},
		{loop("big|min"), "MaxRenderWork"},
		{loop("big|max"), "MaxRenderWork"},
		{loop("s|min"), "MaxRenderWork"},
		{loop("big|sum"), "MaxRenderWork"},
		{loop("rows|sum(attribute='n')"), "MaxRenderWork"},
		{loop("(big|sort)[0]"), "MaxRenderWork"},
		{loop("(dups|unique)[0]"), "MaxRenderWork"},
		{loop("empties|join"), "MaxRenderWork"},
		{loop("m|first"), "MaxRenderWork"},
		{loop("m|last"), "MaxRenderWork"},
		{loop("s|lower == ''"), "MaxRenderWork"},
		{loop("s.lower() == ''"), "MaxRenderWork"},
		{loop("s|trim == ''"), "MaxRenderWork"},
		{loop("pad.strip() == ''"), "MaxRenderWork"},
		{loop("s|replace('zz', 'y') == ''"), "MaxRenderWork"},
		{loop("s.startswith(s)"), "MaxRenderWork"},
		{loop("pad|int"), "MaxRenderWork"},
		{loop("num|float"), "MaxRenderWork"},
		{loop("s|bool"), "MaxRenderWork"},
		{loop("pad|fromjson"), "MaxRenderWork"},
		{loop("s is lower"), "MaxRenderWork"},
		{loop("s[-1]"), "MaxRenderWork"},
		{loop("s[0:1]"), "MaxRenderWork"},
		{loop("m[s]"), "MaxRenderWork"},
		{loop("m.get(s)"), "MaxRenderWork"},
		{loop("s in m"), "MaxRenderWork"},
		{loop("m[s] is defined"), "MaxRenderWork"},
		// Cheap calls, many of them: each is a unit of work.
		{"{% for i in big %}" + strings.Repeat("{% if i %}{% endif %}", 600) + "{% endfor %}", "MaxRenderWork"},
		// These build what they read, and were bounded before.
		{loop("(big|reverse)[0]"), "MaxRenderElements"},
		{loop("(big + big2)[0]"), "MaxRenderElements"},
		{loop("(big|tojson) == ''"), "MaxRenderBytes"},
		{loop("s * 2 == ''"), "MaxRenderBytes"},
		{loop("s ~ s == ''"), "MaxRenderBytes"},
	}
	for _, c := range cases {
		t.Run(c.src[:min(len(c.src), 70)], func(t *testing.T) {
			b := NewBudget()
			b.maxWork = 1_000_000
			_, err := renderWith(t, c.src, vars, b)
			wantBudgetError(t, c.src, err, c.limit)
			// Past the limit by at most one step's reading (the largest input).
			if w := b.Read(); w > b.maxWork+int64(len(vars["pad"].(string)))+1000 {
				t.Errorf("read %d", w)
			}
		})
	}
}

// TestScansChargeWhatTheyRead: ordinary templates using each scanning operation
// render what they did, and charge the items visited and bytes scanned.
func TestScansChargeWhatTheyRead(t *testing.T) {
	vars := map[string]any{
		"xs": []any{int64(3), int64(1), int64(2)}, "s": "Hello", "m": map[string]any{"a": int64(1), "b": int64(2)},
		"rows": []any{map[string]any{"n": int64(2)}, map[string]any{"n": int64(5)}}, "k": "a",
		"words": []any{"b", "A", "c", "a"},
	}
	cases := []struct {
		src  string
		want any
		work int64
	}{
		// Flat: no Budget at all.
		{"{{ m.a }}", int64(1), 0},
		{"{{ xs[0] + 1 }}", int64(4), 0},
		{"{{ xs|length }}", int64(3), 0},
		{"{{ xs|first }}", int64(3), 0},
		{"{{ xs|default(1) }}", []any{int64(3), int64(1), int64(2)}, 0},
		// A value each, deeply; a string's bytes when the lengths agree.
		{"{{ 2 in xs }}", true, 3},
		{"{{ 4 not in xs }}", true, 3},
		{"{{ 'a' in m }}", true, 2},
		{"{{ 'll' in s }}", true, 7},
		{"{{ s == 'Hellx' }}", false, 6},
		{"{{ s == 'Hi' }}", false, 1},
		{"{{ xs == [3, 1, 2] }}", true, 4},
		{"{{ m == {'a': 1, 'b': 2} }}", true, 5},
		{"{{ xs < [3, 1, 4] }}", true, 5},
		{"{{ s < 'Help' }}", true, 5},
		{"{{ m[k] }}", int64(1), 2},
		{"{{ m.get(k) }}", int64(1), 2},
		{"{{ s[-1] }}", "o", 6},
		{"{{ s[1:3] }}", "el", 5},
		{"{{ s|length }}", int64(5), 5},
		{"{{ xs|min }}", int64(1), 5},
		{"{{ xs|max }}", int64(3), 5},
		{"{{ s|max }}", "o", 21}, // 5 bytes, 4 comparisons of 2 and folding 2
		{"{{ xs|sum }}", int64(6), 3},
		{"{{ rows|sum(attribute='n') }}", int64(7), 6},
		{"{{ xs|sort }}", []any{int64(1), int64(2), int64(3)}, 12},
		{"{{ words|sort }}", []any{"A", "a", "b", "c"}, 36}, // 12 estimated, 4 items, 5 comparisons of 4
		{"{{ words|unique }}", []any{"b", "A", "c"}, 20},
		{"{{ xs|join('-') }}", "3-1-2", 3},
		{"{{ m|first }}", "a", 4},
		{"{{ m|last }}", "b", 4},
		{"{{ s|lower }}", "hello", 5},
		{"{{ s.upper() }}", "HELLO", 5},
		{"{{ s|replace('l', 'L') }}", "HeLLo", 6},
		{"{{ s.startswith('He') }}", true, 3},
		{"{{ s|trim }}", "Hello", 5},
		{"{{ '42'|int }}", int64(42), 2},
		{"{{ s is lower }}", false, 5},
		{"{{ '[1]'|fromjson }}", []any{int64(1)}, 3},
		// A loop: each iteration charges its calls ($acc, $cat, $t, $eq, $cat)
		// and what == read.
		{"{% for x in xs %}{% if x == 1 %}{{ x }}{% endif %}{% endfor %}", "1", 3*5 + 3},
	}
	for _, c := range cases {
		t.Run(c.src, func(t *testing.T) {
			b := NewBudget()
			got, err := renderWith(t, c.src, vars, b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("= %#v, want %#v", got, c.want)
			}
			if w := b.Read(); w != c.work {
				t.Errorf("read %d, want %d", w, c.work)
			}
		})
	}
}

// TestEmptyListRepetition: [] * n is [] whatever n, at once (it looped n times).
func TestEmptyListRepetition(t *testing.T) {
	got, err := renderWith(t, "{{ [] * 1000000000000 }}", nil, NewBudget())
	if err != nil || !reflect.DeepEqual(got, []any{}) {
		t.Fatalf("= %#v, %v", got, err)
	}
}

// flatHelpers are the helpers that get no Budget: their work does not grow
// with their arguments, so a template calling only them binds none. Adding
// one is a decision: it must not scan a list, a map or a string.
var flatHelpers = []string{
	"$div", "$empty", "$f_abs", "$f_default", "$f_round", "$floordiv", "$get", "$is_boolean",
	"$is_divisibleby", "$is_even", "$is_false", "$is_float", "$is_integer", "$is_iterable", "$is_mapping",
	"$is_none", "$is_number", "$is_odd", "$is_sequence", "$is_string", "$is_true", "$loop", "$mod", "$neg",
	"$pos", "$pow", "$sub", "$t", "$token", "$unpack",
}

// TestFlatHelpers: the flat list is exactly flatHelpers, every flat helper is
// free, and a path of short constant keys compiles to the flat $get, so
// rendering `{{ a.b[0] }}` takes no Budget, while a computed or long key is
// charged.
func TestFlatHelpers(t *testing.T) {
	var got []string
	for name, h := range helpers {
		if h.flat {
			got = append(got, name)
			if !h.free {
				t.Errorf("%s is flat but not free", name)
			}
		}
	}
	sort.Strings(got)
	if !slices.Equal(got, flatHelpers) {
		t.Fatalf("flat helpers %v, want %v", got, flatHelpers)
	}
	for src, metered := range map[string]bool{
		"{{ m.a.b[0]['c'] }}": false,
		"{{ m[k] }}":          true,
		"{{ m[-1] }}":         true,
		"{{ m[65] }}":         true,
		"{{ m['" + strings.Repeat("k", maxFlatKey+1) + "'] }}": true,
	} {
		tp, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		if tp.metered != metered {
			t.Errorf("%.40q: metered %v, want %v", src, tp.metered, metered)
		}
	}
}
