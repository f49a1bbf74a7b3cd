package api_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
)

// What NoETL's GUI reads (docs/noetl-compat.md, "The GUI"), answer by answer;
// e2e/gui_test.go drives the GUI itself.

// runStep claims the execution's pending command and reports it done, as a
// worker does; false when nothing is pending.
func runStep(t *testing.T, f *fixture, exec int64) bool {
	t.Helper()
	p := f.s.Pending(t, exec)
	if len(p) == 0 {
		return false
	}
	cmd := strconv.FormatInt(p[0].IssuedEventID, 10)
	r := must(t, f.s.API, 200, call{method: "POST", target: "/api/commands/" + cmd + "/claim", token: tWorker,
		body: map[string]any{"worker_id": "w1", "start": true}})
	meta := map[string]any{"command_id": r.str("command_id"), "attempt": int64(1)}
	must(t, f.s.API, 200, call{method: "POST", target: "/api/events/batch", token: tWorker, body: map[string]any{
		"execution_id": strconv.FormatInt(exec, 10), "worker_id": "w1",
		"events": []any{map[string]any{"step": p[0].Step, "event_type": "call.done", "meta": meta,
			"payload": map[string]any{"result": map[string]any{"status": "success", "data": map[string]any{"n": int64(1)}}}},
			map[string]any{"step": p[0].Step, "event_type": "command.completed", "status": "success", "meta": meta}}}})
	return true
}

