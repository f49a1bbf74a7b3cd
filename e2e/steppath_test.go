package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/dev/bench"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
	"github.com/noetl-go/noetl/shared/worker"
)

// stepWatch sees the worker's requests: it counts them and notes the
// database's counts when the first claim is answered (our worker claims in a
// report, NoETL's workers with the claim route) and when the completion of the
// chain's last step is.
type stepWatch struct {
	next    http.RoundTripper
	db      *store.Counter
	last    string // the chain's last step
	mu      sync.Mutex
	reqs    int
	claimed *store.CounterSnapshot
	atClaim int
	final   *store.CounterSnapshot
	atFinal int
	done    chan struct{}
}

func (w *stepWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		body, _ = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := w.next.RoundTrip(r)
	if strings.HasPrefix(r.URL.Path, "/api/worker/pool/") {
		return resp, err // the registry's beats keep time, not steps
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reqs++
	if err != nil || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	if w.final != nil {
		return resp, err
	}
	// Our worker's report (claims and events), or NoETL's workers' claim,
	// event and batch of events (event_type, or name in a batch).
	type event struct {
		Step string `json:"step"`
		Type string `json:"event_type"`
		Name string `json:"name"`
	}
	var rep struct {
		Claims []any   `json:"claims"`
		Events []event `json:"events"`
		event
	}
	_ = json.Unmarshal(body, &rep)
	claim := strings.HasPrefix(r.URL.Path, "/api/commands/") && strings.HasSuffix(r.URL.Path, "/claim")
	if (len(rep.Claims) > 0 || claim) && w.claimed == nil {
		s := w.db.Snapshot()
		w.claimed, w.atClaim = &s, w.reqs
	}
	for _, e := range append(rep.Events, rep.event) {
		if e.Step == w.last && (e.Type == "command.completed" || e.Name == "command.completed") {
			s := w.db.Snapshot()
			w.final, w.atFinal = &s, w.reqs
			close(w.done)
		}
	}
	return resp, err
}

// TestStepPathCosts (issues 9 and 29): once a chain of K noop steps has
// started, our worker spends at most one HTTP request and the server at most
// two Postgres commits and one round trip per step. Counted, not timed: the worker's requests, and every
// statement the stack sends (store.Counter), with no scheduled drain.
func TestStepPathCosts(t *testing.T) {
	const k = 20
	srv, db := costStack(t)
	reqs, work := chainCosts(t, srv, db, k, "", func(ctx context.Context, tr http.RoundTripper) error {
		w, err := worker.Standard{Server: srv.URL, JS: srv.JS, ID: "costs", Concurrency: 4, Transport: tr,
			Logger: slog.New(slog.NewJSONHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}.Build(ctx)
		if err != nil {
			return err
		}
		return w.Run(ctx)
	})
	if reqs > k {
		t.Errorf("%d HTTP requests for %d steps: want at most one per step", reqs, k)
	}
	if work.Commits > 2*k {
		t.Errorf("%d commits for %d steps: want at most two per step", work.Commits, k)
	}
	// Issue 29: the write and its COMMIT in one batch, guarded by the seq
	// the process pinned (an assumed txn, controlplane/assume.go).
	if work.RoundTrips > k {
		t.Errorf("%d Postgres round trips for %d steps: want one per step", work.RoundTrips, k)
	}
}

// TestStepPathCostsNoETL (issue 29): NoETL's workers keep their calls — the
// Rust worker's claim and three events, the Python worker's claim and two
// batches — but a step costs the server at most two transactions (BEGIN …
// COMMIT): the claim's, assumed in one round trip, and command.completed's.
// command.started, call.done and the worker's copies of step.enter and
// step.exit decide nothing and are staged without the execution's lock, one
// statement each request, and entered into the log by the completion's
// transaction. Counted with the bench's NoETL-protocol client
// (bench.NoETLWorker).
func TestStepPathCostsNoETL(t *testing.T) {
	const k = 20
	srv, db := costStack(t)
	for _, c := range []struct {
		protocol bench.Protocol
		requests int // per step
	}{{bench.NoETLCalls, 4}, {bench.NoETLBatches, 3}} {
		t.Run(string(c.protocol), func(t *testing.T) {
			pool := "costs-" + string(c.protocol)
			reqs, work := chainCosts(t, srv, db, k, pool, func(ctx context.Context, tr http.RoundTripper) error {
				w := &bench.NoETLWorker{Server: srv.URL, ID: "costs-" + string(c.protocol), Protocol: c.protocol, Concurrency: 4, Transport: tr}
				err := w.Run(ctx, srv.JS, pool)
				if n := w.Refused.Load(); n > 0 {
					t.Errorf("%d of the client's requests were refused", n)
				}
				return err
			})
			// From the first claim's answer: k-1 more claims and k completions.
			if reqs > c.requests*k {
				t.Errorf("%d HTTP requests for %d steps: want at most %d per step", reqs, k, c.requests)
			}
			if work.Transactions > 2*k {
				t.Errorf("%d transactions for %d steps: want at most two per step (the claim's and the completion's)", work.Transactions, k)
			}
			if perStep := work.Commits - work.Transactions; perStep > int64(c.requests)*k {
				t.Errorf("%d single-statement commits for %d steps", perStep, k)
			}
			// A round trip per request and one more for the completion's
			// lock (the claim of a command this process issued is assumed:
			// one round trip, as in our worker's report; a staged event is
			// one statement), and up to half a round trip per step for the
			// outbox's marks and the id blocks. The claim's lock path, a
			// round trip more per step, exceeds it.
			if limit := int64(2*c.requests+5) * k / 2; work.RoundTrips > limit {
				t.Errorf("%d Postgres round trips for %d steps: want at most %d", work.RoundTrips, k, limit)
			}
		})
	}
}

// costStack starts a stack of its own whose database work is counted. It
// runs no schedules' loop: a firing's transaction, once a second, would be
// counted with the steps' whenever a loaded machine stretches the chain past
// a second.
func costStack(t *testing.T) (*devserver.Server, *store.Counter) {
	t.Helper()
	db := &store.Counter{}
	srv, err := devserver.Start(context.Background(), devserver.Options{DBCounter: db, Getenv: throwawayEnv, ScheduleEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv, db
}

// chainCosts runs a chain of k noop steps in pool, served by serve (which
// runs until its context ends, its requests through the transport it is
// given), and returns the requests and the database work from the first
// claim's answer to the last step's completion. The chain must complete.
func chainCosts(t *testing.T, srv *devserver.Server, db *store.Counter, k int, pool string,
	serve func(context.Context, http.RoundTripper) error) (int, store.CounterSnapshot) {
	t.Helper()
	cl := client.New(srv.URL, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	reg, err := cl.Register(ctx, bench.Chain("tests/costs/chain"+pool, k))
	if err != nil {
		t.Fatal(err)
	}
	watch := &stepWatch{next: http.DefaultTransport, db: db, last: fmt.Sprintf("s%d", k), done: make(chan struct{})}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		if err := serve(wctx, watch); err != nil && wctx.Err() == nil {
			t.Errorf("worker: %v", err)
		}
		close(stopped)
	}()
	defer func() { stop(); <-stopped }()

	id, err := cl.Execute(ctx, wire.ExecuteRequest{Path: reg.Path, Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-watch.done:
	case <-ctx.Done():
		t.Fatal("the chain's last step was never reported")
	}
	watch.mu.Lock()
	work, reqs := watch.final.Sub(*watch.claimed), watch.atFinal-watch.atClaim
	watch.mu.Unlock()
	t.Logf("after the first claim, %d steps took %d HTTP requests, %d Postgres round trips, %d statements, %d commits of which %d transactions",
		k, reqs, work.RoundTrips, work.Statements, work.Commits, work.Transactions)
	v := waitStatus(t, ctx, cl, id)
	if v.Status != "COMPLETED" {
		t.Fatalf("execution %d: %v %v", id, v.Status, v.Error)
	}
	for i := 2; i <= k; i++ {
		if st := step(v, fmt.Sprintf("s%d", i)); st.Status != "completed" {
			t.Fatalf("s%d: %v", i, st)
		}
	}
	return reqs, work
}

// waitStatus reads the execution until it has ended (a completion's answer
// may come before the chain's last transaction is visible to a reader).
func waitStatus(t *testing.T, ctx context.Context, cl *client.Client, id int64) *wire.Execution {
	t.Helper()
	for {
		v, err := cl.Execution(ctx, id)
		if err != nil {
			t.Fatalf("execution %d: %v", id, err)
		}
		if v.Status != "RUNNING" || ctx.Err() != nil {
			return v
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// throwawayEnv keeps a test stack on its own throwaway Postgres and NATS.
func throwawayEnv(k string) string {
	switch k {
	case "NOETL_DATABASE_URL", "NOETL_SHARD_URLS", "NOETL_NATS_URL", "NOETL_SERVER_URL":
		return ""
	}
	return os.Getenv(k)
}

// protocolYAML exercises what a step's result feeds: templates reading earlier
// results, durable set, a parallel loop, exclusive routing and a join.
const protocolYAML = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: protocol, path: tests/protocol}
workload: {n: 7}
workflow:
  - step: start
    tool: {kind: noop, result: {n: "{{ n }}", doubled: "{{ n * 2 }}"}}
    set: {ctx.first: "{{ output.doubled }}"}
    next: fan
  - step: fan
    loop: {in: "{{ [1, 2, 3] }}", iterator: i, spec: {mode: parallel}}
    tool: {kind: noop, result: {i: "{{ i }}", sum: "{{ i + ctx.first }}"}}
    next:
      spec: {mode: exclusive}
      arcs:
        - {step: big, when: "{{ ctx.first > 10 }}"}
        - {step: small}
  - step: big
    tool: {kind: noop, result: {size: big}}
    next: join
  - step: small
    tool: {kind: noop, result: {size: small}}
    next: join
  - step: join
    tool: {kind: noop, result: {size: "{{ big.size if big else small.size }}", last: "{{ fan.results[2].sum }}"}}
    set: {ctx.done: "{{ output.size }}"}
`

// noetlWorker serves a pool the way NoETL's workers do: claim, then
// command.started, call.done with NoETL's result shape, command.completed,
// four requests per step. It runs noop tools only.
func noetlWorker(t *testing.T, pool string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cons, err := notify.EnsureConsumer(ctx, shared.srv.JS, pool)
	if err != nil {
		t.Fatal(err)
	}
	post := func(path string, body map[string]any) (map[string]any, int) {
		b, _ := json.Marshal(body)
		resp, err := http.Post(shared.srv.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			return nil, 0
		}
		defer resp.Body.Close()
		// Ids as the JSON's digits, as NoETL's Python worker reads them: a
		// float64 prints an id past 1e6 as 3.5e+07, which no server takes.
		dec := json.NewDecoder(resp.Body)
		dec.UseNumber()
		var out map[string]any
		_ = dec.Decode(&out)
		return out, resp.StatusCode
	}
	go func() {
		for ctx.Err() == nil {
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(200*time.Millisecond))
			if err != nil {
				continue
			}
			for msg := range batch.Messages() {
				var n struct {
					EventID json.Number `json:"event_id"`
				}
				_ = json.Unmarshal(msg.Data(), &n)
				cmd, status := post("/api/commands/"+n.EventID.String()+"/claim", map[string]any{"worker_id": "noetl-w"})
				_ = msg.Ack()
				if status != http.StatusOK {
					continue
				}
				execID := fmt.Sprint(cmd["execution_id"])
				id, _ := cmd["command_id"].(string)
				stepName, _ := cmd["node_name"].(string)
				ctxv, _ := cmd["context"].(map[string]any)
				cfg, _ := ctxv["tool_config"].(map[string]any)
				data, ok := cfg["result"]
				if !ok {
					data = map[string]any{"status": "ok", "message": nil}
				}
				event := func(typ, status string, payload map[string]any) {
					payload["command_id"] = id
					if out, code := post("/api/events", map[string]any{"execution_id": execID, "step": stepName, "event_type": typ,
						"status": status, "worker_id": "noetl-w", "payload": payload,
						"meta": map[string]any{"command_id": id, "attempts": cmd["attempt"]}}); code != http.StatusOK {
						t.Errorf("%s of %s: HTTP %d %v", typ, id, code, out)
					}
				}
				event("command.started", "RUNNING", map[string]any{})
				event("call.done", "COMPLETED", map[string]any{"result": map[string]any{"status": "success",
					"context": map[string]any{"status": "success", "data": data}}})
				event("command.completed", "success", map[string]any{"status": "success"})
			}
		}
	}()
}

// TestNoETLWorkerProtocol (issue 9): NoETL's workers keep their four calls per
// step and get the same results as our worker's fast path, with replay
// parity for both.
func TestNoETLWorkerProtocol(t *testing.T) {
	ctx := context.Background()
	reg, err := shared.cl.Register(ctx, protocolYAML)
	if err != nil {
		t.Fatal(err)
	}
	shared.startWorkers(t, "proto-ours", 1)
	noetlWorker(t, "proto-noetl")
	ours, oursView := shared.run(t, wire.ExecuteRequest{Path: reg.Path, Pool: "proto-ours"})
	theirs, theirsView := shared.run(t, wire.ExecuteRequest{Path: reg.Path, Pool: "proto-noetl"})
	for _, v := range []*wire.Execution{oursView, theirsView} {
		if v.Status != "COMPLETED" {
			t.Fatalf("execution %v: %v %v", v.ExecutionID, v.Status, v.Error)
		}
	}
	if !reflect.DeepEqual(oursView.Context, theirsView.Context) || oursView.Context["done"] != "big" {
		t.Errorf("context: ours %v, NoETL's %v", oursView.Context, theirsView.Context)
	}
	for _, name := range []string{"start", "fan", "big", "small", "join"} {
		a, b := step(oursView, name), step(theirsView, name)
		if a.Status != b.Status || !reflect.DeepEqual(a.Result.V, b.Result.V) {
			t.Errorf("step %s: ours %v %v, NoETL's %v %v", name, a.Status, a.Result.V, b.Status, b.Result.V)
		}
	}
	oursEvents, theirsEvents := shared.events(t, ours), shared.events(t, theirs)
	if n := count(oursEvents, "call.done", "") + count(oursEvents, "command.started", ""); n != 0 {
		t.Errorf("our worker's run has %d call.done/command.started events; the fast path writes none", n)
	}
	if count(theirsEvents, "call.done", "") != count(theirsEvents, "command.issued", "") {
		t.Errorf("NoETL's run: %d call.done for %d commands", count(theirsEvents, "call.done", ""), count(theirsEvents, "command.issued", ""))
	}
	if len(oursEvents) >= len(theirsEvents) {
		t.Errorf("the fast path wrote %d events, the four-call protocol %d: want fewer", len(oursEvents), len(theirsEvents))
	}
	shared.verify(t, ours)
	shared.verify(t, theirs)
}
