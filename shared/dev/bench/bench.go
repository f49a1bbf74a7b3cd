// Package bench measures the step path end to end (`noetl bench`): W
// executions at once of a chain of K noop steps, or one loop of N noop
// iterations, run by the project's worker against a running control plane. It
// reports what a user comparing workflow systems measures first: steps per
// second, the step cycle, execution latency, and the work each step costs
// (Postgres commits, HTTP requests, event rows) with the server's peak memory.
//
// Timings are printed, never asserted: tests assert the work counters.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/wire"
	"github.com/noetl-go/noetl/shared/worker"
)

// Shape is one measurement: W executions of a chain of K noop steps, or (Loop)
// one execution of a loop of K noop iterations with InFlight at once.
type Shape struct {
	W, K     int
	Loop     bool
	InFlight int
	// Protocol is who serves the commands: our worker (Ours), or a client
	// speaking NoETL's workers' protocol (NoETLWorker).
	Protocol Protocol
}

func (s Shape) String() string {
	shape := fmt.Sprintf("%dx%d", s.W, s.K)
	if s.Loop {
		shape = fmt.Sprintf("loop %dx%d", s.K, s.InFlight)
	}
	if s.Protocol != Ours {
		return string(s.Protocol) + " " + shape
	}
	return shape
}

// steps is how many noop commands the shape runs.
func (s Shape) steps() int { return s.W * s.K }

// ParseShape reads "WxK" (W executions × K chained steps).
func ParseShape(s string) (Shape, error) {
	w, k, err := pair(s)
	if err != nil {
		return Shape{}, fmt.Errorf("shape %q: want WxK, W executions of K chained steps (e.g. 50x10): %w", s, err)
	}
	return Shape{W: w, K: k}, nil
}

// ParseNoETL reads "WxK" for a chain served by a client speaking NoETL's
// workers' protocol p.
func ParseNoETL(p Protocol) func(string) (Shape, error) {
	return func(s string) (Shape, error) {
		sh, err := ParseShape(s)
		sh.Protocol = p
		return sh, err
	}
}

// ParseLoop reads "NxM" (one loop of N iterations, M in flight).
func ParseLoop(s string) (Shape, error) {
	n, m, err := pair(s)
	if err != nil {
		return Shape{}, fmt.Errorf("loop %q: want NxM, N iterations with M in flight (e.g. 10000x100): %w", s, err)
	}
	return Shape{W: 1, K: n, Loop: true, InFlight: m}, nil
}

func pair(s string) (int, int, error) {
	a, b, ok := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "x")
	if !ok {
		return 0, 0, errors.New("no 'x'")
	}
	x, err1 := strconv.Atoi(a)
	y, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || x < 1 || y < 1 {
		return 0, 0, errors.New("both numbers must be positive integers")
	}
	return x, y, nil
}

// DefaultShapes are the shapes issue 9 compares with River: a busy chain, a
// long sequential chain (latency), and saturation.
func DefaultShapes() []Shape {
	return []Shape{{W: 50, K: 10}, {W: 1, K: 200}, {W: 500, K: 10}}
}

// Options configures Run.
type Options struct {
	// Server is the control plane's URL; NATSURL its NATS, where the worker
	// pulls notifications.
	Server, NATSURL string
	// Token is sent by the worker (worker scope); APIToken by the load
	// generator (api scope). Empty: an open server.
	Token, APIToken string
	Shapes          []Shape
	// Concurrency is the worker's; default 100, River's MaxWorkers in the
	// peer benchmark (../shared/bench/river-bench.sh), so the two run the
	// same number of steps at once.
	Concurrency int
	// Databases are the server's database URLs (cluster and shards), for the
	// commits per step; none: not measured.
	Databases []string
	// ServerPID is the server process, for its peak RSS; 0: not measured.
	ServerPID int
	// Warmup runs a small shape first, not reported.
	Warmup bool
	// Reps runs every shape this many times, in rounds (each shape once, then
	// again), as the peer's script repeats its shapes; default 1. Summarize
	// gives each shape's median and spread.
	Reps int
	// Progress receives a line per second while a shape runs; nil: none.
	Progress io.Writer
	Logger   *slog.Logger
}

