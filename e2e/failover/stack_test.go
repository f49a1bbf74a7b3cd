package failover

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/wire"
	"github.com/noetl-go/noetl/shared/worker"
)

// Each test here has a stack of its own (Postgres, NATS, server, worker):
// they stop or hold their database. They run in parallel with each other,
// and the package with the others, so the minute of the outage costs
// `make test` little: the machine is idle while the database is down.

// logLines keeps a process's slog JSON lines, for the test to count and to
// wait for.
type logLines struct {
	t     testing.TB
	name  string
	mu    sync.Mutex
	buf   []byte
	lines []map[string]any
	more  chan struct{}
}

func newLogLines(t testing.TB, name string) *logLines {
	return &logLines{t: t, name: name, more: make(chan struct{})}
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := l.buf[:i]
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			m = map[string]any{"msg": string(line), "level": "UNPARSED"}
		}
		l.lines = append(l.lines, m)
		l.t.Logf("%s: %s", l.name, line)
		l.buf = l.buf[i+1:]
	}
	close(l.more)
	l.more = make(chan struct{})
	return len(p), nil
}

// logger is a JSON logger at info into l.
func (l *logLines) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// since returns the lines logged after the first n.
func (l *logLines) since(n int) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]map[string]any(nil), l.lines[min(n, len(l.lines)):]...)
}

// mark is how many lines there are now.
func (l *logLines) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

// wait returns the first line whose msg holds msg; it fails the test when
// ctx ends first.
func (l *logLines) wait(ctx context.Context, msg string) map[string]any {
	l.t.Helper()
	for {
		l.mu.Lock()
		for _, m := range l.lines {
			if s, _ := m["msg"].(string); strings.Contains(s, msg) {
				l.mu.Unlock()
				return m
			}
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			l.t.Fatalf("the %s never logged %q", l.name, msg)
		case <-more:
		}
	}
}

// count counts lines whose msg holds msg.
func count(lines []map[string]any, msg string) int {
	n := 0
	for _, m := range lines {
		if s, _ := m["msg"].(string); strings.Contains(s, msg) {
			n++
		}
	}
	return n
}

// atLeast keeps the lines at level or above (WARN, ERROR).
func atLeast(lines []map[string]any, level string) []map[string]any {
	rank := map[string]int{"DEBUG": 0, "INFO": 1, "WARN": 2, "ERROR": 3, "UNPARSED": 3}
	var out []map[string]any
	for _, m := range lines {
		if l, _ := m["level"].(string); rank[l] >= rank[level] {
			out = append(out, m)
		}
	}
	return out
}

// status counts access lines ("request") per HTTP status.
func statuses(lines []map[string]any) map[int]int {
	out := map[int]int{}
	for _, m := range lines {
		if m["msg"] == "request" {
			s, _ := m["status"].(float64)
			out[int(s)]++
		}
	}
	return out
}

type stack struct {
	srv       *devserver.Server
	cl        *client.Client
	serverLog *logLines
	workerLog *logLines
}

// options of a test's stack.
type options struct {
	lease      time.Duration
	drainEvery time.Duration
	postgres   map[string]string // server settings
}

