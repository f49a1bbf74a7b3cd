package worker

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/toolresult"
	"github.com/noetl-go/noetl/shared/wire"
)

// beatGatedStore stores a result only once the server has seen a heartbeat
// of the command: an upload that outlasts what was left of the lease.
type beatGatedStore struct {
	resultstore.Store
	beat <-chan struct{}
}

func (s beatGatedStore) Put(ctx context.Context, name string, _ []byte) (string, error) {
	select {
	case <-s.beat:
		return "test://results/" + name, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// TestLeaseKeptWhileTheResultIsStored: a result over the inline limit is
// stored by reference while the command's lease is still kept alive, and is
// then reported by reference. The beats used to stop when the tool returned,
// so a 60 MB result uploaded under load outlasted its lease and the report
// was refused (TestSixtyMBResult's expiries); here the store finishes only
// after a beat, which would never come.
func TestLeaseKeptWhileTheResultIsStored(t *testing.T) {
	beat := make(chan struct{})
	var once sync.Once
	var (
		mu      sync.Mutex
		reports []string
	)
	srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/heartbeat"):
			once.Do(func() { close(beat) })
			_, _ = io.WriteString(w, `{"lease_expires_at": "`+time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)+`"}`)
		case r.URL.Path == "/api/worker/report":
			mu.Lock()
			reports = append(reports, string(raw))
			mu.Unlock()
			_, _ = io.WriteString(w, `{"status": "ok", "claims": [], "commands": [], "events": [{"status": 200, "event_id": "1"}]}`)
		default:
			http.NotFound(w, r)
		}
	})
	w := testWorker(t, srv, 1)
	w.cfg.InlineLimit = 16
	w.cfg.Results = beatGatedStore{beat: beat}
	w.cfg.Exec = func(context.Context, pipeline.Item) toolresult.Envelope {
		return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: strings.Repeat("x", 1000)}
	}
	// A hang guard, not a timing: without beats the store waits for it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w.slots.acquire(ctx, 1)
	r := newReporter(w, ctx)
	cmd := &wire.Command{ExecutionID: 1024, EventID: 77, CommandID: "1024:s:77", NodeName: "s", Action: "python", Attempt: 1,
		Context:        map[string]any{"tool_config": map[string]any{"code": "result = 1"}},
		LeaseExpiresAt: wire.At(time.Now().Add(900 * time.Millisecond))}
	w.execute(ctx, r, cmd)
	r.close()
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the result was never stored: no heartbeat kept the lease while it uploaded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || !strings.Contains(reports[0], `"result_uri":"test://results/1024/1024:s:77/attempt-1.json"`) {
		t.Fatalf("reports %q, want one carrying the result by reference", reports)
	}
}
