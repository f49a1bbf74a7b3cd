package api_test

import (
	"bytes"
	"encoding/base64"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api/apitest"
)

// Secrets of the keychain tests: none may be found at rest.
const (
	kcPassword = "kc-pg-password-9d1e"
	kcToken    = "kc-bearer-token-7c2f"
)

// tableText is every row of a cluster table as Postgres prints it, bytea
// columns included (hex), plus each bytea column decoded, so a secret stored
// in plaintext or in a bytea shows up.
func tableText(t *testing.T, s *apitest.Stack, table string) []byte {
	t.Helper()
	var out bytes.Buffer
	rows, err := s.Store.Cluster().Query(s.Ctx, `SELECT t::text FROM `+table+` t`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		out.WriteString(line + "\n")
	}
	rows.Close()
	if table == "credential" {
		rows, err := s.Store.Cluster().Query(s.Ctx, `SELECT wrapped_key, nonce, ciphertext FROM credential`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var a, b, c []byte
			if err := rows.Scan(&a, &b, &c); err != nil {
				t.Fatal(err)
			}
			out.Write(a)
			out.Write(b)
			out.Write(c)
		}
		rows.Close()
	}
	return out.Bytes()
}

func noSecret(t *testing.T, what string, b []byte, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s)), strings.ToUpper(s)} {
			if bytes.Contains(b, []byte(form)) {
				t.Errorf("%s holds %q", what, form)
			}
		}
	}
}

