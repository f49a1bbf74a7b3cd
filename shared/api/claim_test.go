package api_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api/apitest"
)

// claim is a command held under a live lease: what a worker reads a
// credential's data under (shared/credentials, claim.go).
type claim struct {
	exec      int64
	commandID string
	worker    string
	attempt   int64
}

// query is the credential read's query for the claim, as our worker sends it.
func (c claim) query() string {
	return fmt.Sprintf("include_data=true&execution_id=%d&command_id=%s&worker_id=%s&attempt=%d",
		c.exec, url.QueryEscape(c.commandID), url.QueryEscape(c.worker), c.attempt)
}

// heldClaim registers a playbook at path whose one step names the
// credentials (a pipeline of noop tools, one auth: each), starts it in pool
// (empty: the default) and claims its command as worker with token.
func heldClaim(t *testing.T, s *apitest.Stack, path, pool, worker, token string, aliases ...string) claim {
	t.Helper()
	var tools []string
	for i, a := range aliases {
		tools = append(tools, fmt.Sprintf("      - {kind: noop, name: t%d, auth: %s}", i, a))
	}
	pb := "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: uses, path: " + path + "}\nworkflow:\n  - step: start\n    next: [end]\n    tool:\n" +
		strings.Join(tools, "\n") + "\n  - step: end\n    tool: {kind: noop}\n"
	must(t, s.API, 200, call{method: "POST", target: "/api/catalog/register", token: apitest.APIToken, body: map[string]any{"content": pb}})
	req := map[string]any{"path": path}
	if pool != "" {
		req["execution_pool"] = pool
	}
	ex := must(t, s.API, 200, call{method: "POST", target: "/api/execute", token: apitest.APIToken, body: req})
	exec := id(t, ex.json["execution_id"])
	p := s.Pending(t, exec)
	if len(p) != 1 {
		t.Fatalf("%d pending commands, want 1", len(p))
	}
	cl := must(t, s.API, 200, call{method: "POST", target: fmt.Sprintf("/api/commands/%d/claim", p[0].IssuedEventID), token: token,
		body: map[string]any{"worker_id": worker}})
	return claim{exec: exec, commandID: cl.str("command_id"), worker: worker, attempt: cl.json["attempt"].(int64)}
}

// TestCredentialDataNeedsLiveClaim is issue 33's finding 4: a worker token
// read every credential of any running execution, and the read log took its
// worker from the query string. Now the data goes only to the holder of a
// live claim in that execution whose step names the credential; the log
// records the claim's worker and command.
func TestCredentialDataNeedsLiveClaim(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	for _, n := range []string{"gh_token", "other_token"} {
		must(t, a, 200, call{method: "POST", target: "/api/credentials", token: apitest.APIToken, body: map[string]any{
			"name": n, "type": "bearer", "data": map[string]any{"token": n + "-secret-value"}}})
	}
	refused := func(target, why string) {
		t.Helper()
		r := must(t, a, 403, call{method: "GET", target: target, token: apitest.WorkerToken})
		if !strings.Contains(r.str("error"), why) || strings.Contains(string(r.Body), "secret-value") {
			t.Errorf("%s: %s, want 403 saying %q", target, r.Body, why)
		}
	}
	// The fixture's running execution names no credential: before, any worker
	// token got the data for it.
	refused("/api/credentials/gh_token?include_data=true&execution_id="+itoa(f.exec), "naming credential \"gh_token\"")
	refused("/api/credentials/gh_token?include_data=true&worker_id=w1&execution_id="+itoa(f.exec), "naming credential \"gh_token\"")

	c := heldClaim(t, f.s, "tests/uses_gh", "", "w1", apitest.WorkerToken, "gh_token")
	base := "/api/credentials/gh_token?"
	// Another credential, another worker, another attempt, another command.
	refused("/api/credentials/other_token?"+c.query(), "naming credential \"other_token\"")
	wrong := c
	wrong.worker = "w-intruder"
	refused(base+wrong.query(), "is not held by worker \"w-intruder\"")
	wrong = c
	wrong.attempt = 2
	refused(base+wrong.query(), "at attempt 2")
	wrong = c
	wrong.commandID = fmt.Sprintf("%d:start:1", f.exec)
	refused(base+wrong.query(), "is not held")

	// The holder gets it, and the log records the claim, not the query.
	got := must(t, a, 200, call{method: "GET", target: base + c.query(), token: apitest.WorkerToken})
	if d, _ := got.json["data"].(map[string]any); d["token"] != "gh_token-secret-value" {
		t.Fatalf("the holder's read: %s", got.Body)
	}
	// NoETL's Rust worker sends execution_id alone: a live claim naming the
	// credential in the execution is enough, and the log names its holder.
	must(t, a, 200, call{method: "GET", target: fmt.Sprintf("%sinclude_data=true&execution_id=%d", base, c.exec), token: apitest.InternalToken})
	log := must(t, a, 200, call{method: "GET", target: "/api/credentials/gh_token/reads", token: apitest.APIToken})
	items, _ := log.json["items"].([]any)
	served := 0
	for _, it := range items {
		m := it.(map[string]any)
		if m["outcome"] == "served" {
			served++
			if m["worker_id"] != "w1" || m["command_id"] != c.commandID {
				t.Errorf("a served read logs the claim's worker and command: %v", m)
			}
		}
	}
	if served != 2 {
		t.Errorf("%d served reads logged, want 2: %s", served, log.Body)
	}

	// Once the command is done, the claim is gone.
	must(t, a, 200, call{method: "POST", target: "/api/events", token: apitest.WorkerToken, body: map[string]any{
		"execution_id": itoa(c.exec), "step": "start", "event_type": "command.completed", "worker_id": "w1",
		"payload": map[string]any{"command_id": c.commandID, "result": map[string]any{"status": "success", "data": map[string]any{}}},
		"meta":    map[string]any{"command_id": c.commandID, "attempt": c.attempt}}})
	refused(base+c.query(), "is not held")
}

