package api_test

import (
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

// NoETL's workers' registrations, as they send them: the Python worker's as
// recorded (../shared/conformance/noetl-worker/wire.jsonl), the Rust
// worker's as its control_plane.rs builds it.
func pythonRegistration(name, startedAt string) map[string]any {
	return map[string]any{"name": name, "component_type": "worker_pool", "runtime": "python", "status": "ready",
		"capacity": int64(1), "pid": int64(6098), "hostname": "unknown", "labels": map[string]any{"nats_consumer": "noetl_worker_pool"},
		"meta": map[string]any{"nats_url": "nats://127.0.0.1:44519", "started_at": startedAt}}
}

func rustRegistration(name string) map[string]any {
	return map[string]any{"name": name, "component_type": "worker_pool",
		"runtime": map[string]any{"kind": "rust", "worker_public_key": "bm90LWEta2V5"}, "status": "ready",
		"hostname": "pod-7", "labels": map[string]any{"pool_name": "worker-rust-pool"}}
}

// items reads GET /api/worker/pools into name → item.
func items(t *testing.T, f *fixture, query string) map[string]map[string]any {
	t.Helper()
	r := must(t, f.s.API, 200, call{method: "GET", target: "/api/worker/pools" + query, token: apitest.APIToken})
	out := map[string]map[string]any{}
	list, _ := r.json["items"].([]any)
	if r.json["count"] != int64(len(list)) {
		t.Fatalf("count %v for %d items", r.json["count"], len(list))
	}
	for _, it := range list {
		m := it.(map[string]any)
		out[m["name"].(string)] = m
	}
	return out
}

// TestWorkerRegistry: NoETL's workers register in their own shapes; the
// registry answers who is alive (the expiry rule: 45 s without a beat), how
// busy (commands held under a live lease), and a beat extends the leases of
// the commands the worker's own process holds, nobody else's.
func TestWorkerRegistry(t *testing.T) {
	f := newFixture(t, apitest.Options{Lease: 30 * time.Second})
	a, worker := f.s.API, apitest.WorkerToken
	py, rs := "worker-bb96face", "5b4f0c1e-rust"

	r := must(t, a, 200, call{method: "POST", target: "/api/worker/pool/register", token: worker, body: pythonRegistration(py, "2026-11-26T20:51:36.308412+00:00")})
	if r.str("status") != "ok" || r.str("name") != py || r.str("kind") != "worker_pool" || r.str("runtime") != "python" || r.str("runtime_id") == "" {
		t.Fatalf("register answered %s", r.Body)
	}
	must(t, a, 200, call{method: "POST", target: "/api/worker/pool/register", token: worker, body: rustRegistration(rs)})

	got := items(t, f, "")
	p, ok := got[py]
	if !ok || got[rs] == nil {
		t.Fatalf("the registry lists %v, want both workers", got)
	}
	if p["pool"] != "shared" || p["status"] != "ready" || p["alive"] != true || p["capacity"] != int64(1) || p["in_flight"] != int64(0) {
		t.Errorf("the Python worker is listed as %v", p)
	}
	if rt := p["runtime"].(map[string]any); rt["type"] != "python" || rt["pid"] != int64(6098) || rt["started_at"] == nil {
		t.Errorf("the Python worker's runtime object is %v, want NoETL's {type, pid, hostname, …meta}", rt)
	}
	if w := got[rs]; w["pool"] != "worker-rust-pool" || w["capacity"] != nil || w["runtime"].(map[string]any)["type"] != "rust" {
		t.Errorf("the Rust worker is listed as %v", w)
	}

	// In flight: the command the Python worker claims is its own, nobody else's.
	claim := must(t, a, 200, call{method: "POST", target: "/api/commands/" + strconv.FormatInt(f.command, 10) + "/claim", token: worker,
		body: map[string]any{"worker_id": py}})
	commandID := claim.str("command_id")
	got = items(t, f, "")
	if got[py]["in_flight"] != int64(1) || got[rs]["in_flight"] != int64(0) {
		t.Errorf("in flight: python %v, rust %v; want 1 and 0", got[py]["in_flight"], got[rs]["in_flight"])
	}
	st := must(t, a, 200, call{method: "GET", target: "/api/pool/status", token: worker})
	ws := st.json["workers"].(map[string]any)
	if ws["alive"] != int64(2) || ws["in_flight"] != int64(1) || ws["capacity"] != int64(1) || st.str("status") != "ok" {
		t.Errorf("pool status %s", st.Body)
	}
	if st.json["pool_max"].(int64) <= 0 || st.json["slots_available"].(int64) <= 0 {
		t.Errorf("pool status reports no connections to hand out: %s", st.Body)
	}

	// A beat extends the holder's lease: the Python worker's re-registration
	// (its heartbeat) and a pool heartbeat alike.
	lease := func() time.Time {
		sh, err := f.s.Store.ShardFor(f.exec)
		if err != nil {
			t.Fatal(err)
		}
		c, err := storetest.Command(f.s.Ctx, sh.Pool(), commandID)
		if err != nil {
			t.Fatal(err)
		}
		return c.LeaseExpiresAt
	}
	before := lease()
	time.Sleep(20 * time.Millisecond)
	r = must(t, a, 200, call{method: "POST", target: "/api/worker/pool/register", token: worker, body: pythonRegistration(py, "2026-11-26T20:51:36.308412+00:00")})
	if r.json["leases_extended"] != int64(1) || !lease().After(before) {
		t.Errorf("the same process registering again extended %v leases (lease %v → %v), want its 1", r.json["leases_extended"], before, lease())
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/worker/pool/heartbeat", token: worker, body: map[string]any{"name": py}})
	if r.json["leases_extended"] != int64(1) || r.str("status") != "ok" {
		t.Errorf("the pool heartbeat answered %s, want 1 lease extended", r.Body)
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/worker/pool/heartbeat", token: worker, body: map[string]any{"name": rs}})
	if r.json["leases_extended"] != int64(0) {
		t.Errorf("another worker's beat extended %v leases, want none (fenced by holder)", r.json["leases_extended"])
	}

	// A new process under the same id (a restarted worker) keeps nothing its
	// predecessor held: neither its registration nor its beats extend it.
	time.Sleep(1100 * time.Millisecond) // past the clock allowance between databases
	r = must(t, a, 200, call{method: "POST", target: "/api/worker/pool/register", token: worker, body: pythonRegistration(py, "2026-11-26T21:00:00+00:00")})
	if r.json["leases_extended"] != int64(0) {
		t.Errorf("a new process's registration extended %v leases, want none", r.json["leases_extended"])
	}
	before = lease()
	r = must(t, a, 200, call{method: "POST", target: "/api/worker/pool/heartbeat", token: worker, body: map[string]any{"name": py}})
	if r.json["leases_extended"] != int64(0) || !lease().Equal(before) {
		t.Errorf("the new process's beat extended %v leases, want none of the old process's", r.json["leases_extended"])
	}

	// Expiry: silent for 45 s, a worker is expired; a beat brings it back.
	if _, err := f.s.Store.Cluster().Exec(f.s.Ctx, `UPDATE worker SET last_seen = now() - interval '46 seconds' WHERE name = $1`, rs); err != nil {
		t.Fatal(err)
	}
	got = items(t, f, "")
	if got[rs]["status"] != "expired" || got[rs]["alive"] != false || got[py]["alive"] != true {
		t.Errorf("after 46 s of silence the Rust worker is %v / %v", got[rs]["status"], got[rs]["alive"])
	}
	if alive := items(t, f, "?status=alive"); len(alive) != 1 || alive[py] == nil {
		t.Errorf("?status=alive lists %v, want the Python worker only", alive)
	}
	if expired := items(t, f, "?status=expired&runtime=rust"); len(expired) != 1 || expired[rs] == nil {
		t.Errorf("?status=expired&runtime=rust lists %v", expired)
	}
	st = must(t, a, 200, call{method: "GET", target: "/api/pool/status", token: apitest.APIToken})
	if ws := st.json["workers"].(map[string]any); ws["alive"] != int64(1) || ws["expired"] != int64(1) {
		t.Errorf("pool status workers %v, want 1 alive and 1 expired", ws)
	}
	must(t, a, 200, call{method: "POST", target: "/api/worker/pool/heartbeat", token: worker, body: map[string]any{"name": rs}})
	if got = items(t, f, ""); got[rs]["alive"] != true {
		t.Errorf("a beat did not bring the expired worker back: %v", got[rs])
	}

	// Deregistered: offline (POST as NoETL's workers send it, DELETE as its
	// server routes it); a beat of an unknown worker is a 404 unless it
	// carries its registration.
	r = must(t, a, 200, call{method: "POST", target: "/api/worker/pool/deregister", token: worker, body: map[string]any{"name": rs, "component_type": "worker_pool"}})
	if r.json["found"] != true {
		t.Errorf("deregister answered %s", r.Body)
	}
	if got = items(t, f, ""); got[rs]["status"] != "offline" || got[rs]["alive"] != false {
		t.Errorf("deregistered, the Rust worker is %v", got[rs])
	}
	r = must(t, a, 200, call{method: "DELETE", target: "/api/worker/pool/deregister", token: worker, body: map[string]any{"name": "never-registered"}})
	if r.json["found"] != false {
		t.Errorf("deregistering an unknown worker answered %s", r.Body)
	}
	r = must(t, a, 404, call{method: "POST", target: "/api/worker/pool/heartbeat", token: worker, body: map[string]any{"name": "never-registered"}})
	if !strings.Contains(r.str("error"), "/api/worker/pool/register") {
		t.Errorf("the 404 says %q, not how to register", r.str("error"))
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/worker/pool/heartbeat", token: worker, body: map[string]any{"name": "came-back",
		"registration": map[string]any{"runtime": "python", "capacity": int64(3)}}})
	if r.str("status") != "recreated" || items(t, f, "")["came-back"]["capacity"] != int64(3) {
		t.Errorf("a beat with its registration answered %s", r.Body)
	}

	// Refusals name the field and write nothing.
	before2 := f.s.Counts(t)
	for field, body := range map[string]map[string]any{
		"runtime":        {"name": "w", "runtime": int64(3)},
		"component_type": {"name": "w", "component_type": "broker"},
		"labels":         {"name": "w", "labels": "pool=a"},
		"name":           {"runtime": "python"},
		"capacity":       {"name": "w", "capacity": int64(-1)},
	} {
		r := must(t, a, 422, call{method: "POST", target: "/api/worker/pool/register", token: worker, body: body})
		if !strings.HasPrefix(r.str("error"), field+":") {
			t.Errorf("%v: %q does not name %s", body, r.str("error"), field)
		}
	}
	if after := f.s.Counts(t); after != before2 {
		t.Errorf("refused registrations wrote rows: %+v → %+v", before2, after)
	}
}

// TestTokenlessWorkers: NoETL's Python worker sends no Authorization header.
// Off by default such requests are refused; with
// NOETL_TOKENLESS_WORKER_NETWORKS they get the worker scope, and only that,
// and only from the networks named. A request that sends a token is judged
// by its token.
func TestTokenlessWorkers(t *testing.T) {
	register := func(source string) call {
		return call{method: "POST", target: "/api/worker/pool/register", body: map[string]any{"name": "tokenless", "runtime": "python"}, source: source}
	}
	off := apitest.New(t, apitest.Options{})
	for _, src := range []string{"127.0.0.1", "10.1.2.3"} {
		must(t, off.API, 401, register(src))
		must(t, off.API, 401, call{method: "GET", target: "/api/pool/status", source: src})
	}

	on := newFixture(t, apitest.Options{TokenlessWorkers: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("127.0.0.1/32")}})
	a := on.s.API
	for _, src := range []string{"10.1.2.3", "127.0.0.1", "::ffff:10.1.200.4"} {
		must(t, a, 200, register(src))
		must(t, a, 200, call{method: "GET", target: "/api/pool/status", source: src})
		must(t, a, 200, call{method: "GET", target: "/api/executions/" + strconv.FormatInt(on.exec, 10) + "/cancellation-check", source: src})
		must(t, a, 200, call{method: "GET", target: "/api/commands/" + strconv.FormatInt(on.command, 10), source: src})
		// The routes a worker needs for its own commands only: the registry's
		// listing, variables and credentials need a token (docs/security.md),
		// the user's routes and the internal ones stay shut.
		must(t, a, 401, call{method: "GET", target: "/api/worker/pools", source: src})
		must(t, a, 401, call{method: "POST", target: "/api/vars/" + strconv.FormatInt(on.exec, 10), body: map[string]any{"planted": "x"}, source: src})
		must(t, a, 401, call{method: "GET", target: "/api/vars/" + strconv.FormatInt(on.exec, 10), source: src})
		must(t, a, 401, call{method: "GET", target: "/api/credentials/" + matrixCredential + "?include_data=true&execution_id=" + strconv.FormatInt(on.exec, 10), source: src})
		// A browser is no worker: a page in that network (it sends Origin) gets nothing.
		must(t, a, 401, call{method: "GET", target: "/api/pool/status", source: src, header: http.Header{"Origin": {"http://127.0.0.1"}, "Host": {"127.0.0.1"}}})
		must(t, a, 401, call{method: "POST", target: "/api/execute", body: map[string]any{"path": "tests/three"}, source: src})
		must(t, a, 401, call{method: "GET", target: "/api/executions", source: src})
		must(t, a, 401, call{method: "POST", target: "/api/catalog/register", body: map[string]any{"content": apitest.ThreeSteps}, source: src})
		must(t, a, 403, call{method: "GET", target: "/api/internal/outbox/pending-count", source: src})
		// A token is judged alone: a wrong one is refused even from inside.
		must(t, a, 401, call{method: "GET", target: "/api/pool/status", token: "not-a-token", source: src})
	}
	for _, src := range []string{"10.2.0.1", "192.168.1.9", "", "not-an-address"} {
		must(t, a, 401, register(src))
		must(t, a, 401, call{method: "POST", target: "/api/events", body: map[string]any{"execution_id": strconv.FormatInt(on.exec, 10), "event_type": "step.note"}, source: src})
	}
	// A claim from inside works end to end without a token.
	must(t, a, 200, call{method: "POST", target: "/api/commands/" + strconv.FormatInt(on.command, 10) + "/claim", body: map[string]any{"worker_id": "tokenless"}, source: "10.1.0.9"})
}