// Result is one shape's figures. Pointers are nil when not measured.
type Result struct {
	Shape string `json:"shape"`
	// Rep is which of the Reps runs of the shape this is, from 1.
	Rep       int     `json:"rep"`
	Protocol  string  `json:"protocol,omitempty"`
	W         int     `json:"w"`
	K         int     `json:"k"`
	Loop      bool    `json:"loop,omitempty"`
	InFlight  int     `json:"in_flight,omitempty"`
	Steps     int     `json:"steps"`
	Completed int     `json:"completed"`
	Seconds   float64 `json:"seconds"`
	// StepsPerSecond is W·K over first start → last terminal (server times).
	StepsPerSecond float64 `json:"steps_per_second"`
	// StepCycle: the issue of step i → the issue of step i+1 (chains only).
	StepCycleP50Ms *float64 `json:"step_cycle_p50_ms,omitempty"`
	StepCycleP99Ms *float64 `json:"step_cycle_p99_ms,omitempty"`
	ExecutionP50Ms float64  `json:"execution_p50_ms"`
	ExecutionP99Ms float64  `json:"execution_p99_ms"`
	// Work per step. Commits are pg_stat_database's (every transaction of
	// the server's databases: read-only ones, autovacuum's and other
	// sessions' included); server commits, round trips and statements are
	// the server's own count (its /metrics).
	CommitsPerStep       *float64 `json:"commits_per_step,omitempty"`
	ServerCommitsPerStep *float64 `json:"server_commits_per_step,omitempty"`
	// TransactionsPerStep are the server's explicit transactions (BEGIN …
	// COMMIT) per step: its commits less the statements it sent on their own.
	// The executions' starts count too (one each: 1/K per step of a WxK
	// shape).
	TransactionsPerStep *float64 `json:"server_transactions_per_step,omitempty"`
	RoundTripsPerStep   *float64 `json:"db_round_trips_per_step,omitempty"`
	StatementsPerStep   *float64 `json:"db_statements_per_step,omitempty"`
	HTTPRequestsPerStep float64  `json:"http_requests_per_step"`
	EventRowsPerStep    float64  `json:"event_rows_per_step"`
	// ServerPeakRSSMB is the server's largest resident set while the shape ran;
	// ServerRSSGrowthMB the peak of its second half minus the first half's.
	ServerPeakRSSMB   *float64 `json:"server_peak_rss_mb,omitempty"`
	ServerRSSGrowthMB *float64 `json:"server_rss_growth_mb,omitempty"`
	// CPU time per step of the server process, the bench's own process (the
	// worker) and Postgres, while the shape ran: what bounds steps/s when
	// all three share a machine. Nil when not measured (a remote server).
	ServerCPUMsPerStep   *float64 `json:"server_cpu_ms_per_step,omitempty"`
	WorkerCPUMsPerStep   *float64 `json:"worker_cpu_ms_per_step,omitempty"`
	PostgresCPUMsPerStep *float64 `json:"postgres_cpu_ms_per_step,omitempty"`
}

// counting counts the worker's HTTP requests and tells when it is idle.
type counting struct {
	next     http.RoundTripper
	n        atomic.Int64
	inFlight atomic.Int64
	last     atomic.Int64 // unix nanos of the latest request start or end
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	c.inFlight.Add(1)
	c.last.Store(time.Now().UnixNano())
	defer func() { c.inFlight.Add(-1); c.last.Store(time.Now().UnixNano()) }()
	return c.next.RoundTrip(r)
}

// idleFor reports whether the worker has had no request in flight for d.
func (c *counting) idleFor(d time.Duration) bool {
	return c.inFlight.Load() == 0 && time.Since(time.Unix(0, c.last.Load())) >= d
}

