package e2e

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestLocalStackSurface is issue 33's finding 1 against the stack noetl dev
// runs (open, on 127.0.0.1): a web page's text/plain POSTs from another
// origin registered a playbook and started a shell step, and a request with
// Host: attacker.example (DNS rebinding) got 200, so the page could read
// answers too. Now the first is refused before anything is written, the
// second answers 421; the local names, curl's JSON and our client work.
func TestLocalStackSurface(t *testing.T) {
	base := shared.srv.URL
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, host string, header http.Header, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	shell := `{"content": "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: pwned, path: tests/surface/pwned}\nworkflow:\n  - step: start\n    tool: {kind: shell, command: 'touch /tmp/pwned'}\n"}`
	page := http.Header{"Origin": {"https://evil.example"}, "Content-Type": {"text/plain;charset=UTF-8"}}
	if st, body := do("POST", "/api/catalog/register", "", page, shell); st != 403 {
		t.Fatalf("a cross-origin text/plain register: %d %s, want 403", st, body)
	}
	if st, body := do("POST", "/api/catalog/register", "", http.Header{"Content-Type": {"text/plain"}}, shell); st != 415 || !strings.Contains(body, "application/json") {
		t.Fatalf("a text/plain register: %d %s, want 415 naming application/json", st, body)
	}
	if st, body := do("POST", "/api/execute", "", page, `{"path": "tests/surface/pwned"}`); st != 403 {
		t.Fatalf("a cross-origin text/plain execute: %d %s, want 403", st, body)
	}
	if st, body := do("GET", "/api/catalog?path=tests/surface/pwned", "", nil, ""); st != 200 || !strings.Contains(body, `"entries":[]`) {
		t.Fatalf("refused registers left a catalog entry: %d %s", st, body)
	}

	// DNS rebinding: a name that is not the server's.
	for _, host := range []string{"attacker.example", "attacker.example:" + u.Port()} {
		if st, body := do("GET", "/api/executions", host, nil, ""); st != http.StatusMisdirectedRequest || !strings.Contains(body, "NOETL_ALLOWED_HOSTS") {
			t.Fatalf("Host %s: %d %s, want 421 naming NOETL_ALLOWED_HOSTS", host, st, body)
		}
	}
	if st, _ := do("GET", "/metrics", "attacker.example", nil, ""); st != http.StatusMisdirectedRequest {
		t.Fatalf("/metrics for a foreign Host: %d", st)
	}
	for _, host := range []string{"", "localhost:" + u.Port(), "127.0.0.1:" + u.Port()} {
		if st, body := do("GET", "/api/executions?limit=1", host, nil, ""); st != 200 {
			t.Fatalf("Host %q: %d %s", host, st, body)
		}
	}
	// curl --json, and the dashboard's own origin.
	ok := `{"content": "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: fine, path: tests/surface/fine}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n"}`
	if st, body := do("POST", "/api/catalog/register", "", http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json"}}, ok); st != 200 {
		t.Fatalf("curl --json: %d %s", st, body)
	}
	if st, body := do("POST", "/api/catalog/register", "", http.Header{"Content-Type": {"application/json"}, "Origin": {base}}, ok); st != 200 {
		t.Fatalf("the dashboard's own origin: %d %s", st, body)
	}
}
