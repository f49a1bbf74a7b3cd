package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/wire"
	"github.com/noetl-go/noetl/shared/worker"
)

// priceService is the service the prices playbook calls: kind a has a
// price, b is unknown (404), c is busy (503); the store refuses kind z
// (500). It counts every request: a what-if must make none.
type priceService struct {
	hits atomic.Int64
}

func (p *priceService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.hits.Add(1)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/price/b":
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error": "no price for b"}`)
	case r.URL.Path == "/price/c":
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error": "busy"}`)
	case strings.HasPrefix(r.URL.Path, "/price/"):
		io.WriteString(w, `{"price": 5}`)
	case r.URL.Path == "/store":
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"z"`)) {
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error": "refused"}`)
			return
		}
		io.WriteString(w, `{"stored": true}`)
	default:
		http.NotFound(w, r)
	}
}

// whatIfStack is a stack of its own with 100 recorded executions of the
// prices playbook's v1 and its v2 registered: row counts are then the
// what-if's alone.
type whatIfStack struct {
	srv    *devserver.Server
	cl     *client.Client
	svc    *priceService
	w      *worker.Worker
	kindOf map[int64]string
	v2     int
}

// kinds: 40 runs of a (complete), 25 of b (404), 20 of c (503), 15 of z
// (the store refuses), interleaved.
func whatIfKind(i int) string {
	switch r := i % 20; {
	case r < 8:
		return "a"
	case r < 13:
		return "b"
	case r < 17:
		return "c"
	}
	return "z"
}

