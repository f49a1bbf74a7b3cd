package tmpl

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestCompileValue(t *testing.T) {
	in := map[string]any{
		"url":     "https://x/{{ m.in.x }}",
		"limit":   "{{ n * 2 }}",
		"plain":   "00123",
		"num":     int64(5),
		"raw":     3, // a Go int is normalised to int64
		"nested":  map[string]any{"list": []any{"{{ xs|first }}", "lit", map[string]any{"q": "{{ s|lower }}"}}},
		"static":  map[string]any{"a": []any{int64(1), "b"}},
		"{{ k }}": "keys are literal",
	}
	v, errs := CompileValue(in)
	if errs != nil {
		t.Fatal(errs)
	}
	if v.IsLiteral() {
		t.Fatal("IsLiteral")
	}
	if got, want := v.Roots(), []string{"m", "n", "s", "xs"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Roots() = %v, want %v", got, want)
	}
	got, err := v.Render(testEnv())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"url":     "https://x/deep",
		"limit":   int64(14),
		"plain":   "00123",
		"num":     int64(5),
		"raw":     int64(3),
		"nested":  map[string]any{"list": []any{int64(3), "lit", map[string]any{"q": "hello world"}}},
		"static":  map[string]any{"a": []any{int64(1), "b"}},
		"{{ k }}": "keys are literal",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Render = %#v", got)
	}
	// The input is copied at compile time and the output is fresh on every render.
	in["url"] = "changed"
	got.(map[string]any)["static"].(map[string]any)["a"].([]any)[0] = "mutated"
	again, _ := v.Render(testEnv())
	if !reflect.DeepEqual(again, want) {
		t.Fatalf("second Render = %#v", again)
	}
}

func TestCompileValueLiteral(t *testing.T) {
	for _, in := range []any{"text", int64(1), nil, []any{"a", map[string]any{"b": true}}, map[string]any{}} {
		v, errs := CompileValue(in)
		if errs != nil {
			t.Fatal(errs)
		}
		if !v.IsLiteral() || len(v.Roots()) != 0 {
			t.Fatalf("%#v: IsLiteral=%v Roots=%v", in, v.IsLiteral(), v.Roots())
		}
		got, err := v.Render(Env{})
		if err != nil || !reflect.DeepEqual(got, in) {
			t.Fatalf("%#v: Render = %#v, %v", in, got, err)
		}
	}
}

func TestCompileValueErrors(t *testing.T) {
	in := map[string]any{
		"params": map[string]any{"offset": "{{ n | nope }}", "ok": "{{ n }}"},
		"items":  []any{"fine", "{{ x", map[string]any{"url": "{% set a = 1 %}"}},
		"a.b":    "{{ 1 + }}",
		"top":    "{{ ) }}",
	}
	v, errs := CompileValue(in)
	if v != nil {
		t.Fatal("a Value despite errors")
	}
	var got []string
	for _, e := range errs {
		got = append(got, e.Path+" @"+fmt.Sprint(e.Line)+":"+fmt.Sprint(e.Column))
		if !strings.HasPrefix(e.Error(), e.Path+": template ") {
			t.Errorf("Error() = %q", e.Error())
		}
	}
	want := []string{`["a.b"] @1:8`, "items[1] @1:1", "items[2].url @1:4", "params.offset @1:8", "top @1:4"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("errors at %v, want %v", got, want)
	}
}

func TestValueRenderErrorPath(t *testing.T) {
	v, errs := CompileValue(map[string]any{"a": []any{"ok", map[string]any{"b": "{{ 1 // z }}"}}})
	if errs != nil {
		t.Fatal(errs)
	}
	_, err := v.Render(testEnv())
	var te *Error
	if !errors.As(err, &te) || te.Path != "a[1].b" || te.Column != 6 || !strings.Contains(te.Msg, "division by zero") {
		t.Fatalf("got %v", err)
	}
	// The shared template's own error is not changed by the path.
	tp, _ := Compile("{{ 1 // z }}")
	_, err = tp.Render(testEnv())
	if err.(*Error).Path != "" {
		t.Fatal("path leaked into a template error")
	}
}

// TestConcurrentRender renders one Template and one Value from many goroutines; run
// with -race.
func TestConcurrentRender(t *testing.T) {
	tp, err := Compile("{% for u in users %}{{ u.name|upper }}{{ loop.index * k }}{% endfor %}|{{ now() }}")
	if err != nil {
		t.Fatal(err)
	}
	val, errs := CompileValue(map[string]any{"x": "{{ k + 1 }}", "y": []any{"{{ users|map(attribute='age')|sum }}"}})
	if errs != nil {
		t.Fatal(errs)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				k := int64(i*1000 + j)
				vars := testVars()
				vars["k"] = k
				env := Env{Vars: vars, Now: testNow}
				got, err := tp.Render(env)
				want := fmt.Sprintf("ANN%dBOB%d|2024-05-06T05:08:09.123Z", k, 2*k)
				if err != nil || got != want {
					t.Errorf("got %v, %v; want %v", got, err, want)
					return
				}
				vg, err := val.Render(env)
				if err != nil || !reflect.DeepEqual(vg, map[string]any{"x": k + 1, "y": []any{int64(55)}}) {
					t.Errorf("value got %v, %v", vg, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestCache(t *testing.T) {
	c := NewCache(2)
	a1, err := c.Compile("{{ a }}")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := c.Compile("{{ a }}")
	if a1 != a2 {
		t.Fatal("cache miss on the same text")
	}
	if _, err := c.Compile("plain"); err != nil || cacheLen(c) != 1 {
		t.Fatalf("literal cached: len %d, %v", cacheLen(c), err)
	}
	c.Compile("{{ b }}")
	c.Compile("{{ a }}") // a is now most recent
	c.Compile("{{ c }}") // evicts b
	if cacheLen(c) != 2 {
		t.Fatalf("len %d", cacheLen(c))
	}
	if a3, _ := c.Compile("{{ a }}"); a3 != a1 {
		t.Fatal("a was evicted instead of b")
	}
	_, e1 := c.Compile("{{ x|nope }}")
	_, e2 := c.Compile("{{ x|nope }}")
	var te1, te2 *Error
	if !errors.As(e1, &te1) || !errors.As(e2, &te2) || te1 == te2 || te1.Msg != te2.Msg {
		t.Fatalf("cached errors: %v %v", e1, e2)
	}
	te1.Path = "mutated"
	if _, e3 := c.Compile("{{ x|nope }}"); e3.(*Error).Path != "" {
		t.Fatal("a caller's change reached the cached error")
	}
	if NewCache(0).max != 1 {
		t.Fatal("NewCache(0) is unbounded")
	}
	// Concurrent use.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 100 {
				src := fmt.Sprintf("{{ v%d }}", (i+j)%5)
				tp, err := c.Compile(src)
				if err != nil || tp.Source() != src {
					t.Errorf("%q: %v", src, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if cacheLen(c) > 2 {
		t.Fatalf("cache grew to %d", cacheLen(c))
	}
}

// cacheLen is the number of templates c holds.
func cacheLen(c *Cache) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
