package tools

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// TestHTTPRedirectDropsCredentialHeaders (issue 33, finding 5): a redirect
// to another host carries no credential header — an api_key credential's
// X-API-Key, an http credential's own headers, a bearer token, a step header
// under a secret name — also when a later redirect comes back; a redirect on
// the same host keeps them, and headers that are no secret travel on.
func TestHTTPRedirectDropsCredentialHeaders(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	seen := map[string]http.Header{} // "<server> <path>" → the headers it got
	record := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen[name+" "+r.URL.Path] = r.Header.Clone()
			mu.Unlock()
			if to := r.URL.Query().Get("to"); to != "" {
				http.Redirect(w, r, to, http.StatusFound)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": true})
		}
	}
	other := httptest.NewServer(record("other"))
	defer other.Close()
	origin := httptest.NewServer(record("origin"))
	defer origin.Close()

	apiKey, err := CredentialFromNoETL("api_key", map[string]any{"api_key": "k-api-key-123456"})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Options{Credentials: CredentialMap{
		"api_key": apiKey,
		"custom":  {Kind: "http", Extra: map[string]any{"headers": map[string]any{"X-Custom-Auth": "c-custom-123456"}}},
		"bearer":  {Kind: "bearer", Extra: map[string]any{"token": "t-bearer-123456"}},
	}})
	secrets := []string{"k-api-key-123456", "c-custom-123456", "t-bearer-123456", "s-step-123456"}
	for _, alias := range []string{"api_key", "custom", "bearer"} {
		mu.Lock()
		clear(seen)
		mu.Unlock()
		// origin → origin (same host) → other (another host) → origin again.
		back := origin.URL + "/back"
		away := other.URL + "/away?to=" + back
		env := execTool(t, r, httpCfg(origin.URL+"/start?to="+origin.URL+"/same?to="+away, "auth", alias,
			"headers", map[string]any{"X-Step-Token": "s-step-123456", "X-Trace": "trace-1"}), nil)
		mustSucceed(t, env)
		mu.Lock()
		for hop, h := range seen {
			var got []string
			for _, s := range secrets {
				for _, vs := range h {
					for _, v := range vs {
						if strings.Contains(v, s) {
							got = append(got, s)
						}
					}
				}
			}
			if h.Get("X-Trace") != "trace-1" {
				t.Errorf("%s: %s lost the step's X-Trace header", alias, hop)
			}
			switch hop {
			case "origin /start", "origin /same":
				if len(got) != 2 { // the credential's and the step's secret header
					t.Errorf("%s: %s (the first host) got %v, want the credential's and the step's secret headers", alias, hop, got)
				}
			default:
				if len(got) != 0 {
					t.Errorf("%s: %s (after a redirect to another host) got credential headers %v", alias, hop, got)
				}
			}
		}
		if len(seen) != 4 {
			t.Errorf("%s: hops %v, want 4", alias, seen)
		}
		mu.Unlock()
	}
}

// TestLinkLocalGuard (issue 33, finding 11): the http, transfer and
// script-source tools refuse link-local and cloud metadata addresses by
// default, as a URL, a redirect target or an address a name dials, with an
// error naming the address and the setting; NOETL_ALLOW_LINK_LOCAL lets
// them through.
func TestLinkLocalGuard(t *testing.T) {
	t.Parallel()
	to := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	}))
	defer to.Close()
	r := New(Options{})
	for _, url := range []string{
		"http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"http://169.254.170.2/v2/credentials",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://[::ffff:169.254.169.254]/",
		"http://[fe80::1%25eth0]/",
		"http://metadata.google.internal/computeMetadata/v1/",
		"http://METADATA.google.internal./computeMetadata/v1/",
		"http://100.100.100.200/latest/meta-data/",
		to.URL + "/?to=http://169.254.169.254/latest/meta-data/",
	} {
		env := execTool(t, r, httpCfg(url), nil)
		mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "link-local or cloud metadata address")
		if !strings.Contains(env.Error.Message, "NOETL_ALLOW_LINK_LOCAL=true") {
			t.Errorf("%s: %q does not name the setting", url, env.Error.Message)
		}
	}
	env := execTool(t, r, map[string]any{"kind": "transfer", "source": map[string]any{"type": "http", "url": "http://169.254.169.254/latest/"},
		"target": map[string]any{"type": "postgres", "connection": devstacktest.Postgres(t, 0).ClusterDSN, "table": "t"}}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "169.254.169.254 is a link-local or cloud metadata address")
	env = execTool(t, r, map[string]any{"kind": "python", "script": map[string]any{"uri": "http://metadata.google.internal/x.py"}}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "metadata.google.internal is a link-local or cloud metadata address")

	// The dialer refuses what a name resolves to.
	for _, addr := range []string{"169.254.169.254:80", "[fd00:ec2::254]:80", "[fe80::1%eth0]:80"} {
		if err := guardDial("tcp", addr, nil); err == nil {
			t.Errorf("guardDial(%s) let it through", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:80", "10.0.0.1:443", "[::1]:80", "8.8.8.8:53"} {
		if err := guardDial("tcp", addr, nil); err != nil {
			t.Errorf("guardDial(%s): %v", addr, err)
		}
	}

	// Allowed, the request goes out (here nothing answers: the step fails
	// for another reason than the guard).
	open := New(Options{AllowLinkLocal: true})
	env = execTool(t, open, httpCfg("http://169.254.169.254/latest/meta-data/", "timeout", 0.3), nil)
	if env.Status == toolresult.StatusSuccess || env.Error == nil || strings.Contains(env.Error.Message, "link-local") {
		t.Fatalf("allowed: %+v", env.Error)
	}
}
