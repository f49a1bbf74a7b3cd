package worker

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/wire"
)

// TestServerResults: a worker without a store of its own stages a large
// result with the server. An unavailable server (503 with Retry-After) is
// waited out as one outage, said once at its start and once at its end; a
// server that refuses (501: it has no result store; 413) fails the put at
// once, after one request, naming the fix; a result over the route's limit
// is never sent.
func TestServerResults(t *testing.T) {
	var mu sync.Mutex
	var answers []int // what the next PUTs are answered, then 200
	requests := 0
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		requests++
		if r.Method != http.MethodPut || r.URL.Path != "/api/result/12" {
			t.Errorf("%s %s, want PUT /api/result/12", r.Method, r.URL.Path)
		}
		status := http.StatusOK
		if len(answers) > 0 {
			status, answers = answers[0], answers[1:]
		}
		w.Header().Set("Content-Type", "application/json")
		switch status {
		case http.StatusOK:
			_, _ = w.Write([]byte(`{"ref": "noetl://execution/12/result/x/00112233aabb", "store": "file", "scope": "execution", "expires_at": null, "bytes": 9, "sha256": ""}`))
		case http.StatusServiceUnavailable:
			w.Header().Set("Retry-After", "0.01")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error": "the database is unavailable for now", "status": 503}`))
		default:
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error": "this server has no result store: set NOETL_RESULT_STORE", "status": 501}`))
		}
	}))
	defer hs.Close()
	var logs bytes.Buffer
	var logMu sync.Mutex
	log := slog.New(slog.NewJSONHandler(lockedWriter{&logs, &logMu}, nil))
	st := ServerResults(client.New(hs.URL, "")).(*serverResults)
	st.server = newOutage(log, "the server")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	defer cancel()
	put := func(data []byte, answer ...int) (string, int, error) {
		mu.Lock()
		answers, requests = answer, 0
		mu.Unlock()
		ref, err := st.Put(ctx, "12/12:s:7/attempt-1.json", data)
		mu.Lock()
		defer mu.Unlock()
		return ref, requests, err
	}

	ref, n, err := put([]byte(`{"a": 1}`), 503, 503, 503)
	if err != nil || ref != "noetl://execution/12/result/x/00112233aabb" || n != 4 {
		t.Fatalf("through an outage: %q %v after %d requests, want the reference after 4", ref, err, n)
	}
	logMu.Lock()
	if out := logs.String(); strings.Count(out, "the server is unavailable") != 1 || strings.Count(out, "the server is available again") != 1 {
		t.Errorf("the outage was said:\n%s\nwant once at its start and once at its end", out)
	}
	logMu.Unlock()

	for _, status := range []int{http.StatusNotImplemented, http.StatusRequestEntityTooLarge} {
		_, n, err = put([]byte(`{"a": 1}`), status)
		if err == nil || n != 1 || !strings.Contains(err.Error(), "--result-store") {
			t.Fatalf("answered %d: %v after %d requests, want an error naming --result-store after 1", status, err, n)
		}
	}
	if _, _, err = put([]byte(`{"a": 1}`), http.StatusNotImplemented); !strings.Contains(err.Error(), "NOETL_RESULT_STORE") {
		t.Errorf("answered 501: %v, want the server's message", err)
	}

	// Only noetl:// references are read through the server: a step's own
	// execution's, which resultstore.Resolve checks first.
	mu.Lock()
	requests = 0
	mu.Unlock()
	for _, uri := range []string{"file:///results/13/x.json", "noetl://execution/13/result/x/00112233aabb"} {
		if _, err := resultstore.ReadJSON(ctx, st, uri, 12); err == nil || !strings.Contains(err.Error(), uri) {
			t.Errorf("read %s for execution 12: %v, want it refused naming it", uri, err)
		}
	}
	mu.Lock()
	if requests != 0 {
		t.Errorf("%d requests for references refused", requests)
	}
	mu.Unlock()

	big := append(append([]byte(`"`), bytes.Repeat([]byte("x"), wire.MaxStagedResultBytes)...), '"')
	_, n, err = put(big)
	if n != 0 || err == nil || !strings.Contains(err.Error(), "at most 5242880 bytes (5 MiB, wire.MaxStagedResultBytes)") || !strings.Contains(err.Error(), "--result-store") {
		t.Fatalf("a result over the limit: %v after %d requests, want an error naming the limit and --result-store, nothing sent", err, n)
	}
}
