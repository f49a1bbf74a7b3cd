package parser_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/tmpl"
)

// laughs is a billion-laughs bomb in workload: levels lists of width aliases each,
// the first holding width scalars.
func laughs(levels, width int) string {
	var b strings.Builder
	b.WriteString(header + "workload:\n")
	items := make([]string, width)
	for i := range items {
		items[i] = `"lol"`
	}
	fmt.Fprintf(&b, "  l0: &l0 [%s]\n", strings.Join(items, ","))
	for l := 1; l < levels; l++ {
		for i := range items {
			items[i] = fmt.Sprintf("*l%d", l-1)
		}
		fmt.Fprintf(&b, "  l%d: &l%d [%s]\n", l, l, strings.Join(items, ","))
	}
	b.WriteString(noopWorkflow)
	return b.String()
}

// expansionError parses src, expects it refused, and returns the one error.
func expansionError(t *testing.T, src string) playbook.Diagnostic {
	t.Helper()
	pb, ds := parser.Parse([]byte(src))
	if pb != nil {
		t.Fatalf("accepted a playbook expanding to %+v", pb.Expanded)
	}
	errs := ds.Errors()
	if len(errs) != 1 {
		t.Fatalf("want one error, got %v", errs)
	}
	return errs[0]
}

// TestAliasBombRefused: the billion laughs (9 levels of 9) is refused
// with the limit and the path where it was passed, after a few thousand
// allocations: the parser counts the expansion instead of building it.
func TestAliasBombRefused(t *testing.T) {
	src := laughs(9, 9)
	if len(src) > 600 {
		t.Fatalf("the bomb is %d bytes; the issue's is 528", len(src))
	}
	var d playbook.Diagnostic
	allocs := testing.AllocsPerRun(1, func() { d = expansionError(t, src) })
	if d.Path != "workload.l5[0]" || !strings.Contains(d.Message, fmt.Sprintf("more than %d YAML nodes (limit MaxExpandedNodes)", playbook.MaxExpandedNodes)) ||
		!strings.Contains(d.Message, "alias *l4 here adds 66430 nodes") || d.Line == 0 {
		t.Fatalf("diagnostic %+v", d)
	}
	if allocs > 5000 {
		t.Fatalf("refusing a %d-byte bomb took %.0f allocations", len(src), allocs)
	}
	// A deeper bomb (9^20 nodes, past int64 if multiplied out) ends the same way.
	d = expansionError(t, laughs(20, 9))
	if d.Path != "workload.l5[0]" {
		t.Fatalf("deep bomb: %+v", d)
	}
}

// TestAliasExpansionJustUnderLimit: aliases are fine up to the limit; the count
// is exact, so one node more is refused.
func TestAliasExpansionJustUnderLimit(t *testing.T) {
	// A list of k aliases to a list of w scalars is 1 + k*(1+w) nodes; the
	// playbook around it is fixed. Measure the frame, then fill up to the limit.
	frame := func(k int) string {
		return header + "workload:\n  base: &b [" + strings.Repeat("1,", 99) + "1]\n  copies: [" +
			strings.TrimSuffix(strings.Repeat("*b,", k), ",") + "]\n" + noopWorkflow
	}
	pb, ds := parser.Parse([]byte(frame(1)))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	k := 1 + (playbook.MaxExpandedNodes-pb.Expanded.Nodes)/101
	pb, ds = parser.Parse([]byte(frame(k)))
	if ds.HasErrors() {
		t.Fatalf("%d copies: %v", k, ds)
	}
	if pb.Expanded.Nodes > playbook.MaxExpandedNodes || pb.Expanded.Nodes+101 <= playbook.MaxExpandedNodes {
		t.Fatalf("%d copies expand to %d nodes; want just under %d", k, pb.Expanded.Nodes, playbook.MaxExpandedNodes)
	}
	if got := len(pb.Workload["copies"].([]any)); got != k {
		t.Fatalf("workload.copies has %d entries, want %d", got, k)
	}
	d := expansionError(t, frame(k+1))
	if d.Path != fmt.Sprintf("workload.copies[%d]", k) {
		t.Fatalf("one copy more: %+v", d)
	}
}

// TestAliasBytesRefused: a long scalar repeated by aliases passes the byte limit
// long before the node limit.
func TestAliasBytesRefused(t *testing.T) {
	long := strings.Repeat("x", 64<<10)
	src := header + "workload:\n  s: &s " + long + "\n  copies: [" + strings.TrimSuffix(strings.Repeat("*s,", 80), ",") + "]\n" + noopWorkflow
	d := expansionError(t, src)
	want := fmt.Sprintf("more than %d bytes of YAML text (limit MaxExpandedBytes, 4 MiB)", playbook.MaxExpandedBytes)
	if !strings.HasPrefix(d.Path, "workload.copies[") || !strings.Contains(d.Message, want) {
		t.Fatalf("diagnostic %+v", d)
	}
}

