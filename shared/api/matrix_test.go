package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/ids"
)

// routeCase describes how to get each documented error out of one route.
type routeCase struct {
	method, target string // target may hold {exec}, {cmd}, {catalog}
	token          string // the scope's token
	wrongScope     string // a valid token of another scope; "" for open routes and routes every token scope may call (api | worker: the internal token holds the worker scope)
	body           any    // a well-formed body for POST routes
	// wrongType is a request with one badly typed field (422 naming field);
	// "" target: not applicable (no input to get wrong).
	wrongTarget string
	wrongBody   any
	field       string
	// unknown is a request naming a well-formed id that does not exist (404
	// unless unknownStatus); "" target: the route takes no id.
	unknownTarget string
	unknownBody   any
	unknownStatus int
}

const (
	matrixBodyLimit = 32 << 10
	unknownCatalog  = "987654321"
	unknownSchedule = "987654321"
)

// unknownExec and unknownEvent live on configured shards (0 and 1), so the
// service has to look them up to answer 404.
var (
	unknownExec  = strconv.FormatInt(ids.Compose(1<<40, 0), 10)
	unknownEvent = strconv.FormatInt(ids.Compose(1<<40, 1), 10)
)

func matrixCases() []routeCase {
	api, worker, internal, admin := apitest.APIToken, apitest.WorkerToken, apitest.InternalToken, apitest.AdminToken
	return []routeCase{
		{method: "GET", target: "/api/health"},
		{method: "GET", target: "/api/openapi.json"},
		// The dashboard's page and files: open like health (they hold no data).
		{method: "GET", target: "/"},
		{method: "GET", target: "/ui/app.js", unknownTarget: "/ui/nope.js"},
		{method: "POST", target: "/api/catalog/register", token: api, wrongScope: worker,
			body:        map[string]any{"content": "apiVersion: noetl.io/v2"},
			wrongTarget: "/api/catalog/register", wrongBody: map[string]any{"content": 5}, field: "content"},
		{method: "GET", target: "/api/catalog", token: api, wrongScope: worker,
			wrongTarget: "/api/catalog?limit=ten", field: "limit"},
		{method: "GET", target: "/api/catalog/{catalog}", token: api, wrongScope: internal,
			wrongTarget: "/api/catalog/1.5", field: "catalog_id",
			unknownTarget: "/api/catalog/" + unknownCatalog},
		{method: "POST", target: "/api/catalog/list", token: api, wrongScope: worker, body: map[string]any{},
			wrongTarget: "/api/catalog/list", wrongBody: map[string]any{"limit": "ten"}, field: "limit"},
		{method: "POST", target: "/api/catalog/resource", token: api, wrongScope: worker, body: map[string]any{"catalog_id": "{catalog}"},
			wrongTarget: "/api/catalog/resource", wrongBody: map[string]any{"catalog_id": []any{int64(1)}}, field: "catalog_id",
			unknownTarget: "/api/catalog/resource", unknownBody: map[string]any{"catalog_id": unknownCatalog}},
		{method: "GET", target: "/api/catalog/tests/three/ui_schema?version=latest", token: api, wrongScope: worker,
			wrongTarget: "/api/catalog/tests/three/ui_schema?version=newest", field: "version",
			unknownTarget: "/api/catalog/tests/nope/ui_schema"},
		{method: "GET", target: "/api/catalog/playbook/content?playbook_id={catalog}", token: api, wrongScope: worker,
			wrongTarget: "/api/catalog/playbook/content", field: "playbook_id",
			unknownTarget: "/api/catalog/playbook/content?playbook_id=" + unknownCatalog},
		{method: "POST", target: "/api/catalog/playbooks/validate", token: api, wrongScope: internal,
			body:        map[string]any{"content": "apiVersion: noetl.io/v2"},
			wrongTarget: "/api/catalog/playbooks/validate", wrongBody: map[string]any{"content": []any{}}, field: "content"},
		{method: "POST", target: "/api/execute", token: api, wrongScope: worker, body: map[string]any{"path": "tests/three"},
			wrongTarget: "/api/execute", wrongBody: map[string]any{"path": "tests/three", "payload": "n=1"}, field: "payload",
			unknownTarget: "/api/execute", unknownBody: map[string]any{"catalog_id": unknownCatalog}},
		{method: "POST", target: "/api/events", token: worker, wrongScope: api,
			body:        map[string]any{"execution_id": "{exec}", "event_type": "step.note"},
			wrongTarget: "/api/events", wrongBody: map[string]any{"execution_id": map[string]any{"id": 1}, "event_type": "x"}, field: "execution_id",
			unknownTarget: "/api/events", unknownBody: map[string]any{"execution_id": unknownExec, "event_type": "step.note"}},
		{method: "POST", target: "/api/events/batch", token: worker, wrongScope: api,
			body:        map[string]any{"execution_id": "{exec}", "events": []any{map[string]any{"event_type": "step.note"}}},
			wrongTarget: "/api/events/batch", wrongBody: map[string]any{"execution_id": "{exec}", "events": []any{
				map[string]any{"event_type": "step.note"}, map[string]any{"name": "step.note"},
				map[string]any{"event_type": "step.note"}, map[string]any{"step": "start"}}},
			field:         "events[3].event_type",
			unknownTarget: "/api/events/batch", unknownBody: map[string]any{"execution_id": unknownExec, "events": []any{map[string]any{"event_type": "step.note"}}}},
		{method: "POST", target: "/api/worker/report", token: worker, wrongScope: api,
			body:        map[string]any{"worker_id": "w1", "events": []any{map[string]any{"execution_id": "{exec}", "event_type": "step.note"}}},
			wrongTarget: "/api/worker/report", wrongBody: map[string]any{"worker_id": "w1", "events": []any{
				map[string]any{"execution_id": "{exec}", "event_type": "step.note"}, map[string]any{"execution_id": "{exec}"}}},
			field: "events[1].event_type",
			// Each event answers for itself: an unknown execution is that event's 404.
			unknownTarget: "/api/worker/report", unknownBody: map[string]any{"worker_id": "w1", "events": []any{
				map[string]any{"execution_id": unknownExec, "event_type": "step.note"}}}, unknownStatus: 200},
		// The keychain; DELETE last, the fixture's credential is gone after it.
		{method: "GET", target: "/api/credentials", token: api, wrongScope: worker},
		{method: "POST", target: "/api/credentials", token: api, wrongScope: worker,
			body:        map[string]any{"name": "matrix_other", "type": "basic", "data": map[string]any{"username": "u", "password": "matrix-pw-123"}},
			wrongTarget: "/api/credentials", wrongBody: map[string]any{"name": "x", "data": "password"}, field: "data"},
		{method: "POST", target: "/api/credentials/rotate", token: api, wrongScope: worker, body: map[string]any{},
			wrongTarget: "/api/credentials/rotate", wrongBody: map[string]any{"limit": "all"}, field: "limit"},
		{method: "GET", target: "/api/credentials/{cred}", token: worker,
			wrongTarget: "/api/credentials/{cred}?include_data=maybe", field: "include_data",
			unknownTarget: "/api/credentials/nope"},
		{method: "GET", target: "/api/credentials/{cred}/reads", token: api, wrongScope: worker,
			wrongTarget: "/api/credentials/{cred}/reads?limit=ten", field: "limit"},
		{method: "DELETE", target: "/api/credentials/{cred}", token: api, wrongScope: worker,
			unknownTarget: "/api/credentials/nope"},
		// Execution variables and staged results.
		{method: "POST", target: "/api/vars/{exec}", token: worker, body: map[string]any{"greeting": "hi"},
			wrongTarget: "/api/vars/{exec}", wrongBody: map[string]any{"variables": map[string]any{"x": 1}, "var_type": "odd"}, field: "var_type",
			unknownTarget: "/api/vars/" + unknownExec, unknownBody: map[string]any{"greeting": "hi"}},
		{method: "GET", target: "/api/vars/{exec}", token: api,
			wrongTarget: "/api/vars/abc", field: "execution_id", unknownTarget: "/api/vars/" + unknownExec},
		{method: "GET", target: "/api/vars/{exec}/greeting", token: worker,
			wrongTarget: "/api/vars/{exec}/1x", field: "var_name", unknownTarget: "/api/vars/" + unknownExec + "/greeting"},
		{method: "PUT", target: "/api/result/{exec}", token: worker, wrongScope: api, body: map[string]any{"name": "big", "data": map[string]any{"rows": []any{int64(1)}}},
			wrongTarget: "/api/result/{exec}", wrongBody: map[string]any{"name": int64(5), "data": int64(1)}, field: "name",
			unknownTarget: "/api/result/" + unknownExec, unknownBody: map[string]any{"name": "big", "data": int64(1)}},
		{method: "GET", target: "/api/result/resolve?ref={ref}", token: worker,
			wrongTarget: "/api/result/resolve?ref=nope", field: "ref",
			unknownTarget: "/api/result/resolve?ref=noetl://execution/" + unknownExec + "/result/big/abcdef0123456789"},
		{method: "GET", target: "/api/commands/{cmd}", token: worker, wrongScope: api,
			wrongTarget: "/api/commands/12.5", field: "event_id", unknownTarget: "/api/commands/" + unknownEvent},
		{method: "POST", target: "/api/commands/{cmd}/claim", token: worker, wrongScope: api, body: map[string]any{"worker_id": "w1"},
			wrongTarget: "/api/commands/{cmd}/claim", wrongBody: map[string]any{"worker_id": int64(7)}, field: "worker_id",
			unknownTarget: "/api/commands/" + unknownEvent + "/claim", unknownBody: map[string]any{"worker_id": "w1"}},
		{method: "POST", target: "/api/commands/{cmd}/heartbeat", token: worker, wrongScope: api, body: map[string]any{"worker_id": "w1"},
			wrongTarget: "/api/commands/{cmd}/heartbeat", wrongBody: map[string]any{"worker_id": "w1", "attempt": "first"}, field: "attempt",
			unknownTarget: "/api/commands/" + unknownEvent + "/heartbeat", unknownBody: map[string]any{"worker_id": "w1"}},
		// The worker registry: register first, the beat and deregistrations
		// name the worker it registered (TestOpenAPIMatchesServedRoutes runs
		// the cases in this order).
		{method: "POST", target: "/api/worker/pool/register", token: worker, wrongScope: api,
			body:        map[string]any{"name": "w-matrix", "component_type": "worker_pool", "runtime": "python", "capacity": int64(2)},
			wrongTarget: "/api/worker/pool/register", wrongBody: map[string]any{"name": "w-matrix", "capacity": "many"}, field: "capacity"},
		{method: "POST", target: "/api/worker/pool/heartbeat", token: worker, wrongScope: api, body: map[string]any{"name": "w-matrix"},
			wrongTarget: "/api/worker/pool/heartbeat", wrongBody: map[string]any{"name": []any{"w-matrix"}}, field: "name",
			unknownTarget: "/api/worker/pool/heartbeat", unknownBody: map[string]any{"name": "nobody-registered"}},
		{method: "POST", target: "/api/worker/pool/deregister", token: worker, wrongScope: api, body: map[string]any{"name": "w-matrix"},
			wrongTarget: "/api/worker/pool/deregister", wrongBody: map[string]any{"name": "w-matrix", "component_type": "broker"}, field: "component_type",
			// Deregistering a name nobody registered is no error (NoETL's answer too).
			unknownTarget: "/api/worker/pool/deregister", unknownBody: map[string]any{"name": "nobody-registered"}, unknownStatus: 200},
		{method: "DELETE", target: "/api/worker/pool/deregister", token: worker, wrongScope: api, body: map[string]any{"name": "w-matrix"},
			wrongTarget: "/api/worker/pool/deregister", wrongBody: map[string]any{"name": ""}, field: "name",
			unknownTarget: "/api/worker/pool/deregister", unknownBody: map[string]any{"name": "nobody-registered"}, unknownStatus: 200},
		{method: "GET", target: "/api/worker/pools", token: api,
			wrongTarget: "/api/worker/pools?limit=all", field: "limit"},
		{method: "GET", target: "/api/pool/status", token: worker},
		{method: "GET", target: "/api/doctor", token: api, wrongScope: worker,
			wrongTarget: "/api/doctor?limit=0", field: "limit"},
		{method: "GET", target: "/api/executions", token: api, wrongScope: worker,
			wrongTarget: "/api/executions?parent_execution_id=abc", field: "parent_execution_id"},
		{method: "GET", target: "/api/executions/{exec}?page=1&page_size=10", token: api, wrongScope: worker,
			wrongTarget: "/api/executions/{exec}?page_size=501", field: "page_size", unknownTarget: "/api/executions/" + unknownExec},
		{method: "GET", target: "/api/executions/{exec}/events", token: api, wrongScope: worker,
			wrongTarget: "/api/executions/{exec}/events?after_seq=last", field: "after_seq",
			unknownTarget: "/api/executions/" + unknownExec + "/events"},
		{method: "GET", target: "/api/executions/{exec}/cancellation-check", token: worker,
			wrongTarget: "/api/executions/x/cancellation-check", field: "execution_id",
			unknownTarget: "/api/executions/" + unknownExec + "/cancellation-check"},
		{method: "GET", target: "/api/executions/{exec}/status", token: api, wrongScope: internal,
			wrongTarget: "/api/executions/-5/status", field: "execution_id",
			unknownTarget: "/api/executions/" + unknownExec + "/status"},
		{method: "POST", target: "/api/executions/{exec}/cancel", token: api, wrongScope: worker, body: map[string]any{},
			wrongTarget: "/api/executions/{exec}/cancel", wrongBody: map[string]any{"reason": int64(5)}, field: "reason",
			unknownTarget: "/api/executions/" + unknownExec + "/cancel", unknownBody: map[string]any{}},
		{method: "POST", target: "/api/executions/{exec}/stop", token: api, wrongScope: worker, body: map[string]any{},
			wrongTarget: "/api/executions/{exec}/stop", wrongBody: map[string]any{"reason": false}, field: "reason",
			unknownTarget: "/api/executions/" + unknownExec + "/stop", unknownBody: map[string]any{}},
		{method: "GET", target: "/api/db/validate", token: api, wrongScope: worker},
		{method: "POST", target: "/api/db/init", token: admin, wrongScope: api},
		{method: "POST", target: "/api/postgres/execute", token: admin, wrongScope: worker, body: map[string]any{"query": "SELECT 1"},
			wrongTarget: "/api/postgres/execute", wrongBody: map[string]any{"query": int64(1)}, field: "query"},
		{method: "POST", target: "/api/executions/cleanup", token: api, wrongScope: worker, body: map[string]any{"older_than_minutes": int64(60), "dry_run": true},
			wrongTarget: "/api/executions/cleanup", wrongBody: map[string]any{"older_than_minutes": int64(0)}, field: "older_than_minutes"},
		{method: "POST", target: "/api/executions/{exec}/rerun", token: api, wrongScope: worker, body: map[string]any{"workload": map[string]any{}},
			wrongTarget: "/api/executions/{exec}/rerun", wrongBody: map[string]any{"workload": "n=1"}, field: "workload",
			unknownTarget: "/api/executions/" + unknownExec + "/rerun", unknownBody: map[string]any{}},
		{method: "POST", target: "/api/executions/{exec}/redrive", token: api, wrongScope: worker, body: map[string]any{},
			wrongTarget: "/api/executions/{exec}/redrive", wrongBody: map[string]any{"version": "two"}, field: "version",
			unknownTarget: "/api/executions/" + unknownExec + "/redrive", unknownBody: map[string]any{}},
		// A bulk redrive answers each id: an unknown one is refused (404) in a 200.
		{method: "POST", target: "/api/executions/redrive", token: api, wrongScope: worker, body: map[string]any{"executions": []any{"{exec}"}},
			wrongTarget: "/api/executions/redrive", wrongBody: map[string]any{"executions": []any{"{exec}", "x"}}, field: "executions[1]",
			unknownTarget: "/api/executions/redrive", unknownBody: map[string]any{"executions": []any{unknownExec}}, unknownStatus: 200},
		{method: "POST", target: "/api/executions/{exec}/finalize", token: api, wrongScope: worker, body: map[string]any{"status": "FAILED"},
			wrongTarget: "/api/executions/{exec}/finalize", wrongBody: map[string]any{"status": "RUNNING"}, field: "status",
			unknownTarget: "/api/executions/" + unknownExec + "/finalize", unknownBody: map[string]any{"status": "FAILED"}},
		{method: "GET", target: "/api/executions/{exec}/replay", token: api, wrongScope: worker,
			wrongTarget: "/api/executions/[1]/replay", field: "execution_id",
			unknownTarget: "/api/executions/" + unknownExec + "/replay"},
		{method: "GET", target: "/api/replay/state?execution_id={exec}", token: api, wrongScope: internal,
			wrongTarget: "/api/replay/state?execution_id=true", field: "execution_id",
			unknownTarget: "/api/replay/state?execution_id=" + unknownExec},
		{method: "POST", target: "/api/whatif", token: api, wrongScope: worker,
			body:        map[string]any{"path": "tests/three", "executions": []any{"{exec}"}},
			wrongTarget: "/api/whatif", wrongBody: map[string]any{"path": "tests/three", "executions": []any{"{exec}"}, "select": map[string]any{"limit": "all"}}, field: "select.limit",
			unknownTarget: "/api/whatif", unknownBody: map[string]any{"path": "tests/three", "executions": []any{unknownExec}}},
		{method: "POST", target: "/api/internal/outbox/claim", token: internal, wrongScope: api, body: map[string]any{"limit": int64(1)},
			wrongTarget: "/api/internal/outbox/claim", wrongBody: map[string]any{"limit": "all"}, field: "limit"},
		{method: "POST", target: "/api/internal/outbox/mark-published", token: internal, wrongScope: worker, body: map[string]any{"outbox_ids": []any{}},
			wrongTarget: "/api/internal/outbox/mark-published", wrongBody: map[string]any{"outbox_ids": []any{"1", "x"}}, field: "outbox_ids[1]",
			// A bulk mark names ids it may not find: it reports how many changed.
			unknownTarget: "/api/internal/outbox/mark-published", unknownBody: map[string]any{"outbox_ids": []any{unknownEvent}}, unknownStatus: 200},
		{method: "POST", target: "/api/internal/outbox/mark-failed", token: internal, wrongScope: api, body: map[string]any{"outbox_id": unknownEvent},
			wrongTarget: "/api/internal/outbox/mark-failed", wrongBody: map[string]any{"outbox_id": 1.5, "error": "x"}, field: "outbox_id",
			unknownTarget: "/api/internal/outbox/mark-failed", unknownBody: map[string]any{"outbox_id": unknownEvent, "error": "nats down"}},
		{method: "GET", target: "/api/internal/outbox/pending-count", token: internal, wrongScope: api},
		{method: "POST", target: "/api/internal/events/project", token: internal, wrongScope: worker,
			body:        map[string]any{"events": []any{map[string]any{"event_id": int64(1), "execution_id": "{exec}", "event_type": "stage.opened"}}},
			wrongTarget: "/api/internal/events/project", wrongBody: map[string]any{"events": []any{
				map[string]any{"event_id": int64(1), "execution_id": "{exec}", "event_type": "stage.opened", "meta": "x"}}},
			field:         "events[0].meta",
			unknownTarget: "/api/internal/events/project", unknownBody: map[string]any{"events": []any{
				map[string]any{"event_id": int64(1), "execution_id": unknownExec, "event_type": "stage.opened"}}},
			unknownStatus: 200}, // counted in skipped, as NoETL's projector accepts it
		// Schedules; DELETE last: the 200 check (openapi_test.go) runs the cases in order.
		{method: "POST", target: "/api/schedules", token: api, wrongScope: worker,
			body:        map[string]any{"playbook_path": "tests/three", "cron": "*/5 * * * *"},
			wrongTarget: "/api/schedules", wrongBody: map[string]any{"playbook_path": "tests/three", "interval_seconds": "often"}, field: "interval_seconds"},
		{method: "GET", target: "/api/schedules", token: api, wrongScope: worker,
			wrongTarget: "/api/schedules?limit=many", field: "limit"},
		{method: "GET", target: "/api/schedules/{sched}", token: api, wrongScope: worker,
			wrongTarget: "/api/schedules/x", field: "schedule_id", unknownTarget: "/api/schedules/" + unknownSchedule},
		{method: "PATCH", target: "/api/schedules/{sched}", token: api, wrongScope: internal, body: map[string]any{"enabled": false},
			wrongTarget: "/api/schedules/{sched}", wrongBody: map[string]any{"enabled": "no"}, field: "enabled",
			unknownTarget: "/api/schedules/" + unknownSchedule, unknownBody: map[string]any{"enabled": true}},
		{method: "POST", target: "/api/schedules/{sched}/trigger", token: api, wrongScope: worker, body: map[string]any{},
			unknownTarget: "/api/schedules/" + unknownSchedule + "/trigger", unknownBody: map[string]any{}},
		{method: "POST", target: "/api/schedules/{sched}/backfill", token: api, wrongScope: worker,
			body:        map[string]any{"from": "2024-01-01T00:00:00Z", "to": "2024-01-01T02:00:00Z"},
			wrongTarget: "/api/schedules/{sched}/backfill", wrongBody: map[string]any{"from": "yesterday", "to": "2024-01-01T02:00:00Z"}, field: "from",
			unknownTarget: "/api/schedules/" + unknownSchedule + "/backfill", unknownBody: map[string]any{"from": "2024-01-01T00:00:00Z", "to": "2024-01-01T02:00:00Z"}},
		{method: "GET", target: "/api/schedules/{sched}/runs", token: api, wrongScope: worker,
			wrongTarget: "/api/schedules/{sched}/runs?cursor=zz", field: "cursor", unknownTarget: "/api/schedules/" + unknownSchedule + "/runs"},
		{method: "DELETE", target: "/api/schedules/{sched}", token: api, wrongScope: worker,
			wrongTarget: "/api/schedules/1.5", field: "schedule_id", unknownTarget: "/api/schedules/" + unknownSchedule},
	}
}

