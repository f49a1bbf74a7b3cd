package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/wire"
)

// rustInternalToken is the stack's NOETL_INTERNAL_API_TOKEN, the one token
// NoETL's Rust worker sends.
const rustInternalToken = "e2e-internal-token-0d1"

// rustWorkerYAML: a keychain credential (a bearer token) authenticates the
// first step's call setting a variable with the Rust worker's vars body
// ({name: value}); the next step reads it; big's result is over the worker's
// 100 KiB inline budget, so it is staged with PUT /api/result and reaches
// the server as a noetl:// reference, which use_big's templates read.
const rustWorkerYAML = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: rust_worker, path: e2e/rust_worker}
workload:
  noetl_api_url: ""
workflow:
  - step: start
    tool:
      kind: http
      method: POST
      url: "{{ noetl_api_url }}/api/vars/{{ execution_id }}"
      auth: noetl_api
      json: {counter: 41}
    next: read_var
  - step: read_var
    tool:
      kind: python
      input: {counter: "{{ vars.counter }}"}
      code: |
        result = {"next": int(counter) + 1}
    next: big
  - step: big
    tool:
      kind: python
      code: |
        result = {"rows": [{"i": i, "pad": "x" * 100} for i in range(2000)]}
    next: use_big
  - step: use_big
    tool:
      kind: python
      input: {count: "{{ big.rows | length }}", last: "{{ big.rows[1999].i }}", pad: "{{ big.rows[0].pad | length }}"}
      code: |
        result = {"count": int(count), "last": int(last), "pad": int(pad)}