// TestInternalTokenHoldsWorkerScope: NoETL's Rust worker sends
// NOETL_INTERNAL_API_TOKEN on every call, so the internal token holds the
// worker scope (docs/noetl-compat.md "Workers and the internal token"): the
// worker routes answer it, credential data included; the user routes
// refuse it (403); the worker token still opens nothing internal.
func TestInternalTokenHoldsWorkerScope(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a, exec := f.s.API, itoa(f.exec)
	tok := apitest.InternalToken
	must(t, a, 200, call{method: "POST", target: "/api/worker/pool/register", token: tok, body: map[string]any{"name": "rust-1", "component_type": "worker_pool",
		"runtime": map[string]any{"kind": "rust", "worker_public_key": "AAAA"}, "status": "ready", "hostname": "h", "labels": map[string]any{"pool_name": "worker-rust-pool"}}})
	must(t, a, 200, call{method: "POST", target: "/api/worker/pool/heartbeat", token: tok, body: map[string]any{"name": "rust-1"}})
	must(t, a, 200, call{method: "GET", target: "/api/pool/status", token: tok})
	must(t, a, 200, call{method: "POST", target: "/api/commands/" + itoa(f.command) + "/claim", token: tok, body: map[string]any{"worker_id": "rust-1"}})
	// NoETL's Rust worker reads a credential with execution_id alone, under
	// a claim (its own) whose step names it.
	held := heldClaim(t, f.s, "tests/uses_matrix", "", "rust-1", tok, matrixCredential)
	cred := must(t, a, 200, call{method: "GET", target: "/api/credentials/" + matrixCredential + "?include_data=true&execution_id=" + itoa(held.exec), token: tok})
	if d, _ := cred.json["data"].(map[string]any); d["token"] != "matrix-secret-token" {
		t.Fatalf("credential data to the internal token: %s", cred.Body)
	}
	must(t, a, 200, call{method: "POST", target: "/api/vars/" + exec, token: tok, body: map[string]any{"greeting": "hi"}})
	must(t, a, 200, call{method: "POST", target: "/api/events", token: tok, body: map[string]any{"execution_id": exec, "event_type": "step.note"}})
	// Not the user's scope.
	must(t, a, 403, call{method: "POST", target: "/api/execute", token: tok, body: map[string]any{"path": "tests/three"}})
	must(t, a, 403, call{method: "GET", target: "/api/credentials", token: tok})
	must(t, a, 403, call{method: "POST", target: "/api/catalog/register", token: tok, body: map[string]any{"content": apitest.ThreeSteps}})
	// The worker scope does not reach the internal routes.
	must(t, a, 403, call{method: "GET", target: "/api/internal/outbox/pending-count", token: apitest.WorkerToken})
	must(t, a, 200, call{method: "GET", target: "/api/internal/outbox/pending-count", token: tok})
}
