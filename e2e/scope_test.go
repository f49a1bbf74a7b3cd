package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/wire"
)

// TestCredentialScopeFailsTheStep is issue 33's finding 3 through the
// stack noetl dev runs and our worker: an http step with auth: <alias> sent
// the Bearer token to a URL of its author's choosing, and a postgres step's
// host: sent the password to another server. With the credentials scoped,
// a playbook outside the scope, an unlisted host and a postgres host
// override each fail their step with an error naming the rule, and the
// other server sees nothing; inside the scope the step runs.
func TestCredentialScopeFailsTheStep(t *testing.T) {
	ctx := context.Background()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok": true}`)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	ln, dials := devstacktest.CountingListener(t) // stands for another Postgres
	_, pgPort, _ := net.SplitHostPort(ln.Addr().String())

	put := func(r wire.CredentialRequest) {
		t.Helper()
		if _, err := shared.cl.PutCredential(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	put(wire.CredentialRequest{Name: "scoped_api", Type: "bearer", Data: wire.Object{"token": "scoped-api-secret-1"},
		Scope: &wire.CredentialScope{Playbooks: []string{"scope/allowed/**"}, Hosts: []string{"127.0.0.1:" + port}}})
	put(wire.CredentialRequest{Name: "scoped_far", Type: "bearer", Data: wire.Object{"token": "scoped-far-secret-2"},
		Scope: &wire.CredentialScope{Hosts: []string{"api.github.com"}}})
	pgPortN, _ := strconv.Atoi(pgPort)
	put(wire.CredentialRequest{Name: "scoped_pg", Type: "postgres", Data: wire.Object{"db_host": "db.internal", "db_port": pgPortN,
		"db_user": "etl", "db_password": "scoped-pg-secret-3", "db_name": "w"}})

	pool := "scope"
	shared.startWorkers(t, pool, 1)
	playbook := func(path, tool string) string {
		pb := "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: scope, path: " + path + "}\nworkflow:\n  - step: start\n    tool: " + tool + "\n"
		if _, err := shared.cl.Register(ctx, pb); err != nil {
			t.Fatalf("register %s: %v", path, err)
		}
		return path
	}
	run := func(path string) wire.Step {
		t.Helper()
		_, view := shared.run(t, wire.ExecuteRequest{Path: path, Pool: pool})
		return step(view, "start")
	}
	httpTool := func(alias string) string {
		return fmt.Sprintf("{kind: http, url: '%s/x', auth: %s}", srv.URL, alias)
	}
	for _, c := range []struct{ path, tool, want string }{
		{"scope/outside/exfil", httpTool("scoped_api"), `credential "scoped_api": may be used only by playbooks scope/allowed/** (its scope.playbooks); this execution runs "scope/outside/exfil"`},
		{"scope/allowed/far", httpTool("scoped_far"), `may be sent only to api.github.com (its scope.hosts)`},
		{"scope/allowed/pg", "{kind: postgres, auth: scoped_pg, host: 127.0.0.1, query: 'SELECT 1'}", `is for host db.internal; this step sends it to 127.0.0.1`},
	} {
		st := run(playbook(c.path, c.tool))
		if !strings.EqualFold(st.Status, "FAILED") || !strings.Contains(fmt.Sprint(st.Error), c.want) {
			t.Errorf("%s: step %s, error %v; want FAILED naming %q", c.path, st.Status, st.Error, c.want)
		}
	}
	if hits.Load() != 0 || dials.Load() != 0 {
		t.Fatalf("refused steps reached the other side: %d http requests, %d postgres dials", hits.Load(), dials.Load())
	}
	if st := run(playbook("scope/allowed/ok", httpTool("scoped_api"))); !strings.EqualFold(st.Status, "COMPLETED") || hits.Load() != 1 {
		t.Fatalf("the allowed step: %s (%v), %d requests", st.Status, st.Error, hits.Load())
	}
}
