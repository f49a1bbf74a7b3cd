package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/wire"
)

// paginatedUsers is the pagination fixture's test server (R-C3): 35 users,
// has_more while offset + limit < 35.
func paginatedUsers(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/users" {
			http.NotFound(w, r)
			return
		}
		offset, err1 := strconv.Atoi(r.URL.Query().Get("offset"))
		limit, err2 := strconv.Atoi(r.URL.Query().Get("limit"))
		if err1 != nil || err2 != nil || limit <= 0 {
			http.Error(w, `{"error":"offset and limit are required integers"}`, http.StatusBadRequest)
			return
		}
		users := []map[string]any{}
		for id := offset + 1; id <= min(offset+limit, 35); id++ {
			users = append(users, map[string]any{"id": id, "username": fmt.Sprintf("user%02d", id), "email": fmt.Sprintf("user%02d@example.com", id)})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"users": users, "has_more": offset+limit < 35, "offset": offset, "limit": limit, "total": 35})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestConformance registers every NoETL conformance playbook and runs each
// through the whole stack (API → NATS → worker → events), asserting the
// outcomes of ../shared/conformance/README.md as subsets (R-C2), the canonical
// event sequences (R-R8), and that replay's verify finds each run consistent.
func TestConformance(t *testing.T) {
	dir := filepath.Join(conformance.Dir(t), "playbooks")
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) != 8 {
		t.Fatalf("want 8 conformance playbooks in %s, found %d", dir, len(files))
	}
	shared.startWorkers(t, "shared", 2)
	paths := map[string]string{}
	for _, f := range files {
		paths[filepath.Base(f)] = shared.register(t, f)
	}
	api := paginatedUsers(t)

	t.Run("hello_world", func(t *testing.T) {
		id, v := shared.run(t, wire.ExecuteRequest{Path: paths["hello_world.yaml"]})
		completed(t, v, "start", "test_step", "end")
		if got := step(v, "test_step").Result.V; !conformance.Subset(map[string]any{"status": "ok", "data": map[string]any{"message": "Hello World"}}, got) {
			t.Fatalf("test_step result %v", got)
		}
		evs := shared.events(t, id)
		if !(index(evs, "step.enter", "start", 0) < index(evs, "step.enter", "test_step", 0) &&
			index(evs, "step.enter", "test_step", 0) < index(evs, "step.enter", "end", 0)) {
			t.Fatal("steps out of order")
		}
		canonicalStep(t, evs, "test_step")
		if last := evs[len(evs)-1].EventType; last != "playbook.completed" {
			t.Fatalf("last event %v (R-R8)", last)
		}
		shared.verify(t, id)
	})

	t.Run("test_start_with_action", func(t *testing.T) {
		id, v := shared.run(t, wire.ExecuteRequest{Path: paths["test_start_with_action.yaml"]})
		completed(t, v, "start", "process", "end")
		if got := step(v, "process").Result.V; !conformance.Subset(map[string]any{"data": map[string]any{"from_start": true}}, got) {
			t.Fatalf("process result %v", got)
		}
		shared.verify(t, id)
	})

	for _, c := range []struct {
		threshold         int
		ran, skipped, cat string
	}{{0, "process_high", "process_low", "high"}, {21, "process_low", "process_high", "low"}} {
		t.Run(fmt.Sprintf("comprehensive_test/threshold=%d", c.threshold), func(t *testing.T) {
			id, v := shared.run(t, wire.ExecuteRequest{Path: paths["comprehensive_test.yaml"], Payload: map[string]any{"threshold": c.threshold}})
			completed(t, v, "start", c.ran, "summarize", "end")
			if st := step(v, c.skipped).Status; st != "skipped" {
				t.Fatalf("%s is %v, want skipped", c.skipped, st)
			}
			evs := shared.events(t, id)
			if count(evs, "step.enter", "summarize") != 1 || index(evs, "step.enter", "summarize", 0) < index(evs, "step.exit", c.ran, 0) {
				t.Fatal("summarize must be entered once, after the branch")
			}
			if got := step(v, "summarize").Result.V; !conformance.Subset(map[string]any{"processing_path": c.cat}, got) {
				t.Fatalf("summarize result %v", got)
			}
			shared.verify(t, id)
		})
	}

	t.Run("fanout_reduce_phase6", func(t *testing.T) {
		id, v := shared.run(t, wire.ExecuteRequest{Path: paths["fanout_reduce_phase6.yaml"]})
		completed(t, v, "start", "normalize_customer", "enrich_customer", "reduce_customer")
		if got := step(v, "normalize_customer").Result.V; !conformance.Subset(map[string]any{"normalized": true}, got) || len(got.(map[string]any)) != 1 {
			t.Fatalf("normalize_customer %v", got)
		}
		evs := shared.events(t, id)
		if count(evs, "step.enter", "reduce_customer") != 1 {
			t.Fatalf("reduce_customer entered %d times", count(evs, "step.enter", "reduce_customer"))
		}
		issued := index(evs, "command.issued", "reduce_customer", 0)
		if issued < index(evs, "command.completed", "normalize_customer", 0) || issued < index(evs, "command.completed", "enrich_customer", 0) {
			t.Fatal("reduce_customer was issued before both branches completed")
		}
		shared.verify(t, id)
	})

	t.Run("test_simple_loop", func(t *testing.T) {
		id, v := shared.run(t, wire.ExecuteRequest{Path: paths["test_simple_loop.yaml"]})
		completed(t, v, "start", "loop_test", "end")
		got, _ := step(v, "loop_test").Result.V.([]any)
		if len(got) != 3 {
			t.Fatalf("loop_test result %v", step(v, "loop_test").Result.V)
		}
		for i, d := range []int64{20, 40, 60} {
			if !conformance.Subset(map[string]any{"doubled": d}, got[i]) {
				t.Fatalf("iteration %d = %v", i, got[i])
			}
		}
		evs := shared.events(t, id)
		if enter := evs[index(evs, "step.enter", "loop_test", 0)]; !conformance.Subset(map[string]any{"iterations_expected": 3, "iterator": "num"}, map[string]any(enter.Context)) {
			t.Fatalf("loop step.enter %v (R-R8)", enter)
		}
		for i := 1; i < 3; i++ {
			if index(evs, "command.issued", "loop_test", i) < index(evs, "command.completed", "loop_test", i-1) {
				t.Fatalf("iteration %d started before %d finished", i, i-1)
			}
		}
		if count(evs, "step.exit", "loop_test") != 1 {
			t.Fatal("a loop step exits once (R-R8)")
		}
		shared.verify(t, id)
	})

	t.Run("test_vars_template_access", func(t *testing.T) {
		id, v := shared.run(t, wire.ExecuteRequest{Path: paths["test_vars_template_access.yaml"]})
		completed(t, v, "start", "set_variables", "use_vars_in_template", "verify_results", "end")
		want := map[string]any{"received_counter": 42, "received_message": "Template access works!",
			"received_timeout": 30, "full_greeting": "Hello, Template access works!"}
		if got := step(v, "use_vars_in_template").Result.V; !conformance.Subset(want, got) {
			t.Fatalf("use_vars_in_template %v", got)
		}
		shared.verify(t, id)
	})

	t.Run("test_pagination_offset", func(t *testing.T) {
		id, v := shared.run(t, wire.ExecuteRequest{Path: paths["test_pagination_offset.yaml"], Payload: map[string]any{"api_url": api.URL}})
		completed(t, v, "start", "fetch_page", "check_pagination", "validate_results", "end")
		if n := step(v, "fetch_page").Visits; n != 4 {
			t.Fatalf("fetch_page visited %v times, want 4", n)
		}
		if got := step(v, "validate_results").Result.V; !conformance.Subset(map[string]any{"total_users": 35, "first_id": 1, "last_id": 35}, got) {
			t.Fatalf("validate_results %v", got)
		}
		shared.verify(t, id)
	})

	t.Run("broken_sql", func(t *testing.T) {
		id, v := shared.run(t, wire.ExecuteRequest{Path: paths["broken_sql.yaml"]})
		if v.Status != "FAILED" {
			t.Fatalf("status %v", v.Status)
		}
		e := string(v.Error)
		if !strings.Contains(e, "42601") || strings.Contains(strings.ToLower(e), "credential") {
			t.Fatalf("error %q: want the SQL syntax error (SQLSTATE 42601), not a credential error", e)
		}
		evs := shared.events(t, id)
		last := evs[len(evs)-1]
		payload := last.Context
		if last.EventType != "playbook.failed" || fmt.Sprint(payload["failed_steps"]) != "[verify_pg_data]" {
			t.Fatalf("last event %v", last)
		}
		if count(evs, "step.enter", "end") != 0 {
			t.Fatal("end must never be entered")
		}
		shared.verify(t, id)
	})
}

func completed(t *testing.T, v *wire.Execution, steps ...string) {
	t.Helper()
	if v.Status != "COMPLETED" {
		t.Fatalf("status %v, error %v", v.Status, v.Error)
	}
	for _, s := range steps {
		if st := step(v, s).Status; st != "completed" {
			t.Errorf("step %s is %v", s, st)
		}
	}
}

// canonicalStep checks R-R8's sequence for a linear step.
// canonicalStep checks a step run by our worker: R-R8's sequence on the fast
// path, where the claim records the start (command.claimed, meta.started) and
// command.completed carries the result (R-R3), so command.started and
// call.done, which would say the same again, are not written. NoETL's
// workers still post all four (TestNoETLWorkerProtocol).
func canonicalStep(t *testing.T, evs []wire.Event, name string) {
	t.Helper()
	want := []string{"step.enter", "command.issued", "command.claimed", "command.completed", "step.exit"}
	var got []string
	for _, e := range evs {
		if string(e.NodeName) == name {
			got = append(got, e.EventType)
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("%s events %v, want %v (R-R8)", name, got, want)
	}
}
