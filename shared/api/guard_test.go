package api_test

import (
	"net/http"
	"testing"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
)

// TestCrossOriginTextPlainRefused is issue 33's finding 1: on an open stack
// a web page's fetch to /api/catalog/register and then /api/execute, sent
// as text/plain (no preflight needed) from https://evil.example, ran a shell
// step. Now a foreign Origin is refused (403) and a body not declared JSON
// is refused (415), so nothing is registered or started; JSON from no
// origin (curl, our CLI, NoETL's workers) and from the API's own origin
// (the dashboard) still works.
func TestCrossOriginTextPlainRefused(t *testing.T) {
	s := apitest.New(t, apitest.Options{Open: true})
	playbook := map[string]any{"content": apitest.ThreeSteps}
	evil := http.Header{"Origin": {"https://evil.example"}, "Content-Type": {"text/plain;charset=UTF-8"}}
	must(t, s.API, 403, call{method: "POST", target: "/api/catalog/register", body: playbook, header: evil})
	must(t, s.API, 403, call{method: "POST", target: "/api/execute", body: map[string]any{"path": "tests/three"}, header: evil})
	// Without Origin (a page cannot omit it; a sandboxed one sends "null").
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		must(t, s.API, 415, call{method: "POST", target: "/api/catalog/register", body: playbook, header: http.Header{"Content-Type": {ct}}})
	}
	must(t, s.API, 415, call{method: "POST", target: "/api/catalog/register", body: playbook, noContentType: true})
	must(t, s.API, 403, call{method: "POST", target: "/api/catalog/register", body: playbook,
		header: http.Header{"Origin": {"null"}, "Content-Type": {"application/json"}}})
	if c := s.Counts(t); c.Catalog != 0 || c.Execution != 0 {
		t.Fatalf("refused requests registered %d playbooks and started %d executions", c.Catalog, c.Execution)
	}
	must(t, s.API, 404, call{method: "POST", target: "/api/execute", body: map[string]any{"path": "tests/three"}})

	// What clients send still works: JSON with no Origin, a charset, a +json
	// type, and the dashboard's own origin.
	must(t, s.API, 200, call{method: "POST", target: "/api/catalog/register", body: playbook,
		header: http.Header{"Content-Type": {"application/json; charset=utf-8"}}})
	own := http.Header{"Origin": {"http://127.0.0.1:8082"}, "Host": {"127.0.0.1:8082"}, "Content-Type": {"application/json"}}
	ex := must(t, s.API, 200, call{method: "POST", target: "/api/execute", body: map[string]any{"path": "tests/three"}, header: own})
	must(t, s.API, 200, call{method: "POST", target: "/api/catalog/list", body: map[string]any{},
		header: http.Header{"Content-Type": {"application/vnd.noetl+json"}}})
	// A bodiless POST needs no Content-Type (NoETL's GUI sends none there).
	must(t, s.API, 200, call{method: "POST", target: "/api/executions/" + ex.str("execution_id") + "/cancel"})
}

// TestHostRule: the local server answers only the Host names that name it
// (finding 1's DNS rebinding: Host attacker.example got 200).
func TestHostRule(t *testing.T) {
	local := api.NewHostRule("127.0.0.1:8082", "noetl.internal")
	for host, want := range map[string]bool{
		"127.0.0.1:8082": true, "localhost:8082": true, "LOCALHOST": true, "[::1]:8082": true, "127.0.0.2": true,
		"app.localhost:8082": true, "noetl.internal:9000": true, "noetl.internal.": true,
		"attacker.example": false, "attacker.example:8082": false, "10.0.0.5:8082": false, "": false,
		"localhost.attacker.example": false, "noetl.internal.attacker.example": false,
	} {
		if got := local.Allows(host); got != want {
			t.Errorf("listening on 127.0.0.1: Host %q allowed %v, want %v", host, got, want)
		}
	}
	// Listening on every address: any address names the server; a DNS name
	// (what rebinding uses) must be configured.
	all := api.NewHostRule("0.0.0.0:8082")
	for host, want := range map[string]bool{"10.0.0.5:8082": true, "[fd00::5]:8082": true, "localhost": true,
		"attacker.example:8082": false, "myhost.corp": false} {
		if got := all.Allows(host); got != want {
			t.Errorf("listening on 0.0.0.0: Host %q allowed %v, want %v", host, got, want)
		}
	}
	if !api.NewHostRule("127.0.0.1:8082", "*").Allows("anything.example") {
		t.Error("NOETL_ALLOWED_HOSTS=* should answer any Host")
	}
	var none *api.HostRule // behind API Gateway
	if !none.Allows("abc.execute-api.us-east-1.amazonaws.com") {
		t.Error("no rule should answer any Host")
	}
}