// fill replaces the fixture's ids in a target or a body.
func (f *fixture) fill(v any) any {
	r := strings.NewReplacer("{exec}", strconv.FormatInt(f.exec, 10), "{cmd}", strconv.FormatInt(f.command, 10),
		"{catalog}", strconv.FormatInt(f.catalog, 10), "{sched}", strconv.FormatInt(f.sched, 10),
		"{cred}", matrixCredential, "{ref}", f.ref)
	switch x := v.(type) {
	case string:
		return r.Replace(x)
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = f.fill(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = f.fill(e)
		}
		return out
	}
	return v
}

// TestErrorMatrix: every route × {malformed JSON, wrong type, unknown id,
// oversize body, no token, bad token, wrong scope} answers the documented
// status (api.md §1, R-A2, R-A3), names the field in 422s, and writes nothing.
func TestErrorMatrix(t *testing.T) {
	f := newFixture(t, apitest.Options{MaxBodyBytes: matrixBodyLimit})
	a := f.s.API
	cases := matrixCases()
	if len(cases) != len(api.Routes()) {
		t.Fatalf("%d cases for %d routes: every route needs one", len(cases), len(api.Routes()))
	}
	covered := map[string]bool{}
	for _, c := range cases {
		target := f.fill(c.target).(string)
		path, _, _ := strings.Cut(target, "?")
		rt, _, _, ok := api.NewRouter(api.Routes()).Find(c.method, path)
		if !ok {
			t.Fatalf("case %s %s matches no route", c.method, target)
		}
		covered[rt.Key()] = true
		t.Run(strings.ReplaceAll(rt.Key(), "/", "_"), func(t *testing.T) {
			check := func(name string, want int, req call, field string, limit ...int) {
				t.Helper()
				before := f.s.Counts(t)
				r := serve(t, a, req)
				if r.Status != want {
					t.Errorf("%s: status %d, want %d: %s", name, r.Status, want, r.Body)
				}
				msg := r.str("error")
				switch {
				case want == 422 && !strings.HasPrefix(msg, field+":"):
					t.Errorf("%s: message %q does not start with the field %q", name, msg, field)
				case want == 400 && !strings.Contains(msg, "malformed JSON"):
					t.Errorf("%s: message %q", name, msg)
				case want == 413 && !strings.Contains(msg, strconv.Itoa(append(limit, matrixBodyLimit)[0])):
					t.Errorf("%s: message %q does not give the limit", name, msg)
				case want == 401 && r.Header.Get("Www-Authenticate") == "":
					t.Errorf("%s: no WWW-Authenticate", name)
				}
				if after := f.s.Counts(t); after != before {
					t.Errorf("%s: rows changed: %+v → %+v", name, before, after)
				}
			}
			body := f.fill(c.body)
			open := c.token == ""
			okStatus := func() int {
				switch {
				case open:
					return 200
				case strings.HasPrefix(c.target, "/api/internal/"):
					return 403 // NoETL's answer without the internal token
				}
				return 401
			}

			// Malformed JSON: routes that read a body.
			if c.method == "POST" || c.method == "PUT" {
				check("malformed JSON", 400, call{method: c.method, target: target, token: c.token, body: `{"worker_id": "w1",`}, "")
			}
			// Wrong type.
			if c.wrongTarget != "" {
				check("wrong type", 422, call{method: c.method, target: f.fill(c.wrongTarget).(string), token: c.token,
					body: f.fill(c.wrongBody)}, c.field)
			}
			// Unknown id.
			if c.unknownTarget != "" {
				want := c.unknownStatus
				if want == 0 {
					want = 404
				}
				check("unknown id", want, call{method: c.method, target: c.unknownTarget, token: c.token, body: c.unknownBody}, "")
			}
			// Oversize body: the limit holds on every route, GETs included
			// (a route may raise it: a staged result's).
			limit := max(matrixBodyLimit, int(rt.MaxBody))
			pad := `{"pad": "` + strings.Repeat("x", limit) + `"}`
			check("oversize body", 413, call{method: c.method, target: target, token: c.token, body: pad}, "", limit)
			// Tokens.
			check("no token", okStatus(), call{method: c.method, target: target, body: body}, "")
			check("bad token", okStatus(), call{method: c.method, target: target, token: "not-a-token", body: body}, "")
			if c.wrongScope != "" {
				check("wrong scope", 403, call{method: c.method, target: target, token: c.wrongScope, body: body}, "")
			}
			check("malformed Authorization", okStatus(), call{method: c.method, target: target, body: body,
				header: http.Header{"Authorization": {"Basic " + apitest.APIToken}}}, "")
		})
	}
	for _, r := range api.Routes() {
		if !covered[r.Key()] {
			t.Errorf("route %s has no case", r.Key())
		}
	}
}