// TestMergeKeyBombRefused: merge keys expand like aliases.
func TestMergeKeyBombRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString(header + "workload:\n  m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}\n")
	for l := 1; l < 12; l++ {
		fmt.Fprintf(&b, "  m%d: &m%d {x: {<<: *m%d}, y: {<<: *m%d}, z: {<<: [*m%d, *m%d]}}\n", l, l, l-1, l-1, l-1, l-1)
	}
	b.WriteString(noopWorkflow)
	d := expansionError(t, b.String())
	if !strings.HasPrefix(d.Path, "workload.m") || !strings.Contains(d.Message, "limit MaxExpandedNodes") {
		t.Fatalf("diagnostic %+v", d)
	}
}

// TestRecursiveAliasRefused: an alias inside its own anchor has no expansion;
// it is an error, not endless recursion.
func TestRecursiveAliasRefused(t *testing.T) {
	for _, body := range []string{
		"workload: &w {a: *w}\n" + noopWorkflow,
		"workload: {a: 1}\nworkflow: &w\n  - step: start\n    tool: {kind: noop, input: {again: *w}}\n",
		"workload: {a: 1}\nworkflow:\n  - &s {step: start, tool: {kind: noop}, next: {arcs: [*s]}}\n",
	} {
		d := expansionError(t, header+body)
		if !strings.Contains(d.Message, "refers to a node that contains it") {
			t.Errorf("%s: %+v", body, d)
		}
	}
}

// TestWorkbookReferencesCountTheirEntry: every `kind: workbook` reference copies
// its entry, so references count like aliases.
func TestWorkbookReferencesCountTheirEntry(t *testing.T) {
	big := "[" + strings.TrimSuffix(strings.Repeat("1,", 5000), ",") + "]"
	steps := func(n int) string {
		var b strings.Builder
		b.WriteString(header + "workbook:\n  - name: heavy\n    tool: {kind: noop, input: {rows: " + big + "}}\nworkflow:\n")
		for i := range n {
			name := fmt.Sprintf("s%d", i)
			if i == 0 {
				name = "start"
			}
			fmt.Fprintf(&b, "  - step: %s\n    tool: {kind: workbook, name: heavy}\n", name)
		}
		return b.String()
	}
	pb, ds := parser.Parse([]byte(steps(3)))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	one, _ := parser.Parse([]byte(steps(2)))
	if per := pb.Expanded.Nodes - one.Expanded.Nodes; per < 5000 {
		t.Fatalf("a reference adds %d nodes; its entry holds over 5000", per)
	}
	pb, ds = parser.Parse([]byte(steps(40)))
	if pb != nil {
		t.Fatalf("40 references to a 5000-node entry accepted: %+v", pb.Expanded)
	}
	errs := ds.Errors()
	if len(errs) != 1 || !strings.HasPrefix(errs[0].Path, "workflow[") || !strings.HasSuffix(errs[0].Path, "].tool.name") ||
		!strings.Contains(errs[0].Message, "once workbook references are expanded") || !strings.Contains(errs[0].Message, "limit MaxExpandedNodes") {
		t.Fatalf("errors %v", errs)
	}
}