func newWhatIfStack(t *testing.T) *whatIfStack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	srv, err := devserver.Start(ctx, devserver.Options{Getenv: throwawayEnv, DrainEvery: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	s := &whatIfStack{srv: srv, cl: client.New(srv.URL, ""), svc: &priceService{}, kindOf: map[int64]string{}}
	ts := httptest.NewServer(s.svc)
	t.Cleanup(ts.Close)
	s.w, err = worker.Standard{Server: srv.URL, JS: srv.JS, Pool: "whatif", ID: "whatif-1", Concurrency: 8, Results: srv.Results,
		Logger: slog.New(slog.NewJSONHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}.Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = s.w.Run(wctx); close(stopped) }()
	t.Cleanup(func() { stop(); <-stopped })

	s.register(t, "v1")
	var ids []int64
	for i := range 100 {
		kind := whatIfKind(i)
		id, err := s.cl.Execute(ctx, wire.ExecuteRequest{Path: "whatif/prices", Pool: "whatif",
			Payload: wire.Object{"server": ts.URL, "kind": kind}})
		if err != nil {
			t.Fatal(err)
		}
		s.kindOf[id] = kind
		ids = append(ids, id)
	}
	for _, id := range ids {
		v, err := s.cl.Wait(ctx, id, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		want := "FAILED"
		if s.kindOf[id] == "a" {
			want = "COMPLETED"
		}
		if v.Status != want {
			t.Fatalf("v1 run of kind %s ended %s (%v), want %s", s.kindOf[id], v.Status, v.Error, want)
		}
	}
	s.v2 = s.register(t, "v2")
	return s
}

func (s *whatIfStack) register(t *testing.T, v string) int {
	t.Helper()
	src, err := os.ReadFile("../shared/whatif/testdata/prices-" + v + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.cl.Register(context.Background(), string(src))
	if err != nil {
		t.Fatal(err)
	}
	return r.Version
}

// post sends a raw body and returns the status and the decoded answer.
func (s *whatIfStack) post(t *testing.T, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(s.srv.URL+"/api/whatif", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

// TestWhatIf (issue 31): v1 of the prices playbook fails on some inputs; 100
// recorded executions, mixed. A what-if of v2 (the fix: a 503 retried, an
// unknown price taking a fallback) says per execution and in the summary
// exactly which would now complete (b), which are the same (a, and z, which
// fails the same way), and which need a live run (c: v2's second attempt
// was never run), without running a tool (the worker's tool counter and the
// service's request counter stay put) and without writing a row. The bad
// inputs answer 4xx naming the problem.
func TestWhatIf(t *testing.T) {
	t.Parallel()
	s := newWhatIfStack(t)
	ctx := context.Background()
	// Another playbook, for the what-if over the wrong path.
	if _, err := s.cl.Register(ctx, "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: other, path: whatif/other}\nworkflow:\n  - step: start\n    tool: {kind: noop}\n"); err != nil {
		t.Fatal(err)
	}
	before, err := apitest.CountRows(ctx, s.srv.Store)
	if err != nil {
		t.Fatal(err)
	}
	runs, hits := s.w.ToolRuns(), s.svc.hits.Load()
	if runs == 0 || hits == 0 {
		t.Fatalf("the recorded runs ran %d tools, %d requests", runs, hits)
	}

	rep, err := s.cl.WhatIf(ctx, wire.WhatIfRequest{Path: "whatif/prices", Version: wire.Version(s.v2),
		Select: &wire.WhatIfSelect{Since: "1h", Limit: 100}})
	if err != nil {
		t.Fatal(err)
	}
	want := wire.WhatIfSummary{Same: 55, WouldComplete: 25, NeedsLive: 20}
	if rep.Summary != want || len(rep.Executions) != 100 || rep.Version != s.v2 {
		t.Fatalf("summary %+v of %d executions (version %d), want %+v of 100", rep.Summary, len(rep.Executions), rep.Version, want)
	}
	type expect struct{ outcome, diverges, live string }
	byKind := map[string]expect{
		"a": {wire.OutcomeSame, "", ""},
		"z": {wire.OutcomeSame, "", ""},
		"b": {wire.OutcomeWouldComplete, "fetch", ""},
		"c": {wire.OutcomeNeedsLive, "fetch", "fetch"},
	}
	var wouldComplete []int64
	for _, e := range rep.Executions {
		kind := s.kindOf[int64(e.ExecutionID)]
		w := byKind[kind]
		if e.Outcome != w.outcome || string(e.DivergesAt) != w.diverges || string(e.NeedsLiveAt) != w.live {
			t.Errorf("execution %d (kind %s): %s diverges_at %q needs_live_at %q, want %+v: %+v",
				e.ExecutionID, kind, e.Outcome, e.DivergesAt, e.NeedsLiveAt, w, e.Steps)
		}
		if kind == "b" {
			wouldComplete = append(wouldComplete, int64(e.ExecutionID))
		}
	}
	if got := rep.WouldComplete(); fmt.Sprint(got) != fmt.Sprint(wouldComplete) {
		t.Errorf("WouldComplete %v, want %v", got, wouldComplete)
	}

	// The failed ones only, by id: the same answers.
	var failed []wire.ID
	for _, e := range rep.Executions {
		if e.RecordedStatus == "FAILED" && len(failed) < 10 {
			failed = append(failed, e.ExecutionID)
		}
	}
	byID, err := s.cl.WhatIf(ctx, wire.WhatIfRequest{Path: "whatif/prices", Executions: failed})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range byID.Executions {
		if e.ExecutionID != failed[i] || e.Outcome != byKind[s.kindOf[int64(e.ExecutionID)]].outcome {
			t.Errorf("by id: %+v", e)
		}
	}

	// Bad inputs: 4xx naming the field and the fix.
	v2, _ := os.ReadFile("../shared/whatif/testdata/prices-v2.yaml")
	content, _ := json.Marshal(string(v2))
	one := fmt.Sprint(failed[0])
	for _, c := range []struct {
		body   string
		status int
		says   []string
	}{
		{`{"path": "whatif/other", "executions": ["` + one + `"]}`, 422, []string{"executions[0]", "whatif/prices", "whatif/other"}},
		{`{"path": "whatif/prices", "select": {"path": "whatif/other"}}`, 422, []string{"select.path", "whatif/prices", "whatif/other"}},
		{`{"path": "whatif/prices", "version": 99, "executions": ["` + one + `"]}`, 404, []string{"version", "version 99 not found"}},
		{`{"path": "whatif/nowhere", "executions": ["` + one + `"]}`, 404, []string{"path", "register it first"}},
		{`{"content": "workflow: [", "executions": ["` + one + `"]}`, 422, []string{"content"}},
		{`{"content": ` + string(content) + `, "path": "whatif/prices", "executions": ["` + one + `"]}`, 422, []string{"content", "not both"}},
		{`{"path": "whatif/prices"}`, 422, []string{"executions", "select"}},
		{`{"path": "whatif/prices", "executions": ["` + one + `"], "select": {}}`, 422, []string{"select", "not both"}},
		{`{"path": "whatif/prices", "select": {"since": "yesterday"}}`, 422, []string{"select.since", "RFC 3339", "24h"}},
		{`{"path": "whatif/prices", "select": {"since": "1h", "until": "2h"}}`, 422, []string{"select.until", "after select.since"}},
		{`{"path": "whatif/prices", "select": {"status": "DONE"}}`, 422, []string{"select.status", "FAILED"}},
		{`{"path": "whatif/prices", "select": {"limit": 5000}}`, 422, []string{"select.limit"}},
		{`{"path": "whatif/prices", "executions": ["123456789012"]}`, 404, []string{"executions[0]", "not found"}},
		{`{"path": "whatif/prices", "executions": [` + strings.Repeat(`"1",`, 1000) + `"1"]}`, 413, []string{"executions", "1000"}},
	} {
		status, out := s.post(t, c.body)
		msg, _ := out["error"].(string)
		if status != c.status {
			t.Errorf("%.80s: status %d (%s), want %d", c.body, status, msg, c.status)
		}
		for _, w := range c.says {
			if !strings.Contains(msg, w) {
				t.Errorf("%.80s: %q does not say %q", c.body, msg, w)
			}
		}
	}
	// Content (not registered): the same answers as the registered v2.
	status, out := s.post(t, `{"content": `+string(content)+`, "executions": ["`+one+`"]}`)
	if status != 200 || out["version"] != float64(0) {
		t.Errorf("content: %d %v", status, out)
	}

	s.dashboard(t, rep)

	after, err := apitest.CountRows(ctx, s.srv.Store)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the what-if wrote rows: %+v → %+v", before, after)
	}
	if s.w.ToolRuns() != runs || s.svc.hits.Load() != hits {
		t.Errorf("the what-if ran tools: worker %d → %d, service requests %d → %d", runs, s.w.ToolRuns(), hits, s.svc.hits.Load())
	}
	s.fixForward(t, rep)
}

// fixForward is the what-if's sequel (issue 31): the executions it predicted
// would_complete are redriven in bulk under v2 and each completes as
// predicted, with its earlier steps run exactly once in all (start once;
// fetch, which failed, once under v1 and once again; fallback once; store
// never), one request to the service each, and a log replay verifies; a
// what-if of v2 over them afterwards finds each the same as its record.
func (s *whatIfStack) fixForward(t *testing.T, rep *wire.WhatIf) {
	t.Helper()
	ctx := context.Background()
	ids := rep.WouldComplete()
	if len(ids) != 25 {
		t.Fatalf("%d executions predicted would_complete, want 25", len(ids))
	}
	hits := s.svc.hits.Load()
	batch, err := s.cl.RedriveMany(ctx, ids, s.v2)
	if err != nil {
		t.Fatal(err)
	}
	if batch.Redriven != len(ids) || batch.Refused != 0 {
		t.Fatalf("bulk redrive of the predicted ones: %d redriven, %d refused, want %d and 0: %+v", batch.Redriven, batch.Refused, len(ids), batch.Executions)
	}
	st := &stack{cl: s.cl}
	for _, id := range ids {
		view, err := s.cl.Wait(ctx, id, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if view.Status != "COMPLETED" || view.Version != s.v2 {
			t.Errorf("execution %d, predicted would_complete, ended %s (%s) under v%d, want COMPLETED under v%d", id, view.Status, view.Error, view.Version, s.v2)
			continue
		}
		issued := issuedPerStep(st.events(t, id))
		want := map[string]int{"start": 1, "fetch": 2, "fallback": 1}
		if fmt.Sprint(issued) != fmt.Sprint(want) {
			t.Errorf("execution %d: commands per step %v, want %v (earlier steps once in all)", id, issued, want)
		}
		st.verify(t, id)
	}
	if got := s.svc.hits.Load() - hits; got != int64(len(ids)) {
		t.Errorf("the redrives made %d requests to the service, want %d (fetch once each)", got, len(ids))
	}
	var redriven []wire.ID
	for _, id := range ids {
		redriven = append(redriven, wire.ID(id))
	}
	again, err := s.cl.WhatIf(ctx, wire.WhatIfRequest{Path: "whatif/prices", Version: wire.Version(s.v2), Executions: redriven})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range again.Executions {
		if e.RecordedStatus != "COMPLETED" || e.RecordedVersion != s.v2 {
			t.Errorf("a what-if over redriven execution %d reads its record as %s under v%d, want COMPLETED under v%d (the redrive folded)", e.ExecutionID, e.RecordedStatus, e.RecordedVersion, s.v2)
		}
	}
}

// httpChainYAML is a chain of k http steps, each sending the previous
// step's answer on; handled adds the fix of v2 (the last step's error is
// handled).
func httpChainYAML(path, server string, k int, handled bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: chain, path: %s}\nworkload: {n: 0}\nworkflow:\n", path)
	prev := "0"
	for i := 1; i <= k; i++ {
		name := "start"
		if i > 1 {
			name = fmt.Sprintf("s%d", i)
		}
		fmt.Fprintf(&b, "  - step: %s\n    tool: {kind: http, method: GET, url: \"%s/s%d?n={{ workload.n }}&prev={{ %s }}\"}\n", name, server, i, prev)
		if i == k && handled {
			b.WriteString("    spec: {on_error: continue}\n")
		}
		if i < k {
			fmt.Fprintf(&b, "    next: s%d\n", i+1)
		}
		prev = name + ".data.n"
	}
	return b.String()
}

// BenchmarkWhatIfStack (issue 31): a what-if over 1,000 recorded executions
// of a 10-step playbook, through the API and the database, as users run it
// (one in four recorded runs failed at the last step, which v2 handles).
// Reports executions per second and the process's peak heap during the
// what-if (the server runs in this process). Recording the runs takes a
// while; only the what-if is timed.
func BenchmarkWhatIfStack(b *testing.B) {
	const n, k = 1000, 10
	ctx := context.Background()
	srv, err := devserver.Start(ctx, devserver.Options{Getenv: throwawayEnv})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	cl := client.New(srv.URL, "")
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.URL.Query().Get("n")
		if r.URL.Path == fmt.Sprintf("/s%d", k) && (strings.HasSuffix(n, "0") || strings.HasSuffix(n, "5")) { // n ending 0 or 5: a fifth fail
			w.WriteHeader(http.StatusInternalServerError)
		}
		fmt.Fprintf(w, `{"n": %s}`, n)
	}))
	defer ts.Close()
	w, err := worker.Standard{Server: srv.URL, JS: srv.JS, Pool: "bench", ID: "bench-1", Concurrency: 32, Results: srv.Results,
		Logger: slog.New(slog.DiscardHandler)}.Build(ctx)
	if err != nil {
		b.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { _ = w.Run(wctx); close(stopped) }()
	defer func() { stop(); <-stopped }()
	if _, err := cl.Register(ctx, httpChainYAML("bench/whatif", ts.URL, k, false)); err != nil {
		b.Fatal(err)
	}
	ids := make([]int64, n)
	for i := range ids {
		if ids[i], err = cl.Execute(ctx, wire.ExecuteRequest{Path: "bench/whatif", Pool: "bench", Payload: wire.Object{"n": i}}); err != nil {
			b.Fatal(err)
		}
	}
	failed := 0
	for _, id := range ids {
		v, err := cl.WaitSummary(ctx, id, 100*time.Millisecond)
		if err != nil {
			b.Fatal(err)
		}
		if v.Status == "FAILED" {
			failed++
		}
	}
	v2, err := cl.Register(ctx, httpChainYAML("bench/whatif", ts.URL, k, true))
	if err != nil {
		b.Fatal(err)
	}
	peak := heapPeak()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for b.Loop() {
		rep, err := cl.WhatIf(ctx, wire.WhatIfRequest{Path: "bench/whatif", Version: wire.Version(v2.Version), Select: &wire.WhatIfSelect{Limit: n}})
		if err != nil {
			b.Fatal(err)
		}
		if len(rep.Executions) != n || rep.Summary.WouldComplete != failed || rep.Summary.Same != n-failed {
			for _, e := range rep.Executions {
				if e.RecordedStatus == "FAILED" && e.Outcome != wire.OutcomeWouldComplete {
					b.Logf("%+v", e)
					break
				}
			}
			b.Fatalf("summary %+v of %d, want %d would complete", rep.Summary, len(rep.Executions), failed)
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "executions/s")
	// CPU time is what the machine's load does not change.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(n*b.N), "cpu-µs/execution")
	b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MB")
}

// heapPeak samples the live heap every millisecond until its stop is
// called, which returns the peak.
func heapPeak() func() uint64 {
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak.Store(max(peak.Load(), s[0].Value.Uint64()))
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(stop); <-done; return peak.Load() }
}

// dashboard: a failed execution's page offers "What if…"; picking v2 shows
// the report of that execution (would complete, diverging at fetch); the
// report over every failed execution gives the summary. Screenshots:
// whatif-action, whatif-one, whatif-failed (E2E_SCREENSHOTS keeps them).
func (s *whatIfStack) dashboard(t *testing.T, rep *wire.WhatIf) {
	needDashboard(t)
	var fixed, done string
	for _, e := range rep.Executions {
		switch {
		case fixed == "" && e.Outcome == wire.OutcomeWouldComplete:
			fixed = fmt.Sprint(e.ExecutionID)
		case done == "" && e.RecordedStatus == "COMPLETED":
			done = fmt.Sprint(e.ExecutionID)
		}
	}
	b := newBrowser(t, 1280, 900)
	base := s.srv.URL
	// A completed execution has nothing to fix: no "What if…".
	b.run(t, "open a completed execution", chromedp.Navigate(base+"/#/executions/"+done),
		chromedp.WaitVisible(`#graph g.node[data-step="done"][data-state="completed"]`, chromedp.ByQuery))
	var hidden bool
	b.eval(t, "is what-if hidden", `document.querySelector('#whatif-action').hidden`, &hidden)
	if !hidden {
		t.Errorf("a COMPLETED execution offers What if…")
	}
	b.run(t, "open the failed execution", chromedp.Navigate(base+"/#/executions/"+fixed),
		chromedp.Poll(`(document.querySelector('h1') || {}).textContent?.startsWith('Execution `+fixed+` ')`, nil, chromedp.WithPollingTimeout(40*time.Second)),
		chromedp.WaitVisible(`#graph g.node[data-step="fetch"][data-state="failed"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#whatif`, chromedp.ByQuery),
		chromedp.Click(`#whatif`, chromedp.ByQuery),
		chromedp.WaitReady(`#whatif-version option`, chromedp.ByQuery))
	if v := b.attr(t, `#whatif-version`, "id"); v == "" {
		t.Fatal("no version picker")
	}
	var picked string
	b.eval(t, "the version picked", `document.querySelector('#whatif-version').value`, &picked)
	if picked != fmt.Sprint(s.v2) {
		t.Errorf("the picker offers v%s first, want the latest, v%d", picked, s.v2)
	}
	b.shot(t, "whatif-action")
	row := `#whatif-report tr[data-execution="` + fixed + `"]`
	b.run(t, "run the what-if", chromedp.Click(`#whatif-run`, chromedp.ByQuery),
		chromedp.WaitVisible(row, chromedp.ByQuery))
	if got := b.attr(t, row, "data-outcome"); got != wire.OutcomeWouldComplete {
		t.Errorf("the report says %q, want would_complete", got)
	}
	var at, verdict string
	b.run(t, "read the row", chromedp.Text(row+` td.wi-diverges`, &at, chromedp.ByQuery))
	verdict = b.attr(t, row+` .wi-step[data-step="fetch"]`, "data-verdict")
	if at != "fetch" || verdict != wire.VerdictChanged {
		t.Errorf("the report diverges at %q with fetch %q, want fetch changed", at, verdict)
	}
	b.shot(t, "whatif-one")

	// Every failed execution of the path: the summary of the 60.
	b.run(t, "the report of the failed ones", chromedp.Navigate(base+"/#/whatif?path=whatif/prices&version="+fmt.Sprint(s.v2)+"&status=FAILED"),
		chromedp.Poll(`document.querySelectorAll('#whatif-report tr[data-execution]').length === 60`, nil, chromedp.WithPollingTimeout(40*time.Second)))
	var counts map[string]string
	b.eval(t, "read the summary", `Object.fromEntries([...document.querySelectorAll('#whatif-summary [data-outcome]')].map((e) => [e.dataset.outcome, e.textContent]))`, &counts)
	want := map[string]string{"same": "15 same", "would_complete": "25 would complete", "would_fail": "0 would fail", "needs_live": "20 needs a live run"}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("the summary shows %v, want %v", counts, want)
	}
	var liveAt []string
	b.eval(t, "the needs-live rows", `[...document.querySelectorAll('#whatif-report tr[data-outcome="needs_live"] .wi-step[data-verdict="no_record"]')].map((e) => e.dataset.step)`, &liveAt)
	if len(liveAt) != 20 || liveAt[0] != "fetch" {
		t.Errorf("needs-live rows name %v, want fetch 20 times", liveAt)
	}
	b.shot(t, "whatif-failed")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Fatalf("the browser reported %d errors:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
