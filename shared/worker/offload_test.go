package worker

import (
	"context"
	"errors"
	"fmt"
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

// reportTaken answers a report of one event: taken.
const reportTaken = `{"status": "ok", "claims": [], "commands": [], "events": [{"status": 200, "event_id": "1"}]}`

// beatingServer answers heartbeats, extending the lease by a minute, and
// closes beat at the first; a report is answered by report, given its body.
func beatingServer(report func(body []byte) string) (beat <-chan struct{}, h http.Handler) {
	beats := make(chan struct{})
	var once sync.Once
	return beats, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/heartbeat"):
			once.Do(func() { close(beats) })
			_, _ = io.WriteString(w, `{"lease_expires_at": "`+time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)+`"}`)
		case r.URL.Path == "/api/worker/report":
			_, _ = io.WriteString(w, report(raw))
		default:
			http.NotFound(w, r)
		}
	})
}

// runWithShortLease runs and reports one command whose lease has 900 ms
// left (its first beat is due a third of that later), then stops reporting.
func runWithShortLease(ctx context.Context, w *Worker, eventID int64) {
	w.slots.acquire(ctx, 1)
	r := newReporter(w, ctx)
	cmd := &wire.Command{ExecutionID: 1024, EventID: wire.NumID(eventID), CommandID: fmt.Sprintf("1024:s:%d", eventID), NodeName: "s", Action: "python", Attempt: 1,
		Context:        map[string]any{"tool_config": map[string]any{"code": "result = 1"}},
		LeaseExpiresAt: wire.At(time.Now().Add(900 * time.Millisecond))}
	w.execute(ctx, r, cmd)
	r.close()
}

// TestLeaseKeptWhileTheResultIsStored: a result over the inline limit is
// stored by reference while the command's lease is still kept alive, and is
// then reported by reference. The beats used to stop when the tool returned,
// so a 60 MB result uploaded under load outlasted its lease and the report
// was refused (TestSixtyMBResult's expiries); here the store finishes only
// after a beat, which would never come.
func TestLeaseKeptWhileTheResultIsStored(t *testing.T) {
	var (
		mu      sync.Mutex
		reports []string
	)
	beat, srv := beatingServer(func(raw []byte) string {
		mu.Lock()
		reports = append(reports, string(raw))
		mu.Unlock()
		return reportTaken
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
	runWithShortLease(ctx, w, 77)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("the result was never stored: no heartbeat kept the lease while it uploaded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reports) != 1 || !strings.Contains(reports[0], `"result_uri":"test://results/1024/1024:s:77/attempt-1.json"`) {
		t.Fatalf("reports %q, want one carrying the result by reference", reports)
	}
}

// TestLeaseKeptUntilTheReportIsTaken: the lease is kept until the server has
// taken the result, not only while the tool runs. The report is answered
// only once the server has seen a heartbeat of the command: a report waiting
// behind others or a slow answer. The beats used to stop before the report,
// so a 3 s lease under load ran out and the report was refused
// (TestSixtyMBResult's "the lease is gone").
func TestLeaseKeptUntilTheReportIsTaken(t *testing.T) {
	var (
		mu      sync.Mutex
		answers []string
		beat    <-chan struct{}
	)
	beat, srv := beatingServer(func([]byte) string {
		answer := reportTaken
		select {
		case <-beat:
		case <-time.After(10 * time.Second): // a hang guard, not a timing: the lease is long gone
			answer = `{"status": "ok", "claims": [], "commands": [], "events": [{"status": 409, "error": "no heartbeat"}]}`
		}
		mu.Lock()
		answers = append(answers, answer)
		mu.Unlock()
		return answer
	})
	w := testWorker(t, srv, 1)
	w.cfg.Exec = func(context.Context, pipeline.Item) toolresult.Envelope {
		return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: "done"}
	}
	w.cfg.InlineLimit = 1 << 20 // reported inline: no upload keeps the beats going
	ctx := context.Background()
	runWithShortLease(ctx, w, 78)
	mu.Lock()
	defer mu.Unlock()
	if len(answers) != 1 || strings.Contains(answers[0], "no heartbeat") {
		t.Fatalf("report answers %q: no heartbeat kept the lease while the result waited to be taken", answers)
	}
}