// TestConformanceExpansionHeadroom: every real playbook this parser accepts is far
// under both limits (the figures the limits' doc cites), so the limits refuse
// bombs, never playbooks people write.
func TestConformanceExpansionHeadroom(t *testing.T) {
	dir := conformanceDir(t)
	var most playbook.Expansion
	accepted, mostCost, mostTags := 0, 0, 0
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || (filepath.Ext(path) != ".yaml" && filepath.Ext(path) != ".yml") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pb, _ := parser.Parse(src)
		if pb == nil {
			return nil
		}
		accepted++
		x := pb.Expanded
		most = playbook.Expansion{Nodes: max(most.Nodes, x.Nodes), Bytes: max(most.Bytes, x.Bytes),
			Templates: max(most.Templates, x.Templates), TemplateBytes: max(most.TemplateBytes, x.TemplateBytes)}
		if x.Nodes > playbook.MaxExpandedNodes/20 || x.Bytes > playbook.MaxExpandedBytes/20 ||
			x.Templates > playbook.MaxTemplates/20 || x.TemplateBytes > playbook.MaxTemplateBytes/20 {
			t.Errorf("%s expands to %+v: within 20x of the limits", path, x)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(src, &doc); err != nil {
			return err
		}
		tags := longestTags(&doc)
		mostTags = max(mostTags, tags)
		if tags > playbook.MaxTemplateTagBytes/20 {
			t.Errorf("%s: a template holds %d bytes inside tags, within 20x of MaxTemplateTagBytes", path, tags)
		}
		mostCost = max(mostCost, pb.Compiled.Cost)
		if pb.Compiled.Cost > playbook.MaxTemplateCost/20 {
			t.Errorf("%s: its compiled templates keep %d bytes, within 20x of MaxTemplateCost", path, pb.Compiled.Cost)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if accepted < 100 {
		t.Fatalf("only %d conformance playbooks parsed; expected the corpus", accepted)
	}
	t.Logf("%d playbooks; the largest expand to %d nodes, %d bytes, %d templates, %d bytes of template text; the most inside one template's tags is %d bytes; their compiled templates keep at most %d bytes",
		accepted, most.Nodes, most.Bytes, most.Templates, most.TemplateBytes, mostTags, mostCost)
}

// longestTags is the most bytes inside one scalar's template tags under n.
func longestTags(n *yaml.Node) int {
	most := tmpl.TagBytes(n.Value)
	for _, c := range n.Content {
		most = max(most, longestTags(c))
	}
	return most
}

// TestTemplateLimits: templates are counted as aliases and references expand:
// compiling them is the cost, so keys, never compiled, do not count; python code
// is rendered as NoETL renders it, so it counts. Past MaxTemplates or MaxTemplateBytes the playbook is refused before
// anything is compiled.
func TestTemplateLimits(t *testing.T) {
	pb := parse(t, `
workload: {w: "{{ execution_id }}"}
workflow:
  - step: start
    tool:
      kind: python
      code: "print('{{ not compiled }}')"
      input: {"{{ key }}": 1, a: &t "{{ workload.w }}", b: *t, c: plain}
`)
	if x := pb.Expanded; x.Templates != 4 || x.TemplateBytes != len("{{ execution_id }}")+2*len("{{ workload.w }}")+len("print('{{ not compiled }}')") {
		t.Fatalf("counted %+v; want the workload template, the code and the aliased input template twice", x)
	}

	var many strings.Builder
	many.WriteString(header + "workflow:\n  - step: start\n    tool:\n      kind: noop\n      input:\n")
	for i := range playbook.MaxTemplates + 1 {
		fmt.Fprintf(&many, "        k%d: \"{{ %d }}\"\n", i, i)
	}
	d := expansionError(t, many.String())
	if d.Path != fmt.Sprintf("workflow[0].tool.input.k%d", playbook.MaxTemplates) || !strings.Contains(d.Message, "more than 5000 templates (limit MaxTemplates)") {
		t.Fatalf("diagnostic %+v", d)
	}

	long := "{{ 1 }}" + strings.Repeat("x", 60<<10)
	d = expansionError(t, header+"workload:\n  t: &t \""+long+"\"\n  copies: ["+strings.TrimSuffix(strings.Repeat("*t, ", 17), ", ")+"]\n"+noopWorkflow)
	if d.Path != "workload.copies[16]" || !strings.Contains(d.Message, "bytes of template text (limit MaxTemplateBytes, 1 MiB)") {
		t.Fatalf("diagnostic %+v", d)
	}

}

// TestTemplateTagLimit: one template is bounded by the bytes inside its tags,
// which is what compiling grows with, not by its length: a long SQL text or
// python code with one small tag is accepted, and one tag too large to compile
// is refused, naming the field and the limit, before anything compiles.
func TestTemplateTagLimit(t *testing.T) {
	sql := strings.Repeat("insert into t values (1, 'x');\n", 70_000/31) + "select * from {{ workload.schema }}.t;\n"
	py := "def main():\n" + strings.Repeat("    print('{%d}' % 1)\n", 70_000/22) + "    return {}\n"
	pb := parse(t, "workload: {schema: s}\nworkflow:\n  - step: start\n    tool:\n      kind: postgres\n      command: "+strconv.Quote(sql)+
		"\n    next: [{step: py}]\n  - step: py\n    tool:\n      kind: python\n      code: "+strconv.Quote(py)+"\n")
	if len(sql) <= playbook.MaxTemplateTagBytes || len(py) <= playbook.MaxTemplateTagBytes || pb.Compiled.Cost > 2*len(sql)+4096 {
		t.Fatalf("sql %d bytes, code %d bytes, compiled cost %d: want texts over the limit, compiled to little more than the SQL", len(sql), len(py), pb.Compiled.Cost)
	}

	tag := "{{ [" + strings.Repeat("x == 1, ", playbook.MaxTemplateTagBytes/8) + "1] }}"
	d := expansionError(t, header+"workload:\n  t: \"a{{ 1 }}"+tag+"b\"\n"+noopWorkflow)
	want := fmt.Sprintf("this template holds %d bytes inside {{ }} and {%% %%} tags, more than %d (limit playbook.MaxTemplateTagBytes, 64 KiB)", len(tag)+len("{{ 1 }}"), playbook.MaxTemplateTagBytes)
	if d.Path != "workload.t" || !strings.Contains(d.Message, want) || !strings.Contains(d.Message, "python step") {
		t.Fatalf("diagnostic %+v; want %q", d, want)
	}
}

const noopWorkflow = "workflow:\n  - step: start\n    tool: {kind: noop}\n"
