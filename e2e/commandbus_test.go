package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/commandbus/bustest"
	"github.com/noetl-go/noetl/shared/wire"
)

// busYAML is three quick steps: three commands per execution.
const busYAML = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: on_the_bus, path: e2e/on_the_bus}
workload: {n: 1}
workflow:
  - step: start
    tool: {kind: python, input: {n: "{{ workload.n }}"}, code: "result = {'n': int(n) + 1}"}
    next: middle
  - step: middle
    tool: {kind: python, input: {n: "{{ start.n }}"}, code: "result = {'n': int(n) * 10}"}
    next: last
  - step: last
    tool: {kind: noop, result: {done: true}}
`

// TestRustWorkerOnCommandBus (issue 30): NoETL's Rust worker 5.91.2 and
// later takes commands only from NoETL's command bus. `noetl dev
// --workers 0` with NOETL_COMMAND_BUS=ehdb publishes every command's
// notification to a stand-in of the bus writer (bustest: NoETL's ingest
// framing, an append log synced before each answer, a claim coordinator),
// and the Rust worker double takes its commands from the stand-in's claim
// side: a playbook completes with every command announced on the bus and
// none on NATS; a command nobody claims is announced again there. A writer stopped while commands are issued loses none: the
// requests that issue commands meanwhile succeed, the outbox keeps their
// notifications, and once the writer is back every command is delivered,
// claimed once, and every execution completes.
func TestRustWorkerOnCommandBus(t *testing.T) {
	t.Parallel()
	bus, d := busStack(t, "ehdb")
	path := d.register(t, busYAML)
	ctx := context.Background()

	// onTheBus checks ids' executions completed, each command issued once,
	// claimed once and announced on the bus; it returns how many commands.
	onTheBus := func(t *testing.T, ids []int64) int {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		views := make([]*wire.Execution, len(ids))
		for i, id := range ids {
			v, err := d.cl.Wait(wctx, id, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			views[i] = v
		}
		recorded := map[int64]bool{}
		for _, r := range bus.Records() {
			recorded[int64(r.GlobalSequence)] = true
			var n struct {
				ExecutionID int64  `json:"execution_id"`
				ServerURL   string `json:"server_url"`
			}
			if err := json.Unmarshal([]byte(r.Payload), &n); err != nil || strconv.FormatInt(n.ExecutionID, 10) != r.ExecutionID || n.ServerURL == "" {
				t.Errorf("record %+v: its payload is not the execution's notification (%v)", r, err)
			}
		}
		commands := 0
		for i, id := range ids {
			v := views[i]
			completed(t, v, "start", "middle", "last")
			if got := step(v, "middle").Result.V; fmt.Sprint(got) != "map[n:20]" {
				t.Errorf("execution %d: middle %v, want n 20", id, got)
			}
			evs := d.events(t, id)
			issued, claimed := 0, folded(evs, "command.claimed")
			for _, e := range evs {
				if e.EventType == "command.issued" {
					issued++
					if !recorded[int64(e.EventID)] {
						t.Errorf("execution %d: command %s (event %d) was never appended to the bus", id, e.CommandID, e.EventID)
					}
				}
			}
			if issued != 3 || claimed != 3 {
				t.Errorf("execution %d: %d commands issued, %d claimed; want 3 and 3 (each once): %v", id, issued, claimed, types(evs))
			}
			commands += issued
		}
		return commands
	}

	t.Run("a playbook completes, announced on the bus only", func(t *testing.T) {
		id, _ := d.run(t, wire.ExecuteRequest{Path: path})
		if n := onTheBus(t, []int64{id}); n != 3 {
			t.Errorf("%d commands", n)
		}
		js, err := jetstream.New(natsConn(t, d))
		if err != nil {
			t.Fatal(err)
		}
		if s, err := js.Stream(ctx, noetlStream); err == nil {
			if info, err := s.Info(ctx); err != nil || info.State.Msgs != 0 {
				t.Errorf("NATS stream %s holds %v messages (%v): NOETL_COMMAND_BUS=ehdb publishes to the bus only", noetlStream, info.State.Msgs, err)
			}
		}
	})

	t.Run("a command nobody claims is announced again on the bus", func(t *testing.T) {
		// The system pool's records are no shared worker's: the command
		// stays pending, and the drain announces it again (ReannounceDue).
		id, err := d.cl.Execute(ctx, wire.ExecuteRequest{Path: path, Pool: "system"})
		if err != nil {
			t.Fatal(err)
		}
		var issued int64
		for _, e := range d.events(t, id) {
			if e.EventType == "command.issued" {
				issued = int64(e.EventID)
			}
		}
		records := func() (n int) {
			for _, r := range bus.Records() {
				if int64(r.GlobalSequence) == issued {
					n++
					if !strings.Contains(r.Payload, `"execution_pool":"system"`) {
						t.Errorf("record %+v: want the system pool", r)
					}
				}
			}
			return n
		}
		waitFor(t, "the pending command's second announcement on the bus", 2*time.Minute, func() bool { return records() >= 2 })
		if _, err := d.cl.Cancel(ctx, id, "done with it"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a writer restart loses no notification", func(t *testing.T) {
		before := bus.Stats()
		var ids []int64
		for range 3 {
			id, err := d.cl.Execute(ctx, wire.ExecuteRequest{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		// Stopped while those executions issue their next commands.
		bus.Stop()
		for range 3 { // the writer is away: the requests still succeed
			id, err := d.cl.Execute(ctx, wire.ExecuteRequest{Path: path})
			if err != nil {
				t.Fatalf("execute while the bus writer is down: %v (the outbox, not the request, must retry)", err)
			}
			ids = append(ids, id)
		}
		// The outbox holds what the writer could not take, and the drain
		// keeps failing to deliver it while it is away.
		waitFor(t, "the outbox to hold the notifications the stopped writer missed", 2*time.Minute, func() bool { return outboxPending(t, d) >= 3 })
		if err := bus.Restart(); err != nil {
			t.Fatal(err)
		}
		n := onTheBus(t, ids)
		after := bus.Stats()
		if appended := after.Ingested - before.Ingested; appended < n {
			t.Errorf("%d records appended for %d commands", appended, n)
		}
		if acked := after.Acked - before.Acked; acked < n {
			t.Errorf("%d records acked by the worker for %d commands", acked, n)
		}
		waitFor(t, "the outbox to empty", 2*time.Minute, func() bool { return outboxPending(t, d) == 0 })
		t.Logf("%d executions, %d commands: %d records appended, %d handed out (%d again), %d acked",
			len(ids), n, after.Ingested-before.Ingested, after.Delivered-before.Delivered, after.Redelivered-before.Redelivered, after.Acked-before.Acked)
	})
}

// outboxPending is the outbox's unpublished row count (the internal route
// an autoscaler reads).
func outboxPending(t *testing.T, d *devStack) int64 {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.url+"/api/internal/outbox/pending-count", nil)
	req.Header.Set("Authorization", "Bearer "+rustInternalToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Pending int64 `json:"pending"`
	}
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil {
		t.Fatalf("pending-count: HTTP %d", resp.StatusCode)
	}
	return out.Pending
}

// TestCommandBusShadow (issue 30): NOETL_COMMAND_BUS=shadow announces every
// command both on NoETL's command bus and on NATS, so NoETL's current Rust
// worker (the double, on the bus) and the workers that read NATS (ours,
// NoETL's Python worker, its older Rust workers) are fed by one server: the
// double completes a playbook from the bus while the same notifications
// wait on the NATS stream.
func TestCommandBusShadow(t *testing.T) {
	t.Parallel()
	bus, d := busStack(t, "shadow")
	path := d.register(t, busYAML)
	id, v := d.run(t, wire.ExecuteRequest{Path: path})
	completed(t, v, "start", "middle", "last")
	recorded := map[int64]bool{}
	for _, r := range bus.Records() {
		recorded[int64(r.GlobalSequence)] = true
	}
	issued := 0
	for _, e := range d.events(t, id) {
		if e.EventType == "command.issued" {
			issued++
			if !recorded[int64(e.EventID)] {
				t.Errorf("command %s (event %d) was never appended to the bus", e.CommandID, e.EventID)
			}
		}
	}
	if issued != 3 {
		t.Fatalf("%d commands issued, want 3", issued)
	}
	js, err := jetstream.New(natsConn(t, d))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(context.Background(), noetlStream)
	if err != nil {
		t.Fatalf("NATS stream %s: %v (shadow publishes to NATS too)", noetlStream, err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs < uint64(issued) {
		t.Errorf("NATS stream %s holds %d messages for %d commands: shadow announces each command on NATS as well", noetlStream, info.State.Msgs, issued)
	}
}

// busStack starts a stand-in bus writer, `noetl dev --workers 0` publishing to
// it with NOETL_COMMAND_BUS=mode, and the Rust worker double claiming from it.
func busStack(t *testing.T, mode string) (*bustest.Writer, *devStack) {
	t.Helper()
	bus, err := bustest.Start(t.TempDir(), bustest.Options{AckWait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bus.Stop)
	d := startDev(t, devOptions{env: []string{"NOETL_API_TOKEN=" + apiToken, "NOETL_WORKER_TOKEN=" + workerToken,
		"NOETL_INTERNAL_API_TOKEN=" + rustInternalToken, "NOETL_COMMAND_BUS=" + mode, "NOETL_COMMAND_BUS_WRITER_ADDRS=0@" + bus.IngestAddr()}})
	d.cl = client.New(d.url, apiToken)
	w := newRustWorker(d.url, nil, rustInternalToken)
	w.claimAddr = bus.ClaimAddr()
	runDouble(t, "the Rust worker double on the bus", w.run, w.ready)
	return bus, d
}
