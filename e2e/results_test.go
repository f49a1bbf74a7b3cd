package e2e

import (
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/wire"
	"github.com/noetl-go/noetl/shared/worker"
)

// TestLargeResultsByReference: worker.md §1 — results over the worker's inline
// limit (64 KiB of JSON by default) are stored in the result store and posted
// by reference; the server reads them back when a later template needs them,
// for a single step and for loop iterations. The log keeps only references.
func TestLargeResultsByReference(t *testing.T) {
	shared.startWorkers(t, "big-results", 2)
	path := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: big_results, path: e2e/big_results}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        result = {"rows": [{"i": i, "pad": "x" * 40} for i in range(10000)]}
    next: each
  - step: each
    loop: {in: "{{ [0, 1] }}", iterator: k}
    tool:
      kind: python
      input: {k: "{{ k }}"}
      code: |
        result = {"k": k, "blob": "y" * 300000}
    next: summary
  - step: summary
    tool:
      kind: noop
      result:
        rows: "{{ start.rows | length }}"
        last: "{{ start.rows[-1].i }}"
        second_k: "{{ each.results[1].k }}"
        blob: "{{ each.results[0].blob | length }}"
`)
	id, view := shared.run(t, wire.ExecuteRequest{Path: path, Pool: "big-results"})
	if view.Status != "COMPLETED" {
		t.Fatalf("status %v error %v", view.Status, view.Error)
	}
	want := map[string]any{"rows": int64(10000), "last": int64(9999), "second_k": int64(1), "blob": int64(300000)}
	got, _ := step(view, "summary").Result.V.(map[string]any)
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("summary saw %s = %v (%T), want %v; whole result %v", k, got[k], got[k], v, got)
		}
	}
	refs := 0
	for _, ev := range shared.events(t, id) {
		if ev.EventType != "command.completed" || ev.NodeName == "summary" {
			continue
		}
		r := ev.Result
		ref, _ := r["reference"].(map[string]any)
		uri, _ := ref["logical_uri"].(string)
		if !strings.HasPrefix(uri, shared.srv.Results.URL()+"/") {
			t.Fatalf("command.completed of %v carries no reference into the stack's result store: %v", ev.NodeName, r)
		}
		if c, _ := r["context"].(map[string]any); c["data"] != nil || r["status"] != "success" {
			t.Fatalf("command.completed of %v must keep the tool's status and no data: %v", ev.NodeName, r)
		}
		refs++
	}
	if refs != 3 {
		t.Fatalf("%d command.completed events carried references, want 3 (start and two iterations)", refs)
	}
	shared.verify(t, id)
}

// TestLargeResultWithoutStore: a worker with no result store fails a step whose
// result is over its inline limit, saying what to change, and keeps running.
func TestLargeResultWithoutStore(t *testing.T) {
	shared.startWorkers(t, "big-no-store", 1, func(w *worker.Standard) { w.Results, w.InlineLimit = nil, 1024 })
	path := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: big_no_store, path: e2e/big_no_store}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        result = {"blob": "z" * 5000}
`)
	_, view := shared.run(t, wire.ExecuteRequest{Path: path, Pool: "big-no-store"})
	e := string(view.Error)
	if view.Status != "FAILED" || !strings.Contains(e, "inline limit of 1024") || !strings.Contains(e, "--result-store") {
		t.Fatalf("status %v error %q, want FAILED naming the inline limit and --result-store", view.Status, e)
	}
	small := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: small_no_store, path: e2e/small_no_store}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'ok': True}"}
`)
	if _, view := shared.run(t, wire.ExecuteRequest{Path: small, Pool: "big-no-store"}); view.Status != "COMPLETED" {
		t.Fatalf("the worker stopped serving after the refused result: %v", view.Status)
	}
}