// TestCredentialScopePlaybooksAndPools is issue 33's finding 3, its server
// half: a credential may name the playbooks and pools allowed to use it;
// the keychain refuses its data to a claim of any other execution, naming
// the rule, which is the step's error. A scope given once stays when NoETL's
// clients (which know no scope) replace the credential.
func TestCredentialScopePlaybooksAndPools(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	must(t, a, 200, call{method: "POST", target: "/api/credentials", token: apitest.APIToken, body: map[string]any{
		"name": "fin_db", "type": "postgres", "data": map[string]any{"db_host": "db.finance", "db_password": "fin-secret-value"},
		"scope": map[string]any{"playbooks": []any{"finance/**"}, "pools": []any{"secure"}, "hosts": []any{"db.finance:5432"}}}})
	// NoETL's GUI editing it sends no scope: the scope stays.
	r := must(t, a, 200, call{method: "POST", target: "/api/credentials", token: apitest.APIToken, body: map[string]any{
		"name": "fin_db", "type": "postgres", "data": map[string]any{"db_host": "db.finance", "db_password": "fin-secret-value"}, "tags": "db"}})
	if sc, _ := r.json["scope"].(map[string]any); sc == nil || fmt.Sprint(sc["playbooks"]) != "[finance/**]" {
		t.Fatalf("the scope after a replace without one: %s", r.Body)
	}
	refused := func(c claim, why string) {
		t.Helper()
		r := must(t, a, 403, call{method: "GET", target: "/api/credentials/fin_db?" + c.query(), token: apitest.WorkerToken})
		if !strings.Contains(r.str("error"), why) || strings.Contains(string(r.Body), "fin-secret-value") {
			t.Errorf("%s: %s, want 403 saying %q", c.query(), r.Body, why)
		}
	}
	refused(heldClaim(t, f.s, "tests/exfil", "secure", "w1", apitest.WorkerToken, "fin_db"), "scope.playbooks")
	refused(heldClaim(t, f.s, "finance/eu/daily", "", "w2", apitest.WorkerToken, "fin_db"), "scope.pools")
	ok := heldClaim(t, f.s, "finance/eu/nightly", "secure", "w3", apitest.WorkerToken, "fin_db")
	got := must(t, a, 200, call{method: "GET", target: "/api/credentials/fin_db?" + ok.query(), token: apitest.WorkerToken})
	// The data comes with the hosts the worker may send it to.
	if d, _ := got.json["data"].(map[string]any); d["db_password"] != "fin-secret-value" {
		t.Fatalf("the allowed read: %s", got.Body)
	}
	if sc, _ := got.json["scope"].(map[string]any); fmt.Sprint(sc["hosts"]) != "[db.finance:5432]" {
		t.Fatalf("the scope's hosts with the data: %s", got.Body)
	}
	// A bad scope is refused naming the entry; {} clears it.
	r = must(t, a, 422, call{method: "POST", target: "/api/credentials", token: apitest.APIToken, body: map[string]any{
		"name": "fin_db", "data": map[string]any{"x": "y"}, "scope": map[string]any{"hosts": []any{"ok.example", "https://x.example/"}}}})
	if !strings.Contains(r.str("error"), "scope.hosts[1]") {
		t.Fatalf("a bad scope: %s", r.Body)
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/credentials", token: apitest.APIToken, body: map[string]any{
		"name": "fin_db", "type": "postgres", "data": map[string]any{"db_password": "fin-secret-value"}, "scope": map[string]any{}}})
	if r.json["scope"] != nil {
		t.Fatalf("scope {} should clear it: %s", r.Body)
	}
}
