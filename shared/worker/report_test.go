package worker

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolresult"
	"github.com/noetl-go/noetl/shared/wire"
)

// refusingServer answers reports as the API does when one event holds a NUL:
// the whole request is a 422 naming that event (the API's own check). A
// report of claims alone is refused (401). It records each request's event
// types and errors.
type refusingServer struct {
	mu       sync.Mutex
	requests [][]string // per request: "type" or "type: payload.error"
	claims   int
}

func (s *refusingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Events []struct {
			Type    string         `json:"event_type"`
			Payload map[string]any `json:"payload"`
		} `json:"events"`
		Claims []string `json:"claims"`
	}
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	var seen []string
	for _, e := range body.Events {
		if msg, _ := e.Payload["error"].(string); msg != "" {
			seen = append(seen, e.Type+": "+msg)
		} else {
			seen = append(seen, e.Type)
		}
	}
	s.requests = append(s.requests, seen)
	s.claims += len(body.Claims)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if len(body.Events) == 0 {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error": "invalid token", "status": 401}`)
		return
	}
	decoded, _ := jsonx.Decode(raw)
	if err := jsonx.CheckText("", decoded); err != nil {
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = w.Write(jsonx.MustMarshal(map[string]any{"error": err.Error(), "status": 422}))
		return
	}
	out := `{"status": "ok", "claims": [], "commands": [], "events": [` +
		strings.TrimSuffix(strings.Repeat(`{"status": 200, "event_id": "1"},`, len(body.Events)), ",") + `]}`
	_, _ = io.WriteString(w, out)
}

func (s *refusingServer) seen() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func testWorker(t *testing.T, h http.Handler, slots int) *Worker {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	w := &Worker{cfg: Config{Client: client.New(srv.URL, ""), WorkerID: "w1"},
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), slots: newSlots(slots)}
	w.watchDependencies()
	w.stopping.Store(true) // take no commands back: only reporting is tested
	return w
}

func stepEnd(id int64, stdout string) completion {
	cmd := &wire.Command{ExecutionID: 1024, EventID: wire.NumID(id), CommandID: "1024:s:" + strconv.FormatInt(id, 10), NodeName: "s", Attempt: 1,
		LeaseExpiresAt: wire.At(time.Now().Add(time.Minute))}
	env := map[string]any{"status": "success", "data": map[string]any{"stdout": stdout}}
	return completion{cmd: cmd, event: wire.EventRequest{ExecutionID: 1024, EventFields: wire.EventFields{Step: "s", EventType: "command.completed", Status: "success",
		Payload: map[string]any{"command_id": cmd.CommandID, "result": env}, Meta: map[string]any{"command_id": cmd.CommandID, "attempt": int64(1)},
		WorkerID: "w1"}}}
}

// TestReportRefusedAsAWholeIsSplit: a report whose request is refused as a
// whole (a 422 for one event's NUL) is sent again one completion per request,
// so the good result is taken and the bad one becomes the command.failed that
// names the cause; every slot is freed. Before, the completions were queued
// again together and the same report was refused for ever.
func TestReportRefusedAsAWholeIsSplit(t *testing.T) {
	srv := &refusingServer{}
	w := testWorker(t, srv, 2)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a timing
	defer cancel()
	w.slots.acquire(ctx, 2)
	r := newReporter(w, ctx)
	r.mu.Lock()
	r.q = append(r.q, stepEnd(1, "fine"), stepEnd(2, "a\x00b"))
	r.mu.Unlock()
	r.wake()
	r.close()
	if ctx.Err() != nil {
		t.Fatalf("the reports never settled: %d requests", len(srv.seen()))
	}
	got := srv.seen()
	if len(got) != 4 || !slices.Equal(got[0], []string{"command.completed", "command.completed"}) {
		t.Fatalf("%d requests, the first %q; want 4: the pair, each alone, then the refusal", len(got), got[:min(len(got), 3)])
	}
	var single []string
	for _, req := range got[1:] {
		if len(req) != 1 {
			t.Fatalf("requests %q: a split report carries one event", got)
		}
		single = append(single, req[0])
	}
	slices.Sort(single)
	want := "command.failed: the server refused the step's result: 422: events[0].payload.result.data.stdout: contains a NUL character (\\u0000) at byte 1"
	if single[0] != "command.completed" || single[1] != "command.completed" || !strings.HasPrefix(single[2], want) {
		t.Fatalf("split requests %q, want the two completions alone and %q", single, want)
	}
	if free := w.slots.grab(); free != 2 {
		t.Fatalf("%d of 2 slots free after the reports", free)
	}
}