// TestKeychainAtRest: a credential's data is sealed before it is stored: the
// credential table (every column, the bytea ones decoded too), the read log
// and every answer without include_data hold no secret; the key file is
// mode 0600; with the data asked for by a worker of a running execution it
// comes back whole.
func TestKeychainAtRest(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	r := must(t, a, 200, call{method: "POST", target: "/api/credentials", token: apitest.APIToken, body: map[string]any{
		"name": "pg_prod", "type": "postgres", "description": "the production database", "tags": "db, prod",
		"meta": map[string]any{"owner": "data"},
		"data": map[string]any{"db_host": "db.internal", "db_user": "etl", "db_password": kcPassword, "db_port": "5432", "db_name": "warehouse"}}})
	if r.json["created"] != true || r.str("name") != "pg_prod" || r.json["data"] != nil {
		t.Fatalf("created: %s", r.Body)
	}
	must(t, a, 200, call{method: "POST", target: "/api/credentials", token: apitest.APIToken, body: map[string]any{
		"name": "api_prod", "credential_type": "bearer", "data": map[string]any{"token": kcToken}}})
	// Replacing keeps the id and says so.
	again := must(t, a, 200, call{method: "POST", target: "/api/credentials", token: apitest.APIToken, body: map[string]any{
		"name": "api_prod", "type": "bearer", "data": map[string]any{"token": kcToken}, "tags": []any{"http"}}})
	if again.json["created"] != false {
		t.Fatalf("replaced: %s", again.Body)
	}

	noSecret(t, "the credential table", tableText(t, f.s, "credential"), kcPassword, kcToken)
	list := must(t, a, 200, call{method: "GET", target: "/api/credentials?q=PROD", token: apitest.APIToken})
	noSecret(t, "the list", list.Body, kcPassword, kcToken)
	items, _ := list.json["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("list: %s", list.Body)
	}
	one := must(t, a, 200, call{method: "GET", target: "/api/credentials/pg_prod", token: apitest.APIToken})
	noSecret(t, "GET without include_data", one.Body, kcPassword)
	if tags, _ := one.json["tags"].([]any); len(tags) != 2 || tags[0] != "db" || one.str("description") != "the production database" {
		t.Fatalf("metadata: %s", one.Body)
	}
	c := heldClaim(t, f.s, "tests/uses_pg", "", "w1", apitest.WorkerToken, "pg_prod")
	got := must(t, a, 200, call{method: "GET", target: "/api/credentials/pg_prod?" + c.query(), token: apitest.WorkerToken})
	if d, _ := got.json["data"].(map[string]any); d["db_password"] != kcPassword || d["db_port"] != "5432" {
		t.Fatalf("the worker's read: %s", got.Body)
	}
	byID := must(t, a, 200, call{method: "GET", target: "/api/credentials/" + one.str("id"), token: apitest.APIToken})
	if byID.str("name") != "pg_prod" {
		t.Fatalf("by id: %s", byID.Body)
	}
	noSecret(t, "the read log", tableText(t, f.s, "credential_read"), kcPassword, kcToken)
	fi, err := os.Stat(f.s.KeyRing.Path())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v %v", fi.Mode().Perm(), err)
	}
	d := must(t, a, 200, call{method: "DELETE", target: "/api/credentials/api_prod", token: apitest.APIToken})
	if d.str("message") != "Credential deleted successfully" {
		t.Fatalf("delete: %s", d.Body)
	}
	must(t, a, 404, call{method: "GET", target: "/api/credentials/api_prod", token: apitest.APIToken})
	// Refused names.
	for _, name := range []string{"a/b", "123", "", "has space"} {
		must(t, a, 422, call{method: "POST", target: "/api/credentials", token: apitest.APIToken,
			body: map[string]any{"name": name, "data": map[string]any{"x": "y"}}})
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestCredentialDataRefusals: a credential's data is answered only to the
// worker scope for a running execution (to a live claim naming it:
// TestCredentialDataNeedsLiveClaim). The api scope, a worker without an
// execution, with an unknown one and with a finished one are each refused
// with 403 naming why; every read is in the read log, with its outcome.
func TestCredentialDataRefusals(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	must(t, a, 200, call{method: "POST", target: "/api/credentials", token: apitest.APIToken, body: map[string]any{
		"name": "api_prod", "type": "bearer", "data": map[string]any{"token": kcToken}}})
	c := heldClaim(t, f.s, "tests/uses_api", "", "w9", apitest.WorkerToken, "api_prod")
	exec := itoa(c.exec)
	refused := func(token, query, why string) {
		t.Helper()
		r := must(t, a, 403, call{method: "GET", target: "/api/credentials/api_prod?include_data=true" + query, token: token})
		if !strings.Contains(r.str("error"), why) || bytes.Contains(r.Body, []byte(kcToken)) {
			t.Errorf("include_data%s: %s, want it to say %q", query, r.Body, why)
		}
	}
	refused(apitest.APIToken, "&execution_id="+exec, "only to the worker scope")
	refused(apitest.WorkerToken, "", "needs execution_id")
	refused(apitest.WorkerToken, "&execution_id="+unknownExec, "is not known")
	served := must(t, a, 200, call{method: "GET", target: "/api/credentials/api_prod?" + c.query(), token: apitest.WorkerToken})
	if d, _ := served.json["data"].(map[string]any); d["token"] != kcToken {
		t.Fatalf("served: %s", served.Body)
	}
	must(t, a, 200, call{method: "POST", target: "/api/executions/" + exec + "/cancel", token: apitest.APIToken, body: map[string]any{}})
	refused(apitest.WorkerToken, "&execution_id="+exec, "is CANCELLED")
	must(t, a, 404, call{method: "GET", target: "/api/credentials/nope?include_data=true&execution_id=" + exec, token: apitest.WorkerToken})

	log := must(t, a, 200, call{method: "GET", target: "/api/credentials/api_prod/reads", token: apitest.APIToken})
	items, _ := log.json["items"].([]any)
	var outcomes []string
	for _, it := range items {
		m := it.(map[string]any)
		outcomes = append(outcomes, m["outcome"].(string)+"/"+m["scope"].(string))
		if m["outcome"] == "served" && (m["worker_id"] != "w9" || m["execution_id"] != exec || !strings.HasPrefix(m["token"].(string), "sha256:")) {
			t.Errorf("the served read's entry: %v", m)
		}
	}
	if want := "refused/worker served/worker refused/worker refused/worker refused/api"; strings.Join(outcomes, " ") != want {
		t.Errorf("read log, newest first: %v", outcomes)
	}
	noSecret(t, "the read log", log.Body, kcToken, apitest.WorkerToken, apitest.APIToken)
	byExec := must(t, a, 200, call{method: "GET", target: "/api/credentials/api_prod/reads?execution_id=" + exec, token: apitest.APIToken})
	if items, _ := byExec.json["items"].([]any); len(items) != 3 {
		t.Errorf("reads for the execution: %s", byExec.Body)
	}
}

// TestKeychainRotation: after a new key, rotation reseals every credential
// under it (in batches, remaining counting down to 0) and each still opens.
func TestKeychainRotation(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	for _, n := range []string{"r1", "r2", "r3"} {
		must(t, a, 200, call{method: "POST", target: "/api/credentials", token: apitest.APIToken, body: map[string]any{
			"name": n, "type": "generic", "data": map[string]any{"secret": n + "-secret-value"}}})
	}
	first := must(t, a, 200, call{method: "GET", target: "/api/credentials/r1", token: apitest.APIToken}).str("key_id")
	r := must(t, a, 200, call{method: "POST", target: "/api/credentials/rotate", token: apitest.APIToken, body: map[string]any{"new_key": true, "limit": 2}})
	// Four credentials: the fixture's and these three.
	if r.json["new_key"] != true || r.str("key_id") == first || r.json["resealed"] != int64(2) || r.json["remaining"] != int64(2) {
		t.Fatalf("first rotation call: %s", r.Body)
	}
	r2 := must(t, a, 200, call{method: "POST", target: "/api/credentials/rotate", token: apitest.APIToken, body: map[string]any{}})
	if r2.str("key_id") != r.str("key_id") || r2.json["resealed"] != int64(2) || r2.json["remaining"] != int64(0) {
		t.Fatalf("second rotation call: %s", r2.Body)
	}
	c := heldClaim(t, f.s, "tests/uses_r", "", "w1", apitest.WorkerToken, "r1", "r2", "r3")
	for _, n := range []string{"r1", "r2", "r3"} {
		got := must(t, a, 200, call{method: "GET", target: "/api/credentials/" + n + "?" + c.query(), token: apitest.WorkerToken})
		if d, _ := got.json["data"].(map[string]any); d["secret"] != n+"-secret-value" || got.str("key_id") != r.str("key_id") {
			t.Errorf("%s after rotation: %s", n, got.Body)
		}
	}
}