// TestNoETLExecutionShapes: the times, durations and progress NoETL's GUI
// shows, and the detail's events paged NoETL's way: newest first, with
// pagination, page, page_size and since_event_id.
func TestNoETLExecutionShapes(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	detail := func(exec int64, query string) result {
		t.Helper()
		return must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d%s", exec, query), token: tAPI})
	}

	// start_time and end_time are started_at and completed_at as NoETL's GUI
	// shows them (its list prints them as they come; issue 30).
	wall := func(v any) any {
		at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(v))
		if err != nil {
			return nil
		}
		return at.UTC().Format(time.DateTime)
	}
	// Running, one step of three done: no end, a duration so far, a third done.
	runStep(t, f, f.exec)
	r := detail(f.exec, "")
	if r.json["end_time"] != nil || r.json["start_time"] != wall(r.json["started_at"]) || r.json["progress"] != int64(33) {
		t.Errorf("running: start %v end %v progress %v", r.json["start_time"], r.json["end_time"], r.json["progress"])
	}
	for runStep(t, f, f.exec) {
	}
	r = detail(f.exec, "")
	if r.str("status") != "COMPLETED" {
		t.Fatalf("the execution ended %s", r.str("status"))
	}
	human := regexp.MustCompile(`^(\d+[dhm] )*\d+[dhms]$`)
	if r.json["start_time"] != wall(r.json["started_at"]) || r.json["end_time"] != wall(r.json["completed_at"]) || r.json["end_time"] == nil ||
		r.json["progress"] != int64(100) || !human.MatchString(r.str("duration_human")) {
		t.Errorf("ended: %v %v %v %v %v", r.json["start_time"], r.json["end_time"], r.json["progress"], r.json["duration_seconds"], r.json["duration_human"])
	}
	start, _ := time.Parse(time.RFC3339Nano, r.str("started_at"))
	end, _ := time.Parse(time.RFC3339Nano, r.str("completed_at"))
	if secs, ok := r.json["duration_seconds"].(float64); !ok && r.json["duration_seconds"] != int64(0) ||
		ok && (secs < 0 || secs-end.Sub(start).Seconds() > 0.002 || end.Sub(start).Seconds()-secs > 0.002) {
		t.Errorf("duration_seconds %v for %v..%v", r.json["duration_seconds"], start, end)
	}

	// Page 1: every event (fewer than 100), newest first, each with its own
	// timestamp; durations on the ends whose starts are known.
	total := r.json["event_count"].(int64)
	evs := r.json["events"].([]any)
	if int64(len(evs)) != total {
		t.Fatalf("page 1 holds %d events of %d", len(evs), total)
	}
	pg := r.json["pagination"].(map[string]any)
	if pg["page"] != int64(1) || pg["page_size"] != int64(100) || pg["total_events"] != total || pg["total_pages"] != int64(1) ||
		pg["has_next"] != false || pg["has_prev"] != false {
		t.Errorf("pagination %v", pg)
	}
	var seqs []int64
	byType := map[string]map[string]any{}
	for _, raw := range evs {
		e := raw.(map[string]any)
		seqs = append(seqs, e["seq"].(int64))
		if e["timestamp"] != e["created_at"] || e["timestamp"] == nil {
			t.Errorf("event %v: timestamp %v, created_at %v", e["event_type"], e["timestamp"], e["created_at"])
		}
		if _, seen := byType[e["event_type"].(string)]; !seen {
			byType[e["event_type"].(string)] = e // the newest of its type
		}
	}
	for i := range seqs {
		if seqs[i] != total-int64(i) {
			t.Fatalf("seqs %v: want %d down to 1", seqs, total)
		}
	}
	if evs[0].(map[string]any)["event_type"] != "playbook.completed" {
		t.Errorf("the newest event is %v", evs[0].(map[string]any)["event_type"])
	}
	for typ, timed := range map[string]bool{"playbook.completed": true, "step.exit": true, "command.completed": true,
		"call.done": true, "command.issued": false, "step.enter": false, "playbook.started": false} {
		d, ok := byType[typ]["duration"].(int64)
		if timed != ok || d < 0 {
			t.Errorf("%s: duration %v, want one: %v", typ, byType[typ]["duration"], timed)
		}
	}

	// Smaller pages: page 2 follows page 1; past the end is empty.
	r = detail(f.exec, "?page=2&page_size=3")
	evs = r.json["events"].([]any)
	pg = r.json["pagination"].(map[string]any)
	if len(evs) != 3 || evs[0].(map[string]any)["seq"] != total-3 || pg["has_next"] != true || pg["has_prev"] != true ||
		pg["total_pages"] != (total+2)/3 {
		t.Errorf("page 2 of 3: %v %v", len(evs), pg)
	}
	r = detail(f.exec, fmt.Sprintf("?page=%d&page_size=3", (total+2)/3+1))
	if len(r.json["events"].([]any)) != 0 || r.json["pagination"].(map[string]any)["has_next"] != false {
		t.Errorf("past the last page: %s", r.Body)
	}
	// A step.exit alone on its page still has its duration: its step.enter
	// is found before the page.
	exit := byType["step.exit"]
	r = detail(f.exec, fmt.Sprintf("?page=%d&page_size=1", total-exit["seq"].(int64)+1))
	if one := r.json["events"].([]any)[0].(map[string]any); one["seq"] != exit["seq"] || one["duration"] != exit["duration"] {
		t.Errorf("step.exit alone: seq %v, duration %v (with its enter on the page: %v)", one["seq"], one["duration"], exit["duration"])
	}

	// since_event_id: only the events after it, newest first.
	third := must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d?page_size=3", f.exec), token: tAPI}).json["events"].([]any)[2].(map[string]any)
	r = detail(f.exec, "?since_event_id="+third["event_id"].(string))
	if evs = r.json["events"].([]any); len(evs) != 2 || r.json["pagination"].(map[string]any)["total_events"] != int64(2) {
		t.Errorf("since the third newest: %d events, %v", len(evs), r.json["pagination"])
	}
	r = must(t, a, 422, call{method: "GET", target: fmt.Sprintf("/api/executions/%d?since_event_id=%s", f.exec, unknownEvent), token: tAPI})
	if !strings.HasPrefix(r.str("error"), "since_event_id:") || r.str("detail") != r.str("error") {
		t.Errorf("unknown since_event_id: %s", r.Body)
	}
	must(t, a, 422, call{method: "GET", target: fmt.Sprintf("/api/executions/%d?page=0", f.exec), token: tAPI})

	// The list carries the same times.
	r = must(t, a, 200, call{method: "GET", target: "/api/executions?path=tests/three", token: tAPI})
	row := r.list[0].(map[string]any)
	if row["start_time"] != wall(row["started_at"]) || row["end_time"] != wall(row["completed_at"]) || row["progress"] != int64(100) ||
		!human.MatchString(row["duration_human"].(string)) {
		t.Errorf("list row: %v", row)
	}
}

const formsPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata:
  name: forms
  path: gui/forms/one
  description: Greets someone
workload:
  name: world   # ui:description=Who to greet
  count: 2
  password: hunter2
  db: {host: localhost, port: 5432}
workflow:
  - step: start
    desc: Say hello
    tool: {kind: noop}
    next: end
  - step: end
    tool: {kind: noop}
