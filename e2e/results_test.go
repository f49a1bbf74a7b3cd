package e2e

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/resultstore"
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

// TestLargeResultWithoutStore: a worker with no result store of its own
// (noetl worker without --result-store) hands a result over its inline limit
// to the server (PUT /api/result) and posts its noetl:// reference; the next
// step reads it three ways (its code's context, a template in its input,
// the artifact tool through _ref), each through the server (GET
// /api/result/resolve), and the run completes. A result the server's route
// cannot take (over wire.MaxStagedResultBytes) is never sent: its step
// fails at once naming the size, the limit and --result-store, and the
// worker keeps serving. No lease expires: the product's default lease
// (defaultLease).
func TestLargeResultWithoutStore(t *testing.T) {
	st := shared.defaultLease(t)
	st.startWorkers(t, "big-no-store", 1, func(w *worker.Standard) { w.Results = nil })
	path := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: big_no_store, path: e2e/big_no_store}
workflow:
  - step: start
    tool:
      kind: python
      input: {size: "{{ workload.size }}"}
      code: |
        result = {"blob": "z" * size}
    next: by_code
  - step: by_code
    tool: {kind: python, code: "result = {'length': len(context['start']['blob'])}"}
    next: by_input
  - step: by_input
    tool: {kind: python, input: {blob: "{{ start.blob }}"}, code: "result = {'length': len(blob)}"}
    next: by_artifact
  - step: by_artifact
    tool: {kind: artifact, action: get, result_ref: "{{ start._ref }}"}
`)
	const size = 100 << 10
	id, view := st.runSummary(t, wire.ExecuteRequest{Path: path, Pool: "big-no-store", Payload: map[string]any{"size": int64(size)}})
	if view.Status != "COMPLETED" {
		t.Fatalf("status %v error %s, want COMPLETED", view.Status, view.Error)
	}
	evs := shared.events(t, id)
	staged := func(name string) (string, map[string]any) {
		for _, e := range evs {
			if e.EventType == "command.completed" && string(e.NodeName) == name {
				ref, _ := e.Result["reference"].(map[string]any)
				uri, _ := ref["logical_uri"].(string)
				if !strings.HasPrefix(uri, fmt.Sprintf("noetl://execution/%d/result/", id)) {
					t.Fatalf("%s's result was posted as %q, want a noetl:// reference of execution %d (staged with the server)", name, uri, id)
				}
				v, err := resultstore.ReadJSON(context.Background(), shared.srv.Results, uri, id)
				if err != nil {
					t.Fatalf("%s's staged result: %v", name, err)
				}
				m, _ := v.(map[string]any)
				return uri, m
			}
		}
		t.Fatalf("no command.completed of %s", name)
		return "", nil
	}
	uri, start := staged("start")
	if blob, _ := start["blob"].(string); len(blob) != size {
		t.Fatalf("the server keeps start's blob as %d bytes, want %d", len(blob), size)
	}
	for _, name := range []string{"by_code", "by_input"} {
		if got, _ := exitOf(evs, name); !reflect.DeepEqual(got, map[string]any{"length": int64(size)}) {
			t.Fatalf("%s read %v, want the whole blob (%d)", name, got, size)
		}
	}
	// The artifact tool's answer holds the blob again: staged in its turn.
	_, art := staged("by_artifact")
	if data, _ := art["data"].(map[string]any); art["uri"] != uri || data["blob"] != start["blob"] {
		t.Fatalf("the artifact tool read %.200v, want start's result from %s", art, uri)
	}
	if n := count(evs, "command.expired", "") + count(evs, "command.retry", ""); n != 0 {
		t.Fatalf("%d expiries and retries; the run must end within its leases", n)
	}
	shared.verify(t, id)

	// Over what the server's route takes: never sent, the step fails at once.
	_, view = st.runSummary(t, wire.ExecuteRequest{Path: path, Pool: "big-no-store", Payload: map[string]any{"size": int64(6 << 20)}})
	e := string(view.Error)
	for _, want := range []string{"is 6291467 bytes of JSON", "inline limit of 65536", "at most 5242880 bytes (5 MiB, wire.MaxStagedResultBytes)", "--result-store"} {
		if view.Status != "FAILED" || !strings.Contains(e, want) {
			t.Fatalf("status %v error %q, want FAILED naming %q", view.Status, e, want)
		}
	}
	small := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: small_no_store, path: e2e/small_no_store}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'ok': True}"}
`)
	if _, view := st.run(t, wire.ExecuteRequest{Path: small, Pool: "big-no-store"}); view.Status != "COMPLETED" {
		t.Fatalf("the worker stopped serving after the refused result: %v", view.Status)
	}
}

