package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCredentialsCommands drives noetl credentials against a real stack: set
// from a data file and from NoETL's credential file shape, list, get (never
// the data), a playbook whose http step names the credential (our worker
// resolves it through the keychain, before its environment, and masks it),
// the read log, a key rotation, and delete.
func TestCredentialsCommands(t *testing.T) {
	s := startCLIStack(t)
	const token = "cli-keychain-token-8e1f"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"authorized": %v, "sent": %q}`, r.Header.Get("Authorization") == "Bearer "+token, r.Header.Get("Authorization"))
	}))
	t.Cleanup(echo.Close)

	data := s.file("api.json", `{"token": "`+token+`"}`)
	if code, out, errOut := s.cli("credentials", "set", "echo_api", "--type", "bearer", "--data", data, "--tags", "http,test", "--description", "the echo server"); code != exitOK || !strings.HasPrefix(out, "created credential echo_api") {
		t.Fatalf("set: exit %d\n%s%s", code, out, errOut)
	}
	noetlShape := s.file("pg.yaml", "name: pg_other\ntype: postgres\ndata: {db_host: db, db_user: u, db_password: other-pw-77c1, db_name: w}\ntags: [db]\n")
	if code, out, errOut := s.cli("credentials", "set", "-f", noetlShape); code != exitOK || !strings.Contains(out, "credential pg_other") {
		t.Fatalf("set -f: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut := s.cli("credentials", "list")
	if code != exitOK || !strings.Contains(out, "echo_api") || !strings.Contains(out, "pg_other") || strings.Contains(out, token) {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = s.cli("credentials", "get", "echo_api", "--json")
	if got := decode(t, out); code != exitOK || got["type"] != "bearer" || got["data"] != nil || strings.Contains(out, token) {
		t.Fatalf("get: exit %d\n%s%s", code, out, errOut)
	}

	pb := s.file("kc.yaml", `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: kc, path: cli/keychain}
workload: {url: ""}
workflow:
  - step: start
    tool: {kind: http, url: "{{ url }}", auth: echo_api}
`)
	code, out, errOut = s.cli("exec", pb, "--set", "url="+echo.URL, "--wait", "--json")
	if code != exitOK {
		t.Fatalf("exec: exit %d\n%s%s", code, out, errOut)
	}
	view := decode(t, out)
	res, _ := stepOf(view, "start")["result"].(map[string]any)
	body, _ := res["body"].(map[string]any)
	if sent, _ := body["sent"].(string); body["authorized"] != true || !strings.Contains(sent, "[REDACTED]") || strings.Contains(out, token) {
		t.Fatalf("the step through the keychain's credential: %v", res)
	}
	code, out, errOut = s.cli("credentials", "reads", "echo_api", "--json")
	if code != exitOK || !strings.Contains(out, `"outcome":"served"`) || !strings.Contains(out, `"include_data":true`) || strings.Contains(out, token) {
		t.Fatalf("reads: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = s.cli("credentials", "rotate", "--new-key", "--batch", "1")
	if code != exitOK || !strings.Contains(out, "new key file:") || !strings.Contains(out, "0 left under older keys") || !strings.Contains(out, "every credential is sealed under") {
		t.Fatalf("rotate: exit %d\n%s%s", code, out, errOut)
	}
	// Still usable after the rotation.
	if code, out, errOut := s.cli("exec", "cli/keychain", "--set", "url="+echo.URL, "--wait", "--json"); code != exitOK || !strings.Contains(out, `"authorized":true`) {
		t.Fatalf("exec after rotation: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := s.cli("credentials", "delete", "echo_api"); code != exitOK || !strings.HasPrefix(out, "deleted credential echo_api") {
		t.Fatalf("delete: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := s.cli("credentials", "get", "echo_api"); code != exitFail || !strings.Contains(errOut, "404") {
		t.Fatalf("get after delete: exit %d %s", code, errOut)
	}
	// Usage errors.
	if code, _, _ := s.cli("credentials", "set", "x", "--type", "bearer"); code != exitUsage {
		t.Fatalf("set without data: exit %d", code)
	}
	if code, _, _ := s.cli("credentials", "nope"); code != exitUsage {
		t.Fatalf("unknown subcommand: exit %d", code)
	}
}