// noMsg is a notification whose only use here is being delivered again.
type noMsg struct {
	jetstream.Msg
	mu   sync.Mutex
	naks int
}

func (m *noMsg) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{NumDelivered: 1}, nil
}
func (m *noMsg) NakWithDelay(time.Duration) error {
	m.mu.Lock()
	m.naks++
	m.mu.Unlock()
	return nil
}

// TestReportOfClaimsRefused: a report of claims alone refused as a whole
// (here a 401) puts the notifications back and keeps the worker running; it
// indexed an empty batch and panicked before.
func TestReportOfClaimsRefused(t *testing.T) {
	srv := &refusingServer{}
	w := testWorker(t, srv, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w.slots.acquire(ctx, 1)
	r := newReporter(w, ctx)
	msg := &noMsg{}
	r.claim(claim{msg: msg, eventID: 7})
	r.close()
	msg.mu.Lock()
	defer msg.mu.Unlock()
	if srv.claims != 1 || msg.naks != 1 {
		t.Fatalf("%d claims sent, %d naks; want the claim sent once and put back", srv.claims, msg.naks)
	}
	if free := w.slots.grab(); free != 1 {
		t.Fatalf("%d of 1 slots free", free)
	}
}

// handingServer answers each claim of a report with its command, as the
// server answers our worker's claim of a command it already holds (the
// command again), and takes every event.
type handingServer struct {
	cmd    wire.Command
	mu     sync.Mutex
	events []string
}

func (s *handingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req wire.Report
	_ = json.NewDecoder(r.Body).Decode(&req)
	res := wire.Reported{Status: "ok", Events: []wire.EventOutcome{}, Claims: []wire.ClaimOutcome{}, Commands: []wire.Command{}}
	s.mu.Lock()
	for _, e := range req.Events {
		s.events = append(s.events, e.EventType)
		res.Events = append(res.Events, wire.EventOutcome{Status: http.StatusOK, EventID: 1})
	}
	s.mu.Unlock()
	for range req.Claims {
		res.Claims = append(res.Claims, wire.ClaimOutcome{Status: http.StatusOK})
		res.Commands = append(res.Commands, s.cmd)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(res)
}

func (s *handingServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// ackMsg is a notification that is acked.
type ackMsg struct{ jetstream.Msg }

func (ackMsg) Ack() error { return nil }

// TestCommandHandedTwiceRunsOnce: a command handed to the worker while it
// still runs it — its report's answer served it, then the drain announced
// it again and the worker's claim of that notification is answered with the
// command again — runs once, and the second slot is given back at once.
func TestCommandHandedTwiceRunsOnce(t *testing.T) {
	srv := &handingServer{cmd: wire.Command{Status: "ok", EventID: 7, ExecutionID: 1024, CommandID: "1024:s:7", NodeName: "s", Action: "noop",
		Context: map[string]any{"tool_config": map[string]any{}}, Attempt: 1, LeaseExpiresAt: wire.At(time.Now().Add(time.Minute))}}
	w := testWorker(t, srv, 2)
	w.cfg.InlineLimit = DefaultInlineLimit
	release := make(chan struct{})
	w.cfg.Exec = func(context.Context, pipeline.Item) toolresult.Envelope {
		<-release
		return toolresult.Envelope{Status: toolresult.StatusSuccess}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang guard, not a timing
	defer cancel()
	w.slots.acquire(ctx, 2)
	r := newReporter(w, ctx)
	r.claim(claim{msg: ackMsg{}, eventID: 7})
	for w.ToolRuns() == 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	r.claim(claim{msg: ackMsg{}, eventID: 7}) // the drain's notification of it
	for w.slots.grab() == 0 && w.ToolRuns() == 1 && ctx.Err() == nil {
		time.Sleep(time.Millisecond) // the second claim's slot comes back unused
	}
	close(release)
	if n := w.ToolRuns(); n != 1 {
		t.Fatalf("the command ran %d times while it ran, want once", n)
	}
	w.slots.release(1)
	for len(srv.seen()) == 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	r.close()
	if ctx.Err() != nil {
		t.Fatal("the command never ran or was never reported")
	}
	if n := w.ToolRuns(); n != 1 {
		t.Fatalf("the command ran %d times, want once", n)
	}
	if got := srv.seen(); !slices.Equal(got, []string{"command.completed"}) {
		t.Fatalf("reported %q, want one command.completed", got)
	}
	if free := w.slots.grab(); free != 2 {
		t.Fatalf("%d of 2 slots free after the report", free)
	}
}