`

// TestRustWorkerDouble (issue 20): through ` + "`noetl dev --workers 0`" + ` with tokens,
// a double of NoETL's Rust worker (rustworker_double_test.go, written from its
// source) holding only the internal token runs a playbook with a credential
// alias, a variable set by one step and read by the next, and a result
// staged by reference, to the right values; a tool that reports its own
// error and an alias the keychain lacks each fail their step; a step three
// leases long, kept alive only by the pool heartbeat, runs once.
func TestRustWorkerDouble(t *testing.T) {
	t.Parallel()
	d := startDev(t, devOptions{env: []string{fmt.Sprintf("NOETL_LEASE_SECONDS=%d", int(devLease/time.Second)),
		"NOETL_API_TOKEN=" + apiToken, "NOETL_WORKER_TOKEN=" + workerToken, "NOETL_INTERNAL_API_TOKEN=" + rustInternalToken}})
	d.cl = client.New(d.url, apiToken)
	ctx := context.Background()
	// The credential the first step names: the worker token, which the
	// worker itself does not hold.
	if _, err := d.cl.PutCredential(ctx, wire.CredentialRequest{Name: "noetl_api", Type: "bearer", Data: wire.Object{"token": workerToken},
		Description: "the API, for a step that calls it"}); err != nil {
		t.Fatal(err)
	}
	w := newRustWorker(d.url, natsConn(t, d), rustInternalToken)
	w.heartbeat = devLease / 4
	runDouble(t, "the Rust worker double", w.run, w.ready)
	workload := map[string]any{"noetl_api_url": d.url}

	t.Run("credential, variable, staged result", func(t *testing.T) {
		id, v := d.run(t, wire.ExecuteRequest{Path: d.register(t, rustWorkerYAML), Payload: workload})
		completed(t, v, "start", "read_var", "big", "use_big")
		if got := step(v, "start").Result.V; !conformance.Subset(map[string]any{"status_code": int64(200),
			"body": map[string]any{"var_names": []any{"counter"}, "variables_set": int64(1)}}, got) {
			t.Errorf("start (POST /api/vars with the keychain's token): %v", got)
		}
		if got := step(v, "read_var").Result.V; !conformance.Subset(map[string]any{"next": int64(42)}, got) {
			t.Errorf("read_var: %v, want next 42", got)
		}
		if got := step(v, "use_big").Result.V; !conformance.Subset(map[string]any{"count": int64(2000), "last": int64(1999), "pad": int64(100)}, got) {
			t.Errorf("use_big: %v, want count 2000, last 1999, pad 100", got)
		}
		if v.Context["counter"] != int64(41) {
			t.Errorf("the execution's context: %v, want counter 41", v.Context)
		}
		evs := d.events(t, id)
		if n := folded(evs, "ctx.updated"); n != 1 {
			t.Errorf("%d ctx.updated events, want 1 (the variable set)", n)
		}
		ref := ""
		for _, e := range evs {
			if e.EventType == "call.done" && string(e.NodeName) == "big" {
				r, _ := e.Result["reference"].(map[string]any)
				ref, _ = r["logical_uri"].(string)
			}
		}
		if want := fmt.Sprintf("noetl://execution/%d/result/big/", id); !strings.HasPrefix(ref, want) || !strings.HasSuffix(ref, "#/data") {
			t.Errorf("big's call.done carries reference %q, want %s…#/data", ref, want)
		}
		reads, err := d.cl.CredentialReads(ctx, "noetl_api", id, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(reads.Items) != 1 || reads.Items[0].Outcome != "served" || !reads.Items[0].IncludeData || reads.Items[0].Scope != "worker+internal" {
			t.Errorf("the keychain's read log for the execution: %+v, want one served read with data to the internal token (worker+internal)", reads.Items)
		}
		var puts, gets int
		for _, c := range w.made() {
			switch {
			case c.method == "PUT" && strings.HasPrefix(c.path, fmt.Sprintf("/api/result/%d", id)):
				puts++
				if c.status != 200 {
					t.Errorf("PUT %s: HTTP %d", c.path, c.status)
				}
			case c.method == "GET" && c.path == "/api/credentials/noetl_api":
				gets++
			}
		}
		if puts != 1 || gets != 1 {
			t.Errorf("%d staged results and %d credential fetches, want 1 and 1", puts, gets)
		}
	})

	t.Run("a tool that reports its own error fails its step", func(t *testing.T) {
		id, v := d.run(t, wire.ExecuteRequest{Path: d.register(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: rust_own_error, path: e2e/rust_own_error}
workflow:
  - step: start
    tool: {kind: python, code: "raise ValueError('the tool says no')"}
`)})
		if v.Status != "FAILED" || step(v, "start").Status != "failed" || !strings.Contains(string(v.Error), "the tool says no") {
			t.Fatalf("status %v, start %v, error %q: want FAILED naming the tool's error", v.Status, step(v, "start").Status, v.Error)
		}
		// The worker sent call.done and command.completed with status error,
		// no call.error.
		evs := d.events(t, id)
		if folded(evs, "call.done") != 1 || folded(evs, "call.error") != 0 {
			t.Errorf("events %v", types(evs))
		}
	})

	t.Run("an alias the keychain lacks fails its step", func(t *testing.T) {
		id, v := d.run(t, wire.ExecuteRequest{Path: d.register(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: rust_no_alias, path: e2e/rust_no_alias}
workload: {noetl_api_url: ""}
workflow:
  - step: start
    tool: {kind: http, url: "{{ noetl_api_url }}/api/health", auth: no_such_alias}
`), Payload: workload})
		if v.Status != "FAILED" || !strings.Contains(string(v.Error), "no_such_alias") {
			t.Fatalf("status %v error %q: want FAILED naming the alias", v.Status, v.Error)
		}
		if evs := d.events(t, id); folded(evs, "call.error") != 1 || folded(evs, "call.done") != 0 {
			t.Errorf("events %v", types(evs))
		}
	})

	t.Run("a step three leases long, kept by the pool heartbeat", func(t *testing.T) {
		id, v := d.run(t, wire.ExecuteRequest{Path: d.register(t, fmt.Sprintf(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: rust_long, path: e2e/rust_long}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        import time
        time.sleep(%d)
        result = {"slept": True}
`, int(3*devLease/time.Second)))})
		completed(t, v, "start")
		evs := d.events(t, id)
		if folded(evs, "command.issued") != 1 || folded(evs, "command.claimed") != 1 || folded(evs, "call.done") != 1 {
			t.Errorf("want the step issued, claimed and done once: %v", types(evs))
		}
	})

	// Every call was answered as the worker needs: its registration and beats
	// 200, no event refused, nothing refused for its token.
	beats, counts := 0, map[string]int{}
	for _, c := range w.made() {
		key := c.method + " " + c.path
		if c.event != "" {
			key += " " + c.event
		}
		for _, p := range strings.Split(c.path, "/") {
			if p != "" && strings.Trim(p, "0123456789") == "" {
				key = strings.Replace(key, p, "{id}", 1)
			}
		}
		counts[fmt.Sprintf("%s → %d", key, c.status)]++
		switch {
		case c.status == 401 || c.status == 403:
			t.Errorf("%s %s refused the internal token: HTTP %d", c.method, c.path, c.status)
		case c.path == "/api/events" && c.status/100 != 2:
			t.Errorf("%s refused: HTTP %d", c.event, c.status)
		case c.path == "/api/worker/pool/heartbeat":
			beats++
			if c.status != 200 {
				t.Errorf("pool heartbeat: HTTP %d", c.status)
			}
		}
	}
	if beats == 0 {
		t.Error("no pool heartbeat was sent")
	}
	t.Logf("the Rust worker double's requests (with the internal token): %v", counts)
}
