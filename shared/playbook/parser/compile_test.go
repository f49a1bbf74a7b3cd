package parser_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/tmpl"
)

// aliasedTemplate is the review's shape: one template of about 200 bytes,
// anchored once and aliased k times in a step's input.
func aliasedTemplate(k int) string {
	var b strings.Builder
	b.WriteString(header + "workflow:\n  - step: start\n    tool:\n      kind: noop\n      input:\n")
	b.WriteString(`        a: &t "{{ workload.base }}/items/{{ (workload.page | int) + 1 }}?q={{ workload.q | default('x') | lower }}&n={{ workload.n or 10 }}&s={{ workload.s ~ '-' ~ workload.t }}&f={{ workload.f | tojson }}"` + "\n")
	for i := range k {
		fmt.Fprintf(&b, "        k%d: *t\n", i)
	}
	return b.String()
}

// TestAliasedTemplateCompiledOnce: an aliased template is compiled once and
// the copies share it, so parsing costs what the source holds, not its
// expansion; every copy renders as the original.
func TestAliasedTemplateCompiledOnce(t *testing.T) {
	var pb *playbook.Playbook
	parseK := func(k int) float64 {
		src := aliasedTemplate(k)
		return testing.AllocsPerRun(1, func() {
			var ds playbook.Diagnostics
			if pb, ds = parser.Parse([]byte(src)); ds.HasErrors() {
				t.Fatal(ds)
			}
		})
	}
	few := parseK(10)
	many := parseK(4899)
	if pb.Expanded.Templates != 4900 || pb.Compiled.Templates != 1 {
		t.Fatalf("expanded %d templates, compiled %d; want 4900 and 1", pb.Expanded.Templates, pb.Compiled.Templates)
	}
	// Compiling one costs thousands of allocations; a copy costs its value's few.
	if per := (many - few) / 4889; per > 50 {
		t.Fatalf("each alias costs %.0f allocations: the template is compiled again", per)
	}
	seen := map[*tmpl.Template]bool{}
	pb.Step("start").Tool.Config.Templates(func(_ string, tp *tmpl.Template) { seen[tp] = true })
	if len(seen) != 1 {
		t.Fatalf("the copies hold %d distinct templates, want 1 shared", len(seen))
	}
	vars := map[string]any{"workload": map[string]any{"base": "http://h", "page": "2", "q": "AB", "s": "s", "t": 1, "f": []any{1}}}
	got, err := pb.Step("start").Tool.Config.Render(tmpl.Env{Vars: vars})
	if err != nil {
		t.Fatal(err)
	}
	input := got.(map[string]any)["input"].(map[string]any)
	want := `http://h/items/3?q=ab&n=10&s=s-1&f=[1]`
	for k, v := range input {
		if v != want {
			t.Fatalf("input.%s rendered %q, want %q", k, v, want)
		}
	}
}

// TestTemplateCostLimit: distinct templates whose programs would keep more
// than MaxTemplateCost are refused once, at the template that passed it, and
// nothing is compiled after it.
func TestTemplateCostLimit(t *testing.T) {
	// A chain of comparisons compiles to about 660 bytes per byte of text.
	chain := func(i int) string { return fmt.Sprintf("{{ a%d%s }}", i, strings.Repeat("<b", 64)) }
	one, _ := tmpl.Compile(chain(0))
	n := playbook.MaxTemplateCost/one.Cost() + 20
	var b strings.Builder
	b.WriteString(header + "workflow:\n  - step: start\n    tool:\n      kind: noop\n      input:\n")
	for i := range n {
		fmt.Fprintf(&b, "        k%05d: %q\n", i, chain(i))
	}
	pb, ds := parser.Parse([]byte(b.String()))
	errs := ds.Errors()
	if pb != nil || len(errs) != 1 || !strings.HasPrefix(errs[0].Path, "workflow[0].tool.input.k") ||
		!strings.Contains(errs[0].Message, fmt.Sprintf("more than %d (limit playbook.MaxTemplateCost, 32 MiB)", playbook.MaxTemplateCost)) {
		t.Fatalf("%d templates of %d bytes each: errors %v", n, len(chain(0)), errs)
	}
}

// retained is the heap a parse leaves behind, and the playbook.
func retained(t *testing.T, src string) (int, *playbook.Playbook) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	pb, ds := parser.Parse([]byte(src))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(pb)
	return int(after.HeapAlloc) - int(before.HeapAlloc), pb
}

// TestWeightTracksRetainedMemory: the playbook cache's estimate is within a
// factor of 2 of what a parsed playbook really keeps, for the shapes that cost
// the most: aliased templates, distinct costly templates, many steps, many
// arcs.
func TestWeightTracksRetainedMemory(t *testing.T) {
	steps := func(n, arcs int) string {
		var b strings.Builder
		b.WriteString(header + "workflow:\n")
		for i := range n {
			name := fmt.Sprintf("s%d", i)
			if i == 0 {
				name = "start"
			}
			var next []string
			for j := i + 1; j < n && j <= i+arcs; j++ {
				next = append(next, fmt.Sprintf("s%d", j))
			}
			fmt.Fprintf(&b, "- {step: %s, tool: {kind: noop}, next: [%s]}\n", name, strings.Join(next, ","))
		}
		return b.String()
	}
	distinct := func(n int, tmpl func(int) string) string {
		var b strings.Builder
		b.WriteString(header + "workflow:\n  - step: start\n    tool:\n      kind: noop\n      input:\n")
		for i := range n {
			fmt.Fprintf(&b, "        k%d: %q\n", i, tmpl(i))
		}
		return b.String()
	}
	for _, c := range []struct{ name, src string }{
		{"one template aliased 4899 times", aliasedTemplate(4899)},
		{"300 comparison chains", distinct(300, func(i int) string { return fmt.Sprintf("{{ a%d%s }}", i, strings.Repeat("<b", 64)) })},
		{"2000 url templates", distinct(2000, func(i int) string {
			return fmt.Sprintf("{{ workload.base }}/items/{{ item.id }}?page={{ (vars.page | int) + %d }}&q={{ workload.q | default('x') | lower }}", i)
		})},
		{"2000 steps in a chain", steps(playbook.MaxSteps, 1)},
		{"2000 steps of 40 arcs", steps(playbook.MaxSteps, 40)},
	} {
		kept, pb := retained(t, c.src)
		t.Logf("%s: %.2f", c.name, float64(pb.Weight())/float64(kept))
		if w := pb.Weight(); w < kept/2 || w > 2*kept {
			t.Errorf("%s: Weight %d bytes, retained %d", c.name, w, kept)
		}
	}
}