// TestRefMarkerReadsOnlyItsExecution: a step cannot read another execution's
// stored result by writing NoETL's _ref_load marker into its input (the form
// the engine hands a later step's result in): the worker loads a marker of
// the step's own execution, and fails the step on one of another's, naming
// it, with nothing of its data read (docs/security.md).
func TestRefMarkerReadsOnlyItsExecution(t *testing.T) {
	shared.startWorkers(t, "ref-scope", 1)
	victim := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: ref_victim, path: e2e/ref_victim}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'secret': 'k' * 70000}"}
`)
	vid, view := shared.run(t, wire.ExecuteRequest{Path: victim, Pool: "ref-scope"})
	if view.Status != "COMPLETED" {
		t.Fatalf("victim: status %v error %v", view.Status, view.Error)
	}
	var theirs string
	for _, ev := range shared.events(t, vid) {
		if ev.EventType == "command.completed" {
			ref, _ := ev.Result["reference"].(map[string]any)
			theirs, _ = ref["logical_uri"].(string)
		}
	}
	if !strings.HasPrefix(theirs, shared.srv.Results.URL()+"/") {
		t.Fatalf("the victim's result was not stored by reference in the stack's store: %q", theirs)
	}
	thief := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: ref_thief, path: e2e/ref_thief}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'mine': 'm' * 70000}"}
    next: own
  - step: own
    tool:
      kind: python
      input: {got: {_ref_load: {uri: "{{ start._ref.uri }}"}}}
      code: "result = {'length': len(got['mine'])}"
    next: steal
  - step: steal
    tool:
      kind: python
      input: {got: {_ref_load: {uri: "{{ workload.victim }}"}}}
      code: "result = {'stolen': got}"
`)
	id, view := shared.run(t, wire.ExecuteRequest{Path: thief, Pool: "ref-scope", Payload: map[string]any{"victim": theirs}})
	e := string(view.Error)
	if view.Status != "FAILED" || !strings.Contains(e, theirs) || !strings.Contains(e, fmt.Sprintf("not a result of execution %d", id)) || strings.Contains(e, "kkkk") {
		t.Fatalf("status %v error %.300q, want FAILED naming %s as not of execution %d", view.Status, e, theirs, id)
	}
	evs := shared.events(t, id)
	if got, _ := exitOf(evs, "own"); !reflect.DeepEqual(got, map[string]any{"length": int64(70000)}) {
		t.Fatalf("own read %v, want its own execution's result (70000)", got)
	}
	for _, ev := range evs {
		if string(ev.NodeName) == "steal" && (ev.EventType == "command.completed" || ev.EventType == "step.exit" && ev.Status == "COMPLETED") {
			t.Fatalf("steal completed: %v", ev)
		}
	}
}

// TestChildReturnStepOverOneMiB: a child's return_step result stored by
// reference (here 2 MB of rows) reaches the parent whole, as NoETL hands it,
// not as a {_ref} marker naming the child's object, which the parent's steps
// may not read (the result store reads only an execution's own objects).
func TestChildReturnStepOverOneMiB(t *testing.T) {
	shared.startWorkers(t, "child-big", 2)
	registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: child_big, path: e2e/child_big}
workflow:
  - step: start
    tool: {kind: noop}
    next: load
  - step: load
    tool:
      kind: python
      code: |
        result = {"rows": [{"i": i, "pad": "x" * 60} for i in range(25000)]}
`)
	path := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: parent_big, path: e2e/parent_big}
workflow:
  - step: start
    tool: {kind: noop}
    next: call
  - step: call
    tool: {kind: playbook, path: e2e/child_big, return_step: load, execution_pool: child-big}
    next: summary
  - step: summary
    tool:
      kind: noop
      result:
        rows: "{{ call.rows | length }}"
        last: "{{ call.result.rows[-1].i }}"
`)
	_, view := shared.run(t, wire.ExecuteRequest{Path: path, Pool: "child-big"})
	if view.Status != "COMPLETED" {
		t.Fatalf("status %v error %v", view.Status, view.Error)
	}
	got, _ := step(view, "summary").Result.V.(map[string]any)
	if got["rows"] != int64(25000) || got["last"] != int64(24999) {
		t.Fatalf("the parent read %v of the child's return_step result, want rows 25000 and last 24999", got)
	}
}
