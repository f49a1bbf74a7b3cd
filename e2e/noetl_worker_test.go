package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/wire"
)

// lease of the dev stacks started here (NOETL_LEASE_SECONDS).
const devLease = 2 * time.Second

// countOf is how many of list are v.
func countOf(list []int, v int) int {
	n := 0
	for _, x := range list {
		if x == v {
			n++
		}
	}
	return n
}

// startDouble runs a double of NoETL's Python worker against d until the test ends.
func startDouble(t *testing.T, d *devStack, adjust func(*pyWorker)) *pyWorker {
	t.Helper()
	nc := natsConn(t, d)
	w := newPyWorker(d.url, nc)
	// NoETL's worker beats every 15 s and remembers a command id for 120 s:
	// both scaled to the lease, as its beat is.
	w.heartbeat, w.recentTTL = devLease/4, 2*devLease
	if adjust != nil {
		adjust(w)
	}
	runDouble(t, "the NoETL worker double", w.run, w.ready)
	return w
}

// natsConn connects to d's NATS until the test ends.
func natsConn(t *testing.T, d *devStack) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(d.nats)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// runDouble runs a worker double until the test ends (then stops it and
// waits) and returns once it is ready: its consumers deliver only what is
// published after they exist, so nothing may run before.
func runDouble(t *testing.T, name string, run func(context.Context) error, ready <-chan struct{}) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("%s stopped before it consumed: %v", name, err)
	case <-time.After(time.Minute):
		t.Fatalf("%s did not start consuming within a minute", name)
	}
}

func (d *devStack) run(t *testing.T, req wire.ExecuteRequest) (int64, *wire.Execution) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := d.cl.Execute(ctx, req)
	if err != nil {
		t.Fatalf("execute %s: %v", req.Path, err)
	}
	v, err := d.cl.Wait(ctx, id, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("execution %d of %s: %v\n%s", id, req.Path, err, d.diagnose(id))
	}
	return id, v
}

// diagnose is what a run that did not end leaves to read: its log, a line
// per event, and the end of what the server printed.
func (d *devStack) diagnose(id int64) string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	evs, _, err := d.cl.Events(ctx, id, 0, 1000)
	fmt.Fprintf(&b, "its log (%d events, %v):\n", len(evs), err)
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s %s %s %s %s\n", e.CreatedAt, e.EventType, e.NodeName, e.Status, e.Error)
	}
	lines := strings.Split(strings.TrimSpace(d.printed()), "\n")
	b.WriteString("the server's last lines:\n  " + strings.Join(lines[max(0, len(lines)-40):], "\n  "))
	return b.String()
}

