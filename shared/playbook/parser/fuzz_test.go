package parser_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

// FuzzParse: malformed playbooks yield diagnostics, never a panic; whatever parses
// without errors is within the expansion limits, and also starts and runs in the
// simulator without a panic. Seeds include alias, merge-key and workbook bombs.
func FuzzParse(f *testing.F) {
	f.Add([]byte(header + "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: [start]\n"))
	f.Add([]byte(header + "workflow:\n  - step: start\n    loop: {in: \"{{ 3 }}\", iterator: i}\n    tool: {kind: noop}\n    next: {arcs: [{step: b, when: \"{{ i }}\"}]}\n  - step: b\n    tool: [{x: {kind: noop}}]\n"))
	f.Add([]byte("{{{"))
	f.Add([]byte("- a\n- b"))
	f.Add([]byte(header + "workflow: &w\n  - *w\n"))
	f.Add([]byte(laughs(9, 9)))
	f.Add([]byte(laughs(4, 3)))
	f.Add([]byte(header + "workload:\n  t: &t \"{{ execution_id }}\"\n  l: [*t, *t, {k: *t}]\n" + noopWorkflow))
	f.Add([]byte(header + "workload: &w {a: *w}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n"))
	f.Add([]byte(header + "workload:\n  m: &m {a: 1, b: [2, 3]}\n  n: &n {<<: [*m, *m], c: {<<: *m}}\n  o: {<<: *n, ? *m : 1}\n" +
		"workflow:\n  - step: start\n    tool: &t {kind: noop, input: {x: *n}}\n    next: [b]\n  - step: b\n    tool: *t\n"))
	f.Add([]byte(header + "workbook:\n  - name: w\n    tool: &t {kind: noop, input: {rows: [1, 2, 3]}}\n  - name: v\n    tool: {kind: workbook, name: w}\n" +
		"workflow:\n  - step: start\n    tool: {kind: workbook, name: v}\n    next: [b]\n  - step: b\n    tool: {kind: workbook, name: w, input: {more: *t}}\n"))
	if d, err := conformance.Locate("."); err == nil {
		files, _ := filepath.Glob(filepath.Join(d, "playbooks", "*.yaml"))
		for _, file := range files {
			if src, err := os.ReadFile(file); err == nil {
				f.Add(src)
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		// A hang would stall the fuzzer silently; crashing instead makes it save
		// the input as a crasher.
		w := time.AfterFunc(30*time.Second, func() { panic("FuzzParse: one input ran for 30s") })
		defer w.Stop()
		pb, ds := parser.Parse(src)
		if pb == nil {
			if !ds.HasErrors() {
				t.Fatal("no playbook and no error")
			}
			return
		}
		if ds.HasErrors() {
			t.Fatal("a playbook with errors was returned")
		}
		if x := pb.Expanded; x.Nodes > playbook.MaxExpandedNodes || x.Bytes > playbook.MaxExpandedBytes ||
			x.Templates > playbook.MaxTemplates || x.TemplateBytes > playbook.MaxTemplateBytes {
			t.Fatalf("accepted a playbook expanding to %+v", pb.Expanded)
		}
		s := enginetest.New(pb, 1)
		// Small limits keep each input fast: a fuzzed {{ 1000000 }} loop is valid.
		s.Engine = engine.New(engine.Config{MaxLoopItems: 500})
		if err := s.Start(nil); err != nil {
			return // e.g. a workload template that cannot render: an error, not a panic
		}
		_ = s.RunToEnd(200)
	})
}
