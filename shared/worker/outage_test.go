package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// outageServer answers reports 503 while it is "down": the first four once
// all four are in flight (reports sent before anyone knew), then `probes`
// more; after that it takes every event. It notes how many requests were in
// flight at once after the first four.
type outageServer struct {
	probes  int
	arrived chan struct{}

	mu        sync.Mutex
	requests  int
	inFlight  int
	maxLater  int // most requests in flight at once after the first four
	taken     []int
	allFourIn chan struct{}
}

func (s *outageServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Events []json.RawMessage `json:"events"`
	}
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.requests++
	n := s.requests
	s.inFlight++
	if n > 4 {
		s.maxLater = max(s.maxLater, s.inFlight)
	}
	if n == 4 {
		close(s.allFourIn)
	}
	s.mu.Unlock()
	defer func() { s.mu.Lock(); s.inFlight--; s.mu.Unlock() }()
	s.arrived <- struct{}{}
	w.Header().Set("Content-Type", "application/json")
	if n <= 4 {
		<-s.allFourIn
	}
	if n <= 4+s.probes {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error": "the database is unavailable for now", "status": 503}`)
		return
	}
	s.mu.Lock()
	s.taken = append(s.taken, len(body.Events))
	s.mu.Unlock()
	_, _ = io.WriteString(w, `{"status": "ok", "claims": [], "commands": [], "events": [`+
		strings.TrimSuffix(strings.Repeat(`{"status": 200, "event_id": "1"},`, len(body.Events)), ",")+`]}`)
}

// TestOneOutageOneBackoff (issue 23): four reports in flight when the
// server becomes unavailable move the worker's backoff once, not four
// times, and from then on one request at a time probes the server; the
// finished results are kept, all of them, until the server takes them, and
// the worker says so in two lines. Before, each report in flight retried on
// its own, five times in about a second, and then dropped its result.
func TestOneOutageOneBackoff(t *testing.T) {
	const probes = 3
	srv := &outageServer{probes: probes, arrived: make(chan struct{}, 16), allFourIn: make(chan struct{})}
	w := testWorker(t, srv, 4)
	var logs bytes.Buffer
	var logMu sync.Mutex
	w.log = slog.New(slog.NewJSONHandler(lockedWriter{&logs, &logMu}, nil))
	w.watchDependencies()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a timing
	defer cancel()
	w.slots.acquire(ctx, 4)
	r := newReporter(w, ctx)
	for i := range 4 {
		r.add(stepEnd(int64(i+1), "done"))
		select {
		case <-srv.arrived: // in flight: the next completion goes in a report of its own
		case <-ctx.Done():
			t.Fatal("a report never arrived")
		}
	}
	go func() {
		for range srv.arrived {
		}
	}()
	r.close()
	close(srv.arrived)
	if ctx.Err() != nil {
		t.Fatal("the reports never settled")
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.requests != 4+probes+1 {
		t.Errorf("%d requests; want the four in flight, %d probes, and the one that was taken", srv.requests, probes)
	}
	if srv.maxLater != 1 {
		t.Errorf("%d requests in flight at once during the outage; want one probe at a time", srv.maxLater)
	}
	if len(srv.taken) != 1 || srv.taken[0] != 4 {
		t.Errorf("the server took reports of %v events; want all four results in one", srv.taken)
	}
	if free := w.slots.grab(); free != 4 {
		t.Errorf("%d of 4 slots free after the reports", free)
	}
	logMu.Lock()
	defer logMu.Unlock()
	out := logs.String()
	if strings.Count(out, "the server is unavailable") != 1 || strings.Count(out, "the server is available again") != 1 ||
		strings.Count(out, "\n") != 2 {
		t.Errorf("the worker's log of the outage:\n%s\nwant two lines: its start and its end", out)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// shutdownServer hands the worker one command with its claim, then answers
// every report 503: the command's result cannot be reported.
type shutdownServer struct {
	mu      sync.Mutex
	reports int
	held    chan struct{} // closed at the first report that carried the result
}

func (s *shutdownServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/worker/pool/") {
		// the worker registry is not what this test is about
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status": "ok"}`)
		return
	}
	var body struct {
		Events []json.RawMessage `json:"events"`
		Claims []json.RawMessage `json:"claims"`
	}
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.reports++
	first := s.reports == 1
	if len(body.Events) > 0 && s.held != nil {
		close(s.held)
		s.held = nil
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !first {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"error": "the database is unavailable for now", "status": 503}`)
		return
	}
	lease := time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)
	_, _ = io.WriteString(w, `{"status": "ok", "events": [], "claims": [{"status": 200, "event_id": "4097"}], "commands": [`+
		`{"status": "ok", "event_id": 4097, "execution_id": 1024, "node_id": "start", "node_name": "start", "action": "noop",`+
		` "context": {"tool_config": {}}, "meta": {}, "command_id": "1024:start:4097", "attempt": 1, "lease_expires_at": "`+lease+`"}]}`)
}

// TestShutdownSaysWhatItDrops (issue 23): a worker stopped while the server
// is unavailable keeps trying to report what it holds for its grace period,
// then says in one line which results it drops (their commands run again
// once their leases expire).
func TestShutdownSaysWhatItDrops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard
	defer cancel()
	n := devstacktest.NATS(t)
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notify.EnsureStream(ctx, js, notify.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := &shutdownServer{held: make(chan struct{})}
	held := srv.held
	hs := httptest.NewServer(srv)
	defer hs.Close()
	var logs bytes.Buffer
	var logMu sync.Mutex
	w, err := New(Config{Client: client.New(hs.URL, ""), JS: js, Pool: "shutdown", WorkerID: "w1", Concurrency: 1, Grace: 500 * time.Millisecond,
		Exec: func(context.Context, pipeline.Item) toolresult.Envelope {
			return toolresult.Envelope{Status: toolresult.StatusSuccess}
		},
		Logger: slog.New(slog.NewJSONHandler(lockedWriter{&logs, &logMu}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(runCtx) }()
	body := jsonx.MustMarshal(notify.Body{ExecutionID: 1024, EventID: 4097, CommandID: "1024:start:4097", Step: "start"})
	if _, err := js.Publish(ctx, notify.Subject("shutdown", 1024), body); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held: // the result went out once and was not taken
	case <-ctx.Done():
		t.Fatal("the command's result was never reported")
	}
	stop()
	<-done
	logMu.Lock()
	defer logMu.Unlock()
	var dropped map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(fmt.Sprint(m["msg"]), "grace period over") {
			dropped = m
		}
	}
	ids, _ := dropped["dropped_command_ids"].([]any)
	if dropped == nil || dropped["results_dropped"] != float64(1) || len(ids) != 1 || ids[0] != "1024:start:4097" || dropped["server_unavailable"] != true {
		t.Fatalf("the shutdown's last word: %v\nlog:\n%s", dropped, logs.String())
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.reports < 2 {
		t.Errorf("%d reports: the claim's and none with the result", srv.reports)
	}
}
