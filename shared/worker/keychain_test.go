package worker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/tools"
)

// TestKeychainLookupPresentsTheClaim: our worker reads a credential's data
// under the claim its step runs under (command, holder, attempt), which the
// keychain checks (docs/security.md, "Secret reads need a live claim"), and
// keeps the hosts its scope allows for the tools.
func TestKeychainLookupPresentsTheClaim(t *testing.T) {
	var got url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Query()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id": "1", "name": "gh", "type": "bearer", "tags": [], "key_id": "k", "created_at": null, "updated_at": null,
			"data": {"token": "t0k3n-secret"}, "scope": {"hosts": ["api.github.com"]}}`))
	}))
	t.Cleanup(srv.Close)
	k := keychainCredentials{cl: client.New(srv.URL, "worker-token"), workerID: "w-7"}
	ctx := tools.WithCall(context.Background(), tools.Call{ExecutionID: "1024", Step: "start", CommandID: "1024:start:4097", Attempt: 2})
	cred, err := k.Lookup(ctx, "gh")
	if err != nil {
		t.Fatal(err)
	}
	want := url.Values{"include_data": {"true"}, "execution_id": {"1024"}, "command_id": {"1024:start:4097"}, "worker_id": {"w-7"}, "attempt": {"2"}}
	if got.Encode() != want.Encode() {
		t.Fatalf("the keychain was asked %s, want %s", got.Encode(), want.Encode())
	}
	if cred.Extra["token"] != "t0k3n-secret" || len(cred.AllowedHosts) != 1 || cred.AllowedHosts[0] != "api.github.com" {
		t.Fatalf("credential %+v", cred)
	}
}