`

// TestNoETLCatalogForGUI: catalog entries carry NoETL's payload and meta; the
// Run dialog's ui_schema, the flow view's content, the editor's validate;
// execute by catalog_id ignores a version; stop and rerun.
func TestNoETLCatalogForGUI(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	reg := must(t, a, 200, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": formsPlaybook}})
	catalog := reg.str("catalog_id")

	r := must(t, a, 200, call{method: "POST", target: "/api/catalog/list", token: tAPI, body: map[string]any{"resource_type": "Playbook"}})
	var entry map[string]any
	for _, e := range r.json["entries"].([]any) {
		if e.(map[string]any)["catalog_id"] == catalog {
			entry = e.(map[string]any)
		}
	}
	payload, _ := entry["payload"].(map[string]any)
	md, _ := payload["metadata"].(map[string]any)
	wf, _ := payload["workflow"].([]any)
	if md["description"] != "Greets someone" || len(wf) != 2 || entry["meta"].(map[string]any)["registered_at"] != entry["created_at"] {
		t.Fatalf("catalog entry: %v", entry)
	}

	// ui_schema, the path's slashes kept.
	r = must(t, a, 200, call{method: "GET", target: "/api/catalog/gui/forms/one/ui_schema?version=latest", token: tAPI})
	if r.str("path") != "gui/forms/one" || r.json["version"] != int64(1) || r.str("kind") != "playbook" ||
		r.str("title") != "forms" || r.str("description_markdown") != "Greets someone" {
		t.Errorf("ui_schema: %s", r.Body)
	}
	var got []string
	for _, raw := range r.json["fields"].([]any) {
		fl := raw.(map[string]any)
		got = append(got, fmt.Sprintf("%s:%s:%v:%v", fl["name"], fl["kind"], fl["default"] != nil, fl["secret"]))
		if fl["name"] == "name" && fl["description"] != "Who to greet" {
			t.Errorf("name's description %v", fl["description"])
		}
		if fl["name"] == "db" && len(fl["children"].([]any)) != 2 {
			t.Errorf("db's children %v", fl["children"])
		}
	}
	if want := "name:string:true:false count:integer:true:false password:string:true:true db:object:true:false"; strings.Join(got, " ") != want {
		t.Errorf("fields %v, want %s", got, want)
	}
	must(t, a, 200, call{method: "GET", target: "/api/catalog/gui/forms/one/ui_schema?version=1", token: tAPI})
	must(t, a, 404, call{method: "GET", target: "/api/catalog/gui/forms/one/ui_schema?version=2", token: tAPI})
	// Through API Gateway: its route stops at the greedy variable, whose
	// value runs to the path's end.
	for params, want := range map[string]int{"gui/forms/one/ui_schema": 200, "gui/forms/one": 404, "ui_schema": 404} {
		resp := a.Serve(context.Background(), &api.Request{Method: "GET", Path: "/stage/api/catalog/" + params,
			Route: "GET /api/catalog/{path+}", PathParams: map[string]string{"path": params},
			Header: http.Header{"Authorization": {"Bearer " + tAPI}}})
		if resp.Status != want {
			t.Errorf("API Gateway's path %q: %d, want %d: %s", params, resp.Status, want, resp.Body)
		}
	}

	// The flow view's content, by catalog_id or by path.
	for _, ref := range []string{catalog, "gui/forms/one"} {
		r = must(t, a, 200, call{method: "GET", target: "/api/catalog/playbook/content?playbook_id=" + ref, token: tAPI})
		if r.str("content") != formsPlaybook || r.str("catalog_id") != catalog {
			t.Errorf("content of %s: %s", ref, r.Body)
		}
	}
	// Validate: what register would say.
	r = must(t, a, 200, call{method: "POST", target: "/api/catalog/playbooks/validate", token: tAPI, body: map[string]any{"content": formsPlaybook}})
	if r.json["valid"] != true || len(r.json["errors"].([]any)) != 0 {
		t.Errorf("validate a valid playbook: %s", r.Body)
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/catalog/playbooks/validate", token: tAPI,
		body: map[string]any{"content": strings.Replace(formsPlaybook, "  name: forms\n", "", 1)}})
	if errs := r.json["errors"].([]any); r.json["valid"] != false || len(errs) != 1 || !strings.Contains(errs[0].(string), "metadata.name is required") {
		t.Errorf("validate without a name: %s", r.Body)
	}
	if f.s.Counts(t).Catalog != 2 {
		t.Errorf("validate registered something: %+v", f.s.Counts(t))
	}

	// Execute by catalog_id with its version beside it (NoETL's GUI's
	// terminal sends both): the version is ignored, as NoETL does.
	r = must(t, a, 200, call{method: "POST", target: "/api/execute", token: tAPI, body: map[string]any{
		"catalog_id": catalog, "version": int64(7), "workload": map[string]any{"count": int64(5)}, "resource_kind": "playbook"}})
	exec := r.str("execution_id")

	// Rerun: the same version again, the workload kept but for the keys given.
	r = must(t, a, 200, call{method: "POST", target: "/api/executions/" + exec + "/rerun", token: tAPI,
		body: map[string]any{"workload": map[string]any{"name": "again"}, "resource_kind": "playbook"}})
	again := r.str("execution_id")
	r = must(t, a, 200, call{method: "GET", target: "/api/executions/" + again, token: tAPI})
	if w := r.json["workload"].(map[string]any); r.str("catalog_id") != catalog || w["count"] != int64(5) || w["name"] != "again" {
		t.Errorf("rerun: catalog %s, workload %v", r.str("catalog_id"), w)
	}

	// Stop is cancel under NoETL's GUI's name.
	r = must(t, a, 200, call{method: "POST", target: "/api/executions/" + again + "/stop", token: tAPI})
	if r.str("status") != "CANCELLED" {
		t.Errorf("stop: %s", r.Body)
	}
}