func startStack(t *testing.T, o options) *stack {
	t.Helper()
	st := &stack{serverLog: newLogLines(t, "server"), workerLog: newLogLines(t, "worker")}
	env := map[string]string{"NOETL_LEASE_SECONDS": strconv.Itoa(int(o.lease / time.Second))}
	// A commit acknowledged is a commit kept, as in production: the test
	// default (off) loses the last commits to a crash.
	settings := map[string]string{"synchronous_commit": "on"}
	for k, v := range o.postgres {
		settings[k] = v
	}
	srv, err := devserver.Start(context.Background(), devserver.Options{DrainEvery: o.drainEvery, Logger: st.serverLog.logger(),
		PostgresSettings: settings, Getenv: func(k string) string {
			switch k {
			case "NOETL_DATABASE_URL", "NOETL_SHARD_URLS", "NOETL_NATS_URL", "NOETL_SERVER_URL":
				return "" // always the throwaway parts
			}
			if v, ok := env[k]; ok {
				return v
			}
			return os.Getenv(k)
		}})
	if err != nil {
		t.Fatalf("start the stack: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	st.srv, st.cl = srv, client.New(srv.URL, "")
	return st
}

// startWorker runs one worker of pool until the test ends.
func (st *stack) startWorker(t *testing.T, pool string, concurrency int) {
	t.Helper()
	w, err := worker.Standard{Server: st.srv.URL, JS: st.srv.JS, Pool: pool, ID: t.Name() + "-" + pool,
		Concurrency: concurrency, Python: "python3", Logger: st.workerLog.logger()}.Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// chainYAML is a chain of steps, each a shell command that sleeps, then
// computes the next value of v from the last: v ← 3v + step number. An
// execution's final v depends on every step having run exactly once, in
// order, with its own input.
func chainYAML(path string, steps int, pause time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: chain, path: %s}\nworkload: {v: 0}\nworkflow:\n", path)
	for i := 1; i <= steps; i++ {
		prev := "v"
		if i > 1 {
			prev = "ctx.v"
		}
		fmt.Fprintf(&b, "  - step: %s\n    tool: {kind: shell, command: \"sleep %.1f; echo {{ %s * 3 + %d }}\"}\n    set: {ctx.v: \"{{ output.stdout | trim | int }}\"}\n",
			stepName(i), pause.Seconds(), prev, i)
		if i < steps {
			fmt.Fprintf(&b, "    next: %s\n", stepName(i+1))
		}
	}
	return b.String()
}

func stepName(i int) string {
	if i == 1 {
		return "start"
	}
	return fmt.Sprintf("s%d", i)
}

// chainResult is what chainYAML computes from v.
func chainResult(v int64, steps int) int64 {
	for i := 1; i <= steps; i++ {
		v = 3*v + int64(i)
	}
	return v
}

// run is a set of executions of one chain.
type run struct {
	path  string
	steps int
	ids   []int64
	input []int64
}

// startChains registers the chain and starts n executions of it in pool.
func (st *stack) startChains(t *testing.T, pool string, n, steps int, pause time.Duration) *run {
	t.Helper()
	ctx := context.Background()
	r := &run{path: "failover/" + strings.ToLower(t.Name()), steps: steps}
	if _, err := st.cl.Register(ctx, chainYAML(r.path, steps, pause)); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		v := int64(i + 1)
		id, err := st.cl.Execute(ctx, wire.ExecuteRequest{Path: r.path, Pool: pool, Payload: map[string]any{"v": v}})
		if err != nil {
			t.Fatal(err)
		}
		r.ids, r.input = append(r.ids, id), append(r.input, v)
	}
	return r
}

// check waits for every execution and checks that each completed with its
// exact result, every step's command was claimed once and ran once (attempt
// 1), and none expired or was retried.
func (st *stack) check(t *testing.T, r *run) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard
	defer cancel()
	for i, id := range r.ids {
		view, err := st.cl.Wait(ctx, id, 200*time.Millisecond)
		if err != nil {
			t.Fatalf("execution %d: %v", id, err)
		}
		want := chainResult(r.input[i], r.steps)
		if view.Status != "COMPLETED" || view.Context["v"] != want {
			t.Errorf("execution %d: %s with v=%v (%v), want COMPLETED with v=%d", id, view.Status, view.Context["v"], view.Error, want)
		}
		evs, next, err := st.cl.Events(ctx, id, 0, 1000) // a chain's log is a few dozen events
		if err != nil || next != 0 {
			t.Fatalf("events of %d: %v (more after %d)", id, err, next)
		}
		claims := map[string]int{}
		for _, e := range evs {
			switch e.EventType {
			case "command.expired", "command.retry":
				t.Errorf("execution %d: %s of %s: a command expired or ran again", id, e.EventType, e.CommandID)
			case "command.claimed":
				claims[string(e.CommandID)]++
				if a := e.Meta["attempt"]; a != int64(1) {
					t.Errorf("execution %d: %s claimed at attempt %v", id, e.CommandID, a)
				}
			}
		}
		if len(claims) != r.steps {
			t.Errorf("execution %d: %d commands claimed, want one per step (%d)", id, len(claims), r.steps)
		}
		for cmd, n := range claims {
			if n != 1 {
				t.Errorf("execution %d: command %s claimed %d times", id, cmd, n)
			}
		}
	}
}

// running counts the commands running now, on every shard.
func (st *stack) running(t *testing.T) int {
	t.Helper()
	n := 0
	for i := range st.srv.Store.NumShards() {
		var c int
		if err := st.srv.Store.Shard(i).Pool().QueryRow(context.Background(),
			`SELECT count(*) FROM command WHERE status = 'RUNNING'`).Scan(&c); err != nil {
			t.Fatal(err)
		}
		n += c
	}
	return n
}