// Run measures every shape in turn with one worker and returns their figures.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if o.Concurrency <= 0 {
		o.Concurrency = 100
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	nc, err := nats.Connect(o.NATSURL, nats.Name("noetl-bench"))
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", o.NATSURL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	reqs := &counting{next: http.DefaultTransport.(*http.Transport).Clone()}
	tr := reqs.next.(*http.Transport)
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	w, err := worker.Standard{Server: o.Server, Token: o.Token, APIToken: o.APIToken, JS: js, ID: "bench-worker",
		Concurrency: o.Concurrency, Transport: reqs, Logger: o.Logger}.Build(ctx)
	if err != nil {
		return nil, err
	}
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(wctx) }()
	defer func() { stopWorker(); <-workerDone }()

	// Each NoETL protocol a shape names is served by its own client, on a
	// pool of its own, its requests counted apart.
	served := map[Protocol]*counting{Ours: reqs}
	for _, sh := range o.Shapes {
		if _, ok := served[sh.Protocol]; ok {
			continue
		}
		nreqs := &counting{next: tr.Clone()}
		served[sh.Protocol] = nreqs
		nw := &NoETLWorker{Server: o.Server, Token: o.Token, ID: "bench-" + string(sh.Protocol), Protocol: sh.Protocol,
			Concurrency: o.Concurrency, Transport: nreqs}
		done := make(chan error, 1)
		go func() { done <- nw.Run(wctx, js, poolOf(sh.Protocol)) }()
		defer func() { stopWorker(); <-done }()
		defer func() {
			if n := nw.Refused.Load(); n > 0 {
				o.Logger.Warn("the NoETL-protocol client had requests refused", "protocol", sh.Protocol, "refused", n)
			}
		}()
	}
	cl := client.New(o.Server, o.APIToken)
	commits, err := newCommitCounter(ctx, o.Databases)
	if err != nil {
		return nil, err
	}
	defer commits.close()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	if o.Warmup {
		// A fresh stack's first steps prepare statements, fill caches and
		// grow pools: paid once here, not by the first shape measured.
		fmt.Fprintln(o.Progress, "noetl bench: warming up (20x5, not reported)")
		if err := runShape(ctx, o, cl, reqs, run+"-warmup", Shape{W: 20, K: 5}); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	var out []Result
	for i, m := range rounds(o.Shapes, o.Reps) {
		r, err := measure(ctx, o, cl, served[m.Shape.Protocol], commits, fmt.Sprintf("%s-%d", run, i), m.Shape)
		if err != nil {
			return out, fmt.Errorf("shape %s (run %d): %w", m.Shape, m.Rep, err)
		}
		r.Rep = m.Rep
		out = append(out, *r)
	}
	return out, nil
}

// measurement is one run of a shape: the rep-th.
type measurement struct {
	Shape Shape
	Rep   int
}

// rounds is the order Run measures in: every shape once, then again, reps
// times in all (at least once), so a slow spell of the machine falls on
// every shape rather than on all the runs of one.
func rounds(shapes []Shape, reps int) []measurement {
	var out []measurement
	for rep := 1; rep <= max(reps, 1); rep++ {
		for _, sh := range shapes {
			out = append(out, measurement{sh, rep})
		}
	}
	return out
}

// poolOf is the pool of a protocol's executions; "" is the default pool,
// which our worker serves.
func poolOf(p Protocol) string {
	if p == Ours {
		return ""
	}
	return "bench-" + string(p)
}

// playbook is the YAML of a shape: a chain start → s2 → … → sK, or a loop.
func playbook(path string, sh Shape) string {
	if !sh.Loop {
		return Chain(path, sh.K)
	}
	return fmt.Sprintf("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: bench, path: %s}\n"+
		"workload: {n: %d}\nworkflow:\n  - step: start\n"+
		"    loop: {in: \"{{ range(n) }}\", iterator: i, spec: {mode: parallel, max_in_flight: %d}}\n"+
		"    tool: {kind: noop}\n", path, sh.K, sh.InFlight)
}

