package tmpl_test

import (
	"fmt"
	"time"

	"github.com/noetl-go/noetl/shared/tmpl"
)

// A template that is one expression renders to its native value; anything
// else renders to text, each expression in the R-T2 text form.
func ExampleCompile() {
	vars := map[string]any{"workload": map[string]any{"region": "eu", "limit": int64(10), "tags": []any{"a", "b"}}}
	for _, src := range []string{
		"{{ workload.limit * 2 }}",
		"{{ workload.tags }}",
		"region {{ workload.region | upper }}, limit {{ workload.limit }}",
		"{% for t in workload.tags %}[{{ t }}]{% endfor %}",
		"{{ workload.missing | default('none') }}",
	} {
		t, err := tmpl.Compile(src)
		if err != nil {
			fmt.Println(err)
			continue
		}
		v, err := t.Render(tmpl.Env{Vars: vars})
		fmt.Printf("%T %v %v\n", v, v, err)
	}
	// Output:
	// int64 20 <nil>
	// []interface {} [a b] <nil>
	// string region EU, limit 10 <nil>
	// string [a][b] <nil>
	// string none <nil>
}

// now() is the time of the triggering event, never the clock, so a replay
// renders the same text (R-T4).
func ExampleEnv_now() {
	t, err := tmpl.Compile("started {{ now() }}")
	if err != nil {
		fmt.Println(err)
		return
	}
	v, err := t.Render(tmpl.Env{Now: time.Date(2024, 5, 6, 5, 8, 9, 123000000, time.UTC)})
	fmt.Println(v, err)
	// Output:
	// started 2024-05-06T05:08:09.123Z <nil>
}

// CompileValue compiles every template in a YAML-shaped value (a step's
// args, say) once; Render renders them all against one Env.
func ExampleCompileValue() {
	v, errs := tmpl.CompileValue(map[string]any{
		"url":    "https://api.example.com/{{ workload.region }}/orders",
		"params": map[string]any{"page": "{{ page + 1 }}", "fixed": true},
	})
	if len(errs) > 0 {
		fmt.Println(errs)
		return
	}
	out, err := v.Render(tmpl.Env{Vars: map[string]any{"workload": map[string]any{"region": "eu"}, "page": int64(1)}})
	fmt.Println(out, err)
	// Output:
	// map[params:map[fixed:true page:2] url:https://api.example.com/eu/orders] <nil>
}

// An undefined name or member is null (R-T5); when conditions use WhenTrue.
func ExampleWhenTrue() {
	t, _ := tmpl.Compile("{{ ctx.total > 100 and ctx.user.name }}")
	for _, ctx := range []map[string]any{
		{"total": int64(250), "user": map[string]any{"name": "ada"}},
		{"total": int64(250)},
		{"total": int64(5), "user": map[string]any{"name": "ada"}},
	} {
		v, err := t.Render(tmpl.Env{Vars: map[string]any{"ctx": ctx}})
		fmt.Println(v, tmpl.WhenTrue(v), err)
	}
	// Output:
	// ada true <nil>
	// <nil> false <nil>
	// false false <nil>
}
