package tools

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// TestCredentialHostScope is issue 33's finding 3, its worker half: an http
// step with auth: <alias> and a URL of one's own received the Bearer token,
// and a postgres step's host: sent the credential's password to that host.
// Now a credential whose scope lists hosts is sent to those only, and a
// postgres step cannot move a credential off its own host unless its scope
// lists the new one: the step fails naming the rule, and nothing reaches
// the other host.
func TestCredentialHostScope(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"auth": "` + r.Header.Get("Authorization") + `"}`))
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	// A listener standing in for a foreign Postgres.
	ln, dials := devstacktest.CountingListener(t)
	_, pgPort, _ := net.SplitHostPort(ln.Addr().String())
	pgp, _ := strconv.Atoi(pgPort)

	r := New(Options{Credentials: CredentialMap{
		"gh":         {Kind: "bearer", Extra: map[string]any{"token": "gh-secret-token"}, AllowedHosts: []string{"api.github.com"}},
		"gh_local":   {Kind: "bearer", Extra: map[string]any{"token": "gh-secret-token"}, AllowedHosts: []string{"127.0.0.1:" + port}},
		"open":       {Kind: "bearer", Extra: map[string]any{"token": "open-secret-token"}},
		"pg":         {Kind: "postgres", Host: "db.internal", Port: pgp, User: "etl", Password: "pg-secret-password", Database: "w"},
		"pg_movable": {Kind: "postgres", Host: "db.internal", Port: pgp, User: "etl", Password: "pg-secret-password", Database: "w", AllowedHosts: []string{"127.0.0.1"}},
	}})

	// http: the URL's host must be one the credential lists.
	env := execTool(t, r, httpCfg(srv.URL+"/echo", "auth", "gh"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, `credential "gh" may be sent only to api.github.com (its scope.hosts)`)
	if hits.Load() != 0 {
		t.Fatalf("the refused step reached the server %d times", hits.Load())
	}
	mustSucceed(t, execTool(t, r, httpCfg(srv.URL+"/echo", "auth", "gh_local"), nil))
	mustSucceed(t, execTool(t, r, httpCfg(srv.URL+"/echo", "auth", "open"), nil)) // no scope: anywhere (NoETL's design)
	if hits.Load() != 2 {
		t.Fatalf("the allowed steps reached the server %d times, want 2", hits.Load())
	}

	// postgres: host: moves the password to another server.
	pg := func(alias string) toolresult.Envelope {
		return execTool(t, r, map[string]any{"kind": "postgres", "auth": alias, "host": "127.0.0.1", "query": "SELECT 1"}, nil)
	}
	mustFail(t, pg("pg"), toolresult.StatusError, toolresult.KindTool, `credential "pg" is for host db.internal; this step sends it to 127.0.0.1, which its scope.hosts does not list`)
	if dials.Load() != 0 {
		t.Fatalf("the refused step dialled the other host %d times", dials.Load())
	}
	// Allowed by the scope: it dials (and fails there: the listener is no Postgres).
	mustFail(t, pg("pg_movable"), toolresult.StatusError, toolresult.KindConnection, "127.0.0.1:"+pgPort)
	if dials.Load() == 0 {
		t.Fatal("the allowed override never dialled")
	}
}

// TestNATSServerWithoutSchemeIsScoped: a NATS server written without a
// scheme ("host:port", which the client dials as nats://) was passed over by
// the host check, so a step's url: sent a credential whose scope lists other
// hosts to any server (the security review of 2026-11-29, finding 4). Now
// every server is checked as the client reads it, and one with no host is
// refused.
func TestNATSServerWithoutSchemeIsScoped(t *testing.T) {
	t.Parallel()
	ln, dials := devstacktest.CountingListener(t)
	r := New(Options{Credentials: CredentialMap{
		"natscred": {Kind: "nats", User: "svc", Password: "nats-secret-pw", AllowedHosts: []string{"nats.internal"}},
	}})
	for _, url := range []string{ln.Addr().String(), "nats://" + ln.Addr().String(), "nats.internal:4222," + ln.Addr().String()} {
		env := execTool(t, r, map[string]any{"kind": "nats", "auth": "natscred", "url": url, "operation": "kv_get", "bucket": "b", "key": "k"}, nil)
		mustFail(t, env, toolresult.StatusError, toolresult.KindTool, `credential "natscred" may be sent only to nats.internal (its scope.hosts)`)
	}
	env := execTool(t, r, map[string]any{"kind": "nats", "auth": "natscred", "url": "nats://:4222", "operation": "kv_get", "bucket": "b", "key": "k"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, `NATS server "nats://:4222": it names no host`)
	if n := dials.Load(); n != 0 {
		t.Fatalf("refused steps reached the server %d times", n)
	}
}