// Chain is the YAML of a chain of k noop steps at path: start → s2 → … → sk
// (what the bench runs, and tests count).
func Chain(path string, k int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: bench, path: %s}\nworkflow:\n", path)
	for i := 1; i <= k; i++ {
		name := "start"
		if i > 1 {
			name = "s" + strconv.Itoa(i)
		}
		fmt.Fprintf(&b, "  - step: %s\n    tool: {kind: noop}\n", name)
		if i < k {
			fmt.Fprintf(&b, "    next: s%d\n", i+1)
		}
	}
	return b.String()
}

func measure(ctx context.Context, o Options, cl *client.Client, reqs *counting, commits *commitCounter, run string, sh Shape) (*Result, error) {
	rss := startRSS(o.ServerPID)
	commits0, err := commits.read(ctx)
	if err != nil {
		return nil, err
	}
	db0, haveDB := dbWork(ctx, o.Server, o.APIToken)
	reqs0 := reqs.n.Load()
	cpu0 := sampleCPU(ctx, o.ServerPID, commits)
	if err := runShape(ctx, o, cl, reqs, run, sh); err != nil {
		return nil, err
	}
	ended := time.Now()
	cpu1 := sampleCPU(ctx, o.ServerPID, commits)
	reqs1 := reqs.n.Load()
	db1, _ := dbWork(ctx, o.Server, o.APIToken)
	peak, growth := rss.stop()
	commits1, err := commits.settle(ctx, commits0, ended)
	if err != nil {
		return nil, err
	}

	r := &Result{Shape: sh.String(), Protocol: string(sh.Protocol), W: sh.W, K: sh.K, Loop: sh.Loop, InFlight: sh.InFlight, Steps: sh.steps(),
		HTTPRequestsPerStep: float64(reqs1-reqs0) / float64(sh.steps()), ServerPeakRSSMB: peak, ServerRSSGrowthMB: growth}
	r.ServerCPUMsPerStep, r.WorkerCPUMsPerStep, r.PostgresCPUMsPerStep = cpuPerStep(cpu0, cpu1, sh.steps())
	perStep := func(n int64) *float64 {
		v := float64(n) / float64(sh.steps())
		return &v
	}
	if commits1 >= 0 {
		r.CommitsPerStep = perStep(commits1 - commits0)
	}
	if haveDB {
		r.RoundTripsPerStep, r.StatementsPerStep = perStep(db1.RoundTrips-db0.RoundTrips), perStep(db1.Statements-db0.Statements)
		r.ServerCommitsPerStep = perStep(db1.Commits - db0.Commits)
		r.TransactionsPerStep = perStep(db1.Transactions - db0.Transactions)
	}
	if err := timings(ctx, cl, pathOf(run, sh), sh, r); err != nil {
		return nil, err
	}
	return r, nil
}

