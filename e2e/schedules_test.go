package e2e

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/dev/devstack"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/schedule"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
	"github.com/noetl-go/noetl/shared/worker"
)

// The schedule tests run real `noetl serve` processes, each firing the
// schedules of its database, over their own databases (on the shared
// stack's Postgres server) and their own NATS: a server stopped by one test
// must not be stood in for by another test's.

// schedStack is one database set and NATS, served by `noetl serve`s.
type schedStack struct {
	pg   *devstack.Postgres
	nats *devstack.NATS
	js   jetstream.JetStream
}

func newSchedStack(t *testing.T) *schedStack {
	t.Helper()
	ctx := context.Background()
	pg, err := shared.srv.Postgres.Server().CreateDatabases(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	if err := store.Migrate(ctx, store.Config{ClusterDSN: pg.ClusterDSN, ShardDSNs: pg.ShardDSNs}); err != nil {
		t.Fatal(err)
	}
	n, err := devstack.StartNATS(ctx, devstack.NATSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Shutdown)
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := notify.EnsureStream(ctx, js, notify.StreamOptions{}); err != nil {
		t.Fatal(err)
	}
	return &schedStack{pg: pg, nats: n, js: js}
}

// server is one `noetl serve` process.
type server struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
}

// serve starts `noetl serve` on the stack's databases and NATS.
func (s *schedStack) serve(t *testing.T) *server {
	t.Helper()
	cmd := exec.Command(buildNoetl(t), "serve", "--listen", "127.0.0.1:0", "--database-url", s.pg.ClusterDSN,
		"--shard-urls", strings.Join(s.pg.ShardDSNs, ","), "--nats-url", s.nats.URL(), "--drain-every", "500ms")
	cmd.Env = append(os.Environ(), "NOETL_API_TOKEN=", "NOETL_WORKER_TOKEN=", "NOETL_INTERNAL_API_TOKEN=", "NOETL_INTERNAL_TOKEN=",
		"NOETL_LOG_LEVEL=warn", "NOETL_SERVER_URL=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = testWriter{t}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	srv := &server{cmd: cmd, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "noetl serve: listening on "); ok {
				urls <- u
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() { _ = cmd.Wait(); close(srv.done) }()
	t.Cleanup(srv.stop)
	select {
	case srv.url = <-urls:
	case <-srv.done:
		t.Fatal("noetl serve exited before listening")
	case <-time.After(time.Minute):
		t.Fatal("noetl serve did not start listening within a minute")
	}
	return srv
}

// stop ends the server as an operator would (SIGTERM), then for sure.
func (s *server) stop() {
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}

// workers runs in-process workers against a server until the test ends.
func (s *schedStack) workers(t *testing.T, srv *server) {
	t.Helper()
	w, err := worker.Standard{Server: srv.url, JS: s.js, Pool: notify.PoolShared, ID: t.Name() + "-worker", Concurrency: 4,
		Python: "python3", Logger: slog.New(slog.NewJSONHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

const (
	tickSchedPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: tick, path: e2e/sched/tick}
workflow:
  - step: start
    tool: {kind: noop}
`
	slowSchedPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: slow, path: e2e/sched/slow}
workflow:
  - step: start
    tool: {kind: shell, command: "sleep 2.5"}
`
)

func register(t *testing.T, cl *client.Client, yaml string) string {
	t.Helper()
	r, err := cl.Register(context.Background(), yaml)
	if err != nil {
		t.Fatal(err)
	}
	return r.Path
}

// started lists the due times of the runs a log records, in order.
func started(runs []wire.ScheduleRun) []time.Time {
	var out []time.Time
	for _, r := range runs {
		if r.Outcome == store.RunStarted {
			out = append(out, r.ScheduledAt.Time)
		}
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	return out
}

// scheduledExecutions lists the executions of a path with their due times.
func scheduledExecutions(t *testing.T, cl *client.Client, path string) []wire.ExecutionSummary {
	t.Helper()
	rows, _, err := cl.ListExecutions(context.Background(), map[string][]string{"path": {path}, "limit": {"100"}})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestScheduleIntervalTwoServers: an interval schedule of 1 s served by two
// `noetl serve` processes on one database starts runs whose scheduled_at
// are consecutive due times, none twice (the executions list agrees);
// pausing stops it, and resuming continues from the next due time with no
// burst of the paused ones.
func TestScheduleIntervalTwoServers(t *testing.T) {
	t.Parallel()
	st := newSchedStack(t)
	a, b := st.serve(t), st.serve(t)
	st.workers(t, a)
	cl, clB := client.New(a.url, ""), client.New(b.url, "")
	ctx := context.Background()
	path := register(t, cl, tickSchedPlaybook)
	sc, err := clB.CreateSchedule(ctx, wire.ScheduleRequest{PlaybookPath: new(path), IntervalSeconds: new(int64(1)), Overlap: new(schedule.OverlapAllow)})
	if err != nil {
		t.Fatal(err)
	}
	id := int64(sc.ScheduleID)
	runs := func() []time.Time {
		r, err := cl.AllScheduleRuns(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return started(r)
	}
	waitFor(t, "4 runs", 30*time.Second, func() bool { return len(runs()) >= 4 })

	off, on := false, true
	if _, err := cl.UpdateSchedule(ctx, id, wire.ScheduleRequest{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	before := runs()
	time.Sleep(2500 * time.Millisecond)
	if during := runs(); len(during) != len(before) {
		t.Fatalf("paused schedule ran: %d runs before the pause settled, %d after", len(before), len(during))
	}
	resumed, err := clB.UpdateSchedule(ctx, id, wire.ScheduleRequest{Enabled: &on})
	if err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	if next := resumed.NextRunAt.Time; next.Before(resumedAt.Add(-time.Second)) || next.After(resumedAt.Add(time.Second)) {
		t.Errorf("resumed with next_run_at %s, want the first due time after %s", next, resumedAt)
	}
	waitFor(t, "3 runs after the resume", 30*time.Second, func() bool { return len(runs()) >= len(before)+3 })
	if _, err := cl.UpdateSchedule(ctx, id, wire.ScheduleRequest{Enabled: &off}); err != nil {
		t.Fatal(err)
	}

	all := runs()
	var pre, post []time.Time
	for _, at := range all {
		switch {
		case !at.After(pausedAt):
			pre = append(pre, at)
		case at.After(resumedAt.Add(-time.Second)):
			post = append(post, at)
		default:
			t.Errorf("a run for %s, a due time of the pause (%s to %s): the resume burst", at, pausedAt, resumedAt)
		}
	}
	for _, seq := range [][]time.Time{pre, post} {
		for i := 1; i < len(seq); i++ {
			if seq[i].Sub(seq[i-1]) != time.Second {
				t.Errorf("runs for %s then %s: due times must be consecutive, each once", seq[i-1], seq[i])
			}
		}
	}
	if len(post) < 3 || !post[0].Before(resumedAt.Add(time.Second)) {
		t.Errorf("after the resume: runs %v, want consecutive due times from the first after %s", post, resumedAt)
	}
	// Each run is one execution carrying its schedule and due time: two
	// servers never started one twice.
	execs := scheduledExecutions(t, cl, path)
	seen := map[time.Time]bool{}
	for _, e := range execs {
		if int64(e.ScheduleID) != id || seen[e.ScheduledAt.Time] {
			t.Errorf("execution %d: schedule %d due %s (seen before: %v)", e.ExecutionID, e.ScheduleID, e.ScheduledAt, seen[e.ScheduledAt.Time])
		}
		seen[e.ScheduledAt.Time] = true
	}
	if len(execs) != len(all) {
		t.Errorf("%d executions for %d runs", len(execs), len(all))
	}
	t.Logf("%d runs over two servers: %d before the pause, %d after the resume", len(all), len(pre), len(post))
}

// TestScheduleOverlapSkip: a 1 s schedule of a 2.5 s playbook with overlap
// skip never has two runs going at once; the due times it skipped are
// recorded with the overlap reason.
func TestScheduleOverlapSkip(t *testing.T) {
	t.Parallel()
	st := newSchedStack(t)
	srv := st.serve(t)
	st.workers(t, srv)
	cl := client.New(srv.url, "")
	ctx := context.Background()
	path := register(t, cl, slowSchedPlaybook)
	sc, err := cl.CreateSchedule(ctx, wire.ScheduleRequest{PlaybookPath: new(path), IntervalSeconds: new(int64(1))})
	if err != nil {
		t.Fatal(err)
	}
	if sc.Overlap != schedule.OverlapSkip {
		t.Fatalf("default overlap %q, want skip", sc.Overlap)
	}
	id := int64(sc.ScheduleID)
	waitFor(t, "3 finished runs", 60*time.Second, func() bool {
		n := 0
		for _, e := range scheduledExecutions(t, cl, path) {
			if lifecycle.ExecutionEnded(e.Status) {
				n++
			}
		}
		return n >= 3
	})
	off := false
	if _, err := cl.UpdateSchedule(ctx, id, wire.ScheduleRequest{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	execs := scheduledExecutions(t, cl, path)
	for _, e := range execs {
		if e.Status != "COMPLETED" && e.Status != "RUNNING" {
			t.Errorf("execution %d %s", e.ExecutionID, e.Status)
		}
	}
	slices.SortFunc(execs, func(a, b wire.ExecutionSummary) int { return a.StartedAt.Compare(b.StartedAt.Time) })
	for i := 1; i < len(execs); i++ {
		prev, next := execs[i-1], execs[i]
		if prev.CompletedAt.IsZero() || next.StartedAt.Before(prev.CompletedAt.Time) {
			t.Errorf("execution %d started at %s while %d (ended %s) was going", next.ExecutionID, next.StartedAt, prev.ExecutionID, prev.CompletedAt)
		}
	}
	runs, err := cl.AllScheduleRuns(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for _, r := range runs {
		if r.Outcome == store.RunSkipped {
			if r.Reason != schedule.ReasonOverlap {
				t.Errorf("skipped %s..%s for %q, want the overlap reason", r.ScheduledAt, r.Through, r.Reason)
			}
			skipped += r.Count
		}
	}
	if skipped < 2 {
		t.Errorf("%d due times skipped over %d runs of a 2.5 s playbook every 1 s, want them recorded", skipped, len(execs))
	}
	t.Logf("%d runs, %d due times skipped for overlap", len(execs), skipped)
}

// TestScheduleCatchupAfterOutage: the only server stops for 10 s; started
// again, it skips the due times older than catchup_seconds (3), records
// them, and runs the newer ones: every due time from the first run to the
// last is either run once or recorded as skipped once.
func TestScheduleCatchupAfterOutage(t *testing.T) {
	t.Parallel()
	st := newSchedStack(t)
	srv := st.serve(t)
	st.workers(t, srv)
	cl := client.New(srv.url, "")
	ctx := context.Background()
	path := register(t, cl, tickSchedPlaybook)
	sc, err := cl.CreateSchedule(ctx, wire.ScheduleRequest{PlaybookPath: new(path), IntervalSeconds: new(int64(1)), CatchupSeconds: new(int64(3)),
		Overlap: new(schedule.OverlapAllow)})
	if err != nil {
		t.Fatal(err)
	}
	id := int64(sc.ScheduleID)
	waitFor(t, "2 runs", 30*time.Second, func() bool {
		r, err := cl.AllScheduleRuns(ctx, id)
		return err == nil && len(started(r)) >= 2
	})
	srv.stop()
	stoppedAt := time.Now()
	time.Sleep(10 * time.Second)
	srv = st.serve(t)
	restartedAt := time.Now()
	cl = client.New(srv.url, "")
	var runs []wire.ScheduleRun
	waitFor(t, "runs after the restart", 30*time.Second, func() bool {
		runs, err = cl.AllScheduleRuns(ctx, id)
		ss := started(runs)
		return err == nil && len(ss) > 0 && ss[len(ss)-1].After(restartedAt.Add(time.Second))
	})
	off := false
	if _, err := cl.UpdateSchedule(ctx, id, wire.ScheduleRequest{Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	if runs, err = cl.AllScheduleRuns(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Walk the due times: each is covered by exactly one row.
	covered := map[time.Time]string{}
	var first, last time.Time
	var skips []wire.ScheduleRun
	for _, r := range runs {
		for at := r.ScheduledAt.Time; !at.After(r.Through.Time); at = at.Add(time.Second) {
			if prev, dup := covered[at]; dup {
				t.Errorf("due time %s is recorded twice (%s and %s)", at, prev, r.Outcome)
			}
			covered[at] = r.Outcome
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
		if r.Outcome == store.RunSkipped {
			skips = append(skips, r)
		}
	}
	for at := first; !at.After(last); at = at.Add(time.Second) {
		if covered[at] == "" {
			t.Errorf("due time %s is neither run nor recorded as skipped", at)
		}
	}
	if len(skips) != 1 || skips[0].Reason != schedule.ReasonCatchup {
		t.Fatalf("skipped rows %+v, want one range skipped for the catch-up window", skips)
	}
	sk := skips[0]
	// The outage held ~10 due times; all but the last 3 s of them are old.
	if sk.Count < 5 || sk.ScheduledAt.After(stoppedAt.Add(time.Second)) || !sk.Through.Before(restartedAt.Add(-2*time.Second)) {
		t.Errorf("skipped %d due times %s..%s; the server stopped at %s and came back at %s with catchup_seconds 3",
			sk.Count, sk.ScheduledAt, sk.Through, stoppedAt, restartedAt)
	}
	if covered[sk.Through.Add(time.Second)] != store.RunStarted {
		t.Errorf("the due time after the skipped range (%s) did not run: the ones inside the window must", sk.Through.Add(time.Second))
	}
	t.Logf("outage %s: %d due times skipped (%s..%s), %d runs in all", restartedAt.Sub(stoppedAt).Round(time.Millisecond),
		sk.Count, sk.ScheduledAt.Format(time.TimeOnly), sk.Through.Format(time.TimeOnly), len(started(runs)))
}

// TestScheduleBackfill: a backfill runs every due time of a past range
// once, in order, one after the other under overlap skip; a second backfill
// of the same range starts nothing new.
func TestScheduleBackfill(t *testing.T) {
	t.Parallel()
	st := newSchedStack(t)
	srv := st.serve(t)
	st.workers(t, srv)
	cl := client.New(srv.url, "")
	ctx := context.Background()
	path := register(t, cl, tickSchedPlaybook)
	// Paused: its own due times stay out of the way; a backfill runs anyway.
	sc, err := cl.CreateSchedule(ctx, wire.ScheduleRequest{PlaybookPath: new(path), Cron: new("*/10 * * * *"), Timezone: new("America/New_York"),
		Enabled: new(false)})
	if err != nil {
		t.Fatal(err)
	}
	id := int64(sc.ScheduleID)
	to := time.Now().Add(-time.Hour).Truncate(10 * time.Minute)
	from := to.Add(-40 * time.Minute)
	bf, err := cl.BackfillSchedule(ctx, id, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if bf.DueTimes != 5 || !bf.From.Equal(from) || !bf.To.Equal(to) {
		t.Fatalf("backfill %+v, want the 5 due times %s..%s", bf, from, to)
	}
	if _, err := cl.BackfillSchedule(ctx, id, from, to); client.StatusOf(err) != 409 {
		t.Errorf("a second backfill while one runs: %v, want 409", err)
	}
	done := func() bool {
		s, err := cl.Schedule(ctx, id)
		return err == nil && s.Backfill == nil && s.LastStatus == "COMPLETED"
	}
	waitFor(t, "the backfill", 60*time.Second, done)
	execs := scheduledExecutions(t, cl, path)
	slices.SortFunc(execs, func(a, b wire.ExecutionSummary) int { return a.StartedAt.Compare(b.StartedAt.Time) })
	if len(execs) != 5 {
		t.Fatalf("%d executions, want 5", len(execs))
	}
	for i, e := range execs {
		if want := from.Add(time.Duration(i) * 10 * time.Minute); !e.ScheduledAt.Equal(want) {
			t.Errorf("run %d is for %s, want %s: in order, once each", i, e.ScheduledAt, want)
		}
		if i > 0 && e.StartedAt.Before(execs[i-1].CompletedAt.Time) {
			t.Errorf("run %d started before run %d ended (overlap skip runs a backfill one at a time)", i, i-1)
		}
	}
	if _, err := cl.BackfillSchedule(ctx, id, from, to); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second backfill", 30*time.Second, done)
	if again := scheduledExecutions(t, cl, path); len(again) != 5 {
		t.Errorf("a second backfill of the range: %d executions, want the same 5", len(again))
	}
	runs, err := cl.AllScheduleRuns(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.Origin != schedule.OriginBackfill || r.Outcome != store.RunStarted {
			t.Errorf("log row %+v, want only started backfill runs", r)
		}
	}
}
