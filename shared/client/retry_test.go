package client

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/wire"
)

// TestRetryAfterHonoured (issue 23): a read answered 503 with Retry-After
// (the server's database is failing over) is asked again after at least that
// long, beyond the five retries of other failures, while Patience lasts;
// a request that must not be sent twice is not; a report is sent once (the
// worker's reporter retries it, with one backoff for all its reports).
func TestRetryAfterHonoured(t *testing.T) {
	var requests atomic.Int32
	const unavailableFor = 8 // answers, more than Retries
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if n <= unavailableFor {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, `{"error": "the database is unavailable for now", "status": 503}`)
			return
		}
		_, _ = io.WriteString(w, `{"execution_id": "1024", "status": "RUNNING"}`)
	}))
	defer srv.Close()
	c := New(srv.URL, "")
	var waits []time.Duration
	c.sleep = func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }

	if _, err := c.Status(context.Background(), 1024); err != nil {
		t.Fatalf("a read during a failover: %v", err)
	}
	if n := requests.Load(); n != unavailableFor+1 || len(waits) != unavailableFor {
		t.Fatalf("%d requests, %d waits; want %d and %d", n, len(waits), unavailableFor+1, unavailableFor)
	}
	for i, d := range waits {
		if d < 3*time.Second {
			t.Errorf("wait %d was %s; the server asked for 3 s", i, d)
		}
	}

	// Not idempotent (no idempotency key): one request, the 503 returned.
	requests.Store(0)
	_, err := c.Execute(context.Background(), wire.ExecuteRequest{Path: "p"})
	if StatusOf(err) != http.StatusServiceUnavailable || RetryAfterOf(err) != 3*time.Second || requests.Load() != 1 {
		t.Errorf("execute without a key: %v (Retry-After %s) after %d requests; want the 503 after one", err, RetryAfterOf(err), requests.Load())
	}
	requests.Store(0)
	if _, err := c.Report(context.Background(), wire.Report{WorkerID: "w"}); !Unavailable(err) || requests.Load() != 1 {
		t.Errorf("report: %v after %d requests; want one request and an unavailable server", err, requests.Load())
	}

	// Past Patience the 503 is the answer: with 5 s of it and Retry-After
	// 3 s, one wait, then the answer.
	requests.Store(0)
	c.Patience = 5 * time.Second
	clock := time.Now()
	c.now = func() time.Time { return clock }
	c.sleep = func(_ context.Context, d time.Duration) error { clock = clock.Add(d); return nil }
	if _, err := c.Status(context.Background(), 1024); StatusOf(err) != http.StatusServiceUnavailable || requests.Load() != 2 {
		t.Errorf("with 5 s of patience: %v after %d requests; want the 503 after two", err, requests.Load())
	}
}