// exactPath keeps the rows of path itself: the list's path filter matches a
// substring (NoETL's), and "10x1" is inside "10x10".
func exactPath(rows []wire.ExecutionSummary, path string) []wire.ExecutionSummary {
	out := rows[:0:0]
	for _, r := range rows {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

func pathOf(run string, sh Shape) string {
	return fmt.Sprintf("bench/%s/%s", run, strings.ReplaceAll(sh.String(), " ", "_"))
}

// runShape registers the shape's playbook, starts its W executions at once
// and waits for them to end.
func runShape(ctx context.Context, o Options, cl *client.Client, reqs *counting, run string, sh Shape) error {
	path := pathOf(run, sh)
	if _, err := cl.Register(ctx, playbook(path, sh)); err != nil {
		return fmt.Errorf("register: %w", err)
	}
	errs := make(chan error, sh.W)
	var wg sync.WaitGroup
	for range sh.W {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := cl.Execute(ctx, wire.ExecuteRequest{Path: path, Pool: poolOf(sh.Protocol)}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("execute: %w", err)
	}
	return waitDone(ctx, cl, reqs, path, sh, o.Progress)
}

// waitDone waits until no execution of path is running. It asks the server
// only while the worker is idle (or once a second, for progress), so its own
// reads hardly add to the transactions counted.
func waitDone(ctx context.Context, cl *client.Client, reqs *counting, path string, sh Shape, progress io.Writer) error {
	lastAsk := time.Now()
	for {
		if reqs.idleFor(100*time.Millisecond) || time.Since(lastAsk) >= time.Second {
			lastAsk = time.Now()
			running := 0
			for _, status := range []string{lifecycle.ExecutionRunning, lifecycle.ExecutionFailing} {
				rows, _, err := cl.ListExecutions(ctx, url.Values{"path": {path}, "status": {status}, "limit": {"100"}})
				if err != nil {
					return fmt.Errorf("list executions: %w", err)
				}
				running += len(exactPath(rows, path))
			}
			if running == 0 {
				return nil
			}
			fmt.Fprintf(progress, "noetl bench: %s: %d of %d executions running\n", sh, running, sh.W)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// timings reads the executions and their events back: throughput and latency
// from the server's own timestamps, event rows from the log.
func timings(ctx context.Context, cl *client.Client, path string, sh Shape, r *Result) error {
	var execs []wire.ExecutionSummary
	q := url.Values{"path": {path}, "limit": {"100"}}
	for {
		page, next, err := cl.ListExecutions(ctx, q)
		if err != nil {
			return fmt.Errorf("list executions: %w", err)
		}
		execs = append(execs, exactPath(page, path)...)
		if next == "" {
			break
		}
		q.Set("cursor", next)
	}
	var first, last time.Time
	var durations []float64
	for _, e := range execs {
		start, end := e.StartedAt.Time, e.CompletedAt.Time
		if e.Status == lifecycle.ExecutionCompleted {
			r.Completed++
		}
		if first.IsZero() || start.Before(first) {
			first = start
		}
		if end.After(last) {
			last = end
		}
		durations = append(durations, ms(end.Sub(start)))
	}
	if r.Completed != sh.W {
		return fmt.Errorf("%d of %d executions completed", r.Completed, sh.W)
	}
	r.Seconds = last.Sub(first).Seconds()
	r.StepsPerSecond = float64(sh.steps()) / r.Seconds
	r.ExecutionP50Ms, r.ExecutionP99Ms = percentile(durations, 0.50), percentile(durations, 0.99)

	var (
		mu     sync.Mutex
		cycles []float64
		rows   int
		wg     sync.WaitGroup
		sem    = make(chan struct{}, 8)
		failed error
	)
	for _, e := range execs {
		id := int64(e.ExecutionID)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			n, issued, err := eventsOf(ctx, cl, id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = err
				return
			}
			rows += n
			if !sh.Loop {
				for i := 1; i < len(issued); i++ {
					cycles = append(cycles, ms(issued[i].Sub(issued[i-1])))
				}
			}
		}()
	}
	wg.Wait()
	if failed != nil {
		return failed
	}
	r.EventRowsPerStep = float64(rows) / float64(sh.steps())
	if len(cycles) > 0 {
		p50, p99 := percentile(cycles, 0.50), percentile(cycles, 0.99)
		r.StepCycleP50Ms, r.StepCycleP99Ms = &p50, &p99
	}
	return nil
}

// eventsOf counts an execution's events and returns its command.issued times
// in log order.
func eventsOf(ctx context.Context, cl *client.Client, id int64) (int, []time.Time, error) {
	var (
		after  int64
		n      int
		issued []time.Time
	)
	for {
		evs, next, err := cl.Events(ctx, id, after, 1000)
		if err != nil {
			return 0, nil, fmt.Errorf("events of %d: %w", id, err)
		}
		n += len(evs)
		for _, e := range evs {
			if e.EventType == "command.issued" {
				issued = append(issued, e.CreatedAt.Time)
			}
		}
		if next == 0 || len(evs) == 0 {
			return n, issued, nil
		}
		after = next
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile is the nearest-rank percentile of xs (p in 0..1).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1)+0.5)]
}