// TestUnknownRouteAndMethod: 404 and 405 (with Allow) in the error shape.
func TestUnknownRouteAndMethod(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	r := must(t, s.API, 404, call{method: "GET", target: "/api/nope", token: apitest.APIToken})
	if !strings.Contains(r.str("error"), "/api/nope") {
		t.Errorf("404 message %q", r.str("error"))
	}
	r = must(t, s.API, 405, call{method: "DELETE", target: "/api/executions/5", token: apitest.APIToken})
	if r.Header.Get("Allow") != "GET" {
		t.Errorf("Allow %q", r.Header.Get("Allow"))
	}
	r = must(t, s.API, 405, call{method: "GET", target: "/api/execute", token: apitest.APIToken})
	if r.Header.Get("Allow") != "POST" {
		t.Errorf("Allow %q", r.Header.Get("Allow"))
	}
	// A function serves its own routes only (R-A1).
	fn, err := s.API.Function(api.FnCatalog)
	if err != nil {
		t.Fatal(err)
	}
	must(t, fn, 404, call{method: "GET", target: "/api/health"})
	must(t, fn, 200, call{method: "GET", target: "/api/catalog", token: apitest.APIToken})
	if _, err := s.API.Function("nope"); err == nil {
		t.Error("Function(nope) did not fail")
	}
}