func (d *devStack) events(t *testing.T, id int64) []wire.Event {
	t.Helper()
	evs, _, err := d.cl.Events(context.Background(), id, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func (d *devStack) register(t *testing.T, src string) string {
	t.Helper()
	r, err := d.cl.Register(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return r.Path
}

// folded counts an execution's events of a type that were folded (not stored ignored).
func folded(evs []wire.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.EventType == typ && !e.Ignored {
			n++
		}
	}
	return n
}

// TestNoETLWorkerDouble (issue 18): through `noetl dev --workers 0`, a double of
// NoETL's Python worker with its default subscriptions (legacy, shared,
// python) runs every conformance playbook to the outcome NoETL's worker
// reaches (../shared/conformance/README.md; broken_sql fails at its first step,
// whose top-level return NoETL's python refuses), each command claimed once per attempt
// though two of its consumers receive each notification; a step running 3× the
// lease while heartbeating completes once; no event request is refused but a
// late holder's, after its lease ran out (R-L8).
func TestNoETLWorkerDouble(t *testing.T) {
	t.Parallel()
	// Only NoETL's worker (the double) runs steps.
	d := startDev(t, devOptions{env: []string{fmt.Sprintf("NOETL_LEASE_SECONDS=%d", int(devLease/time.Second))}})
	// First, with no worker running: the requests NoETL's worker sent (recorded),
	// replayed with ids rewritten, are all answered 2xx, as NoETL's server
	// answers them (its pool calls included).
	t.Run("recorded requests replayed", func(t *testing.T) {
		answers := replayRecorded(t, d)
		counts := map[string]int{}
		for _, a := range answers {
			counts[a]++
		}
		t.Logf("%d requests replayed: %v", len(answers), counts)
		if len(answers) < 100 {
			t.Fatalf("only %d requests replayed", len(answers))
		}
	})
	// Its pool calls come faster than NoETL's 15 s and 8 s, so the run sees many.
	w := startDouble(t, d, func(w *pyWorker) { w.poolEvery, w.probeEvery = devLease, devLease/4 })
	dir := filepath.Join(conformance.Dir(t), "playbooks")
	paths := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) != 8 {
		t.Fatalf("want 8 conformance playbooks, found %d", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		paths[filepath.Base(f)] = d.register(t, string(src))
	}
	api := paginatedUsers(t)
	var ids []int64
	run := func(t *testing.T, file string, payload map[string]any) (int64, *wire.Execution) {
		id, v := d.run(t, wire.ExecuteRequest{Path: paths[file], Payload: payload})
		ids = append(ids, id)
		return id, v
	}

	t.Run("hello_world", func(t *testing.T) {
		id, v := run(t, "hello_world.yaml", nil)
		completed(t, v, "start", "test_step", "end")
		if got := step(v, "test_step").Result.V; !conformance.Subset(map[string]any{"status": "ok", "data": map[string]any{"message": "Hello World"}}, got) {
			t.Fatalf("test_step result %v", got)
		}
		// NoETL's worker posts all four of a step's events.
		evs := d.events(t, id)
		for _, typ := range []string{"command.claimed", "command.started", "call.done", "command.completed"} {
			if n := folded(evs, typ); n != 3 {
				t.Errorf("%d %s, want 3", n, typ)
			}
		}
	})
	t.Run("test_start_with_action", func(t *testing.T) {
		_, v := run(t, "test_start_with_action.yaml", nil)
		completed(t, v, "start", "process", "end")
		if got := step(v, "process").Result.V; !conformance.Subset(map[string]any{"data": map[string]any{"from_start": true}}, got) {
			t.Fatalf("process result %v", got)
		}
	})
	for _, c := range []struct {
		threshold         int
		ran, skipped, cat string
	}{{0, "process_high", "process_low", "high"}, {21, "process_low", "process_high", "low"}} {
		t.Run(fmt.Sprintf("comprehensive_test/threshold=%d", c.threshold), func(t *testing.T) {
			_, v := run(t, "comprehensive_test.yaml", map[string]any{"threshold": c.threshold})
			completed(t, v, "start", c.ran, "summarize", "end")
			if st := step(v, c.skipped).Status; st != "skipped" {
				t.Fatalf("%s is %v, want skipped", c.skipped, st)
			}
			if got := step(v, "summarize").Result.V; !conformance.Subset(map[string]any{"processing_path": c.cat}, got) {
				t.Fatalf("summarize result %v", got)
			}
		})
	}
	t.Run("fanout_reduce_phase6", func(t *testing.T) {
		id, v := run(t, "fanout_reduce_phase6.yaml", nil)
		completed(t, v, "start", "normalize_customer", "enrich_customer", "reduce_customer")
		if got := step(v, "normalize_customer").Result.V; !conformance.Subset(map[string]any{"normalized": true}, got) {
			t.Fatalf("normalize_customer %v", got)
		}
		if n := folded(d.events(t, id), "step.enter"); n != 4 {
			t.Fatalf("%d step.enter, want 4 (reduce_customer once)", n)
		}
	})
	t.Run("test_simple_loop", func(t *testing.T) {
		_, v := run(t, "test_simple_loop.yaml", nil)
		completed(t, v, "start", "loop_test", "end")
		got, _ := step(v, "loop_test").Result.V.([]any)
		if len(got) != 3 {
			t.Fatalf("loop_test result %v", step(v, "loop_test").Result.V)
		}
		for i, n := range []int64{20, 40, 60} {
			if !conformance.Subset(map[string]any{"doubled": n}, got[i]) {
				t.Fatalf("iteration %d = %v", i, got[i])
			}
		}
	})
	t.Run("test_vars_template_access", func(t *testing.T) {
		_, v := run(t, "test_vars_template_access.yaml", nil)
		completed(t, v, "start", "set_variables", "use_vars_in_template", "verify_results", "end")
		want := map[string]any{"received_counter": 42, "received_message": "Template access works!",
			"received_timeout": 30, "full_greeting": "Hello, Template access works!"}
		if got := step(v, "use_vars_in_template").Result.V; !conformance.Subset(want, got) {
			t.Fatalf("use_vars_in_template %v", got)
		}
		// The playbook's own check reads the previous step through python's
		// `context`, which NoETL's worker fills from the command's render_context.
		if got := step(v, "verify_results").Result.V; !conformance.Subset(map[string]any{"status": "success"}, got) {
			t.Fatalf("verify_results (the playbook's own check) %v", got)
		}
	})
	t.Run("test_pagination_offset", func(t *testing.T) {
		_, v := run(t, "test_pagination_offset.yaml", map[string]any{"api_url": api.URL})
		completed(t, v, "start", "fetch_page", "check_pagination", "validate_results", "end")
		if n := step(v, "fetch_page").Visits; n != 4 {
			t.Fatalf("fetch_page visited %v times, want 4", n)
		}
		if got := step(v, "validate_results").Result.V; !conformance.Subset(map[string]any{"total_users": 35, "first_id": 1, "last_id": 35}, got) {
			t.Fatalf("validate_results %v", got)
		}
	})
	t.Run("broken_sql", func(t *testing.T) {
		_, v := run(t, "broken_sql.yaml", nil)
		if v.Status != "FAILED" || !strings.Contains(string(v.Error), "'return' outside function") {
			t.Fatalf("status %v, error %q: want FAILED at start with NoETL's python's refusal of a top-level return", v.Status, v.Error)
		}
		if st := step(v, "start").Status; st != "failed" {
			t.Fatalf("start is %v", st)
		}
		if st := step(v, "verify_pg_data").Status; st == "completed" || st == "failed" {
			t.Fatalf("verify_pg_data is %v: the run must stop at start", st)
		}
	})

	t.Run("long step heartbeating", func(t *testing.T) {
		long := fmt.Sprintf(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: long, path: tests/noetl_worker/long}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        import time
        time.sleep(%g)
        result = {"slept": True}
`, (3*devLease + devLease/2).Seconds())
		id, v := d.run(t, wire.ExecuteRequest{Path: d.register(t, long)})
		ids = append(ids, id)
		completed(t, v, "start")
		evs := d.events(t, id)
		if folded(evs, "command.issued") != 1 || folded(evs, "command.claimed") != 1 || folded(evs, "command.expired") != 0 ||
			folded(evs, "call.done") != 1 || folded(evs, "command.completed") != 1 {
			t.Fatalf("a step running 3× the lease while heartbeating must run once: %v", types(evs))
		}
		if got := step(v, "start").Result.V; !conformance.Subset(map[string]any{"slept": true}, got) {
			t.Fatalf("start result %v", got)
		}
	})

	// A lease can run out on a loaded machine (2 s here) before a beat is
	// taken: the server retries the command id as attempt 2 and fences the
	// late holder's events (R-L8: 409). The double then claims the retry once
	// its memory of the id has passed (recentTTL), as NoETL's worker does
	// after 120 s; so such a command is claimed once per attempt, and only
	// its events may be refused.
	t.Run("each command claimed once per attempt", func(t *testing.T) {
		answers := w.claimAnswers()
		issued := 0
		expired := map[string]bool{}
		for _, id := range ids {
			evs := d.events(t, id)
			retries := map[string]int{}
			for _, e := range evs {
				switch e.EventType {
				case "command.retry":
					retries[string(e.CommandID)]++
				case "command.expired":
					expired[string(e.CommandID)] = true
				}
			}
			for _, e := range evs {
				if e.EventType != "command.issued" {
					continue
				}
				issued++
				got := answers[string(e.CommandID)]
				if n, want := countOf(got, 200), 1+retries[string(e.CommandID)]; n != want {
					t.Errorf("command %s: claim answers %v, want %d 200 (one per attempt)", e.CommandID, got, want)
				}
			}
		}
		dup := 0
		for _, a := range answers {
			dup += len(a) - countOf(a, 200)
		}
		t.Logf("%d commands, each claimed once per attempt (%d leases ran out); %d second notifications (legacy and shared consumers) answered 409 active_claim or acked", issued, len(expired), dup)
		for _, p := range w.refused() {
			if p.status != http.StatusConflict || !expired[p.command] {
				t.Errorf("event request refused: %+v", p)
			}
		}
	})

	t.Run("pool calls", func(t *testing.T) {
		calls := map[string]int{}
		for _, c := range w.pool() {
			calls[c.path]++
			if c.status != 200 {
				t.Errorf("%s answered %d, want 200", c.path, c.status)
			}
		}
		t.Logf("pool calls: %v", calls)
		if calls["POST /api/worker/pool/register"] < 2 || calls["GET /api/pool/status"] < 2 {
			t.Fatalf("pool calls %v: want registrations at start and as heartbeats, and status reads", calls)
		}
		ws, err := d.cl.Workers(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		// The replayed recording registered its worker too.
		i := slices.IndexFunc(ws.Items, func(it wire.WorkerPool) bool { return it.Name == w.id })
		if i < 0 || !ws.Items[i].Alive || ws.Items[i].Runtime["type"] != "python" || ws.Items[i].Pool != "shared" {
			t.Fatalf("the registry lists %+v, want NoETL's worker %s alive", ws.Items, w.id)
		}
	})

	t.Run("the stream is the server's", func(t *testing.T) {
		nc, err := nats.Connect(d.nats)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, _ := jetstream.New(nc)
		s, err := js.Stream(context.Background(), notify.StreamName)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(info.Config.Subjects, notify.Subjects()) || info.Config.Duplicates != notify.DefaultDuplicates {
			t.Fatalf("stream config %v after NoETL's worker subscribed", info.Config)
		}
	})
}

func types(evs []wire.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.EventType
		if e.Ignored {
			out[i] += "(ignored)"
		}
	}
	return out
}
