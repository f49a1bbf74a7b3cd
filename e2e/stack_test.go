package e2e

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/tools"
	"github.com/noetl-go/noetl/shared/wire"
	"github.com/noetl-go/noetl/shared/worker"
)

// The stack is shared by the package's tests: starting one costs seconds, and
// tests isolate themselves by playbook path and worker pool. TestMain is the
// only place that can hand it to the tests.
var shared *stack

type stack struct {
	srv     *devserver.Server
	cl      *client.Client
	creds   tools.Credentials
	parts   stackParts
	mu      sync.Mutex
	cancels []context.CancelFunc
	done    sync.WaitGroup
}

// lease is short so expiry tests do not wait a minute.
const lease = 3 * time.Second

// parallel is how many of the tests that call t.Parallel run at once unless
// -test.parallel says otherwise. They spend their time waiting on stacks of
// their own (a Postgres starting, a lease running out, a schedule's next due
// time, a link), not on the CPU, so GOMAXPROCS, the default, would leave a
// 2-core machine idle while they wait one after the other.
const parallel = 4

func TestMain(m *testing.M) {
	ctx := context.Background()
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(parallel)); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: -test.parallel: %v\n", err)
			os.Exit(1)
		}
	}
	// The result store and key file are named here, not left to Start, so
	// that a second server over the same stack (defaultLease) uses them too.
	dir, err := os.MkdirTemp("", "noetl-e2e-stack-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
	parts := stackParts{results: (&url.URL{Scheme: "file", Path: filepath.Join(dir, "results")}).String(),
		keyFile: filepath.Join(dir, "keychain.key")}
	env := map[string]string{"NOETL_LEASE_SECONDS": strconv.Itoa(int(lease / time.Second))}
	srv, err := devserver.Start(ctx, devserver.Options{DrainEvery: 500 * time.Millisecond,
		ResultStore: parts.results, KeyFile: parts.keyFile,
		Getenv: func(k string) string {
			if v, ok := env[k]; ok {
				return v
			}
			if k == "NOETL_DATABASE_URL" || k == "NOETL_SHARD_URLS" || k == "NOETL_NATS_URL" || k == "NOETL_SERVER_URL" {
				return "" // always the throwaway parts
			}
			return os.Getenv(k)
		}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: start the stack: %v\n", err)
		os.Exit(1)
	}
	shared = &stack{srv: srv, cl: client.New(srv.URL, ""), parts: parts,
		// R-P4: the conformance credential alias pg_local, here the stack's own
		// database (broken_sql needs a real server to answer 42601).
		creds: tools.CredentialMap{"pg_local": {Kind: "postgres", DSN: srv.ClusterDSN}}}
	code := m.Run()
	shared.stopWorkers()
	if d := defaultLeased; d != nil {
		d.stopWorkers()
		if err := d.srv.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: close the default-lease server: %v\n", err)
		}
	}
	if noetlBin != "" {
		_ = os.RemoveAll(filepath.Dir(noetlBin))
	}
	if err := srv.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: close: %v\n", err)
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// stackParts are the shared stack's result store and keychain key file.
type stackParts struct{ results, keyFile string }

// The default-lease server, started by the first test that asks for it;
// TestMain stops it.
var (
	defaultLeaseOnce sync.Once
	defaultLeased    *stack
	defaultLeaseErr  error
)

// defaultLease is a second API server over the shared stack's Postgres, NATS,
// result store and key file, with the product's default lease
// (NOETL_LEASE_SECONDS unset): for a test whose claim is that a run ends
// within its leases with the product's defaults. On the shared stack's 3 s
// lease that claim would depend on the machine's load (CI's 2 cores busy
// with other packages let a beat land more than 3 s after the last one).
// Leases are rows: the shared stack's sweeps end these at their own time.
func (s *stack) defaultLease(t *testing.T) *stack {
	t.Helper()
	defaultLeaseOnce.Do(func() {
		srv, err := devserver.Start(context.Background(), devserver.Options{DatabaseURL: s.srv.ClusterDSN,
			ShardURLs: strings.Join(s.srv.ShardDSNs, ","), NATSURL: s.srv.NATSURL,
			ResultStore: s.parts.results, KeyFile: s.parts.keyFile, ScheduleEvery: -1,
			Getenv: func(k string) string {
				if k == config.EnvLeaseSeconds {
					return ""
				}
				return throwawayEnv(k)
			}})
		if err != nil {
			defaultLeaseErr = fmt.Errorf("start the default-lease server: %w", err)
			return
		}
		defaultLeased = &stack{srv: srv, cl: client.New(srv.URL, ""), creds: s.creds, parts: s.parts}
	})
	if defaultLeaseErr != nil {
		t.Fatal(defaultLeaseErr)
	}
	if got := defaultLeased.srv.Config.Lease; got != config.DefaultLeaseSeconds*time.Second {
		t.Fatalf("the default-lease server's lease is %s, want the product's default %ds", got, config.DefaultLeaseSeconds)
	}
	return defaultLeased
}

// The CLI binary for tests that need a separate process, built once: linking
// it takes seconds to tens of seconds on a loaded machine, and the tests only
// run it. TestMain removes it.
var (
	noetlOnce sync.Once
	noetlBin  string
	noetlErr  error
)

func buildNoetl(t *testing.T) string {
	t.Helper()
	noetlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "noetl-e2e-bin-")
		if err != nil {
			noetlErr = err
			return
		}
		noetlBin = filepath.Join(dir, "noetl")
		cmd := exec.Command("go", "build", "-o", noetlBin, "./cmd/noetl")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			noetlErr = fmt.Errorf("build noetl: %w\n%s", err, out)
		}
	})
	if noetlErr != nil {
		t.Fatal(noetlErr)
	}
	return noetlBin
}

// startWorkers runs n in-process workers on a pool until the test ends; adjust,
// when given, changes each worker's configuration.
func (s *stack) startWorkers(t testing.TB, pool string, n int, adjust ...func(*worker.Standard)) {
	t.Helper()
	for i := range n {
		std := worker.Standard{Server: s.srv.URL, JS: s.srv.JS, Pool: pool, ID: fmt.Sprintf("%s-%s-%d", t.Name(), pool, i),
			Concurrency: 4, Python: "python3", Credentials: s.creds, Results: s.srv.Results,
			Logger: slog.New(slog.NewJSONHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))}
		for _, a := range adjust {
			a(&std)
		}
		w, err := std.Build(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.mu.Lock()
		s.cancels = append(s.cancels, cancel)
		s.mu.Unlock()
		s.done.Add(1)
		go func() { defer s.done.Done(); _ = w.Run(ctx) }()
		t.Cleanup(cancel)
	}
}

func (s *stack) stopWorkers() {
	s.mu.Lock()
	for _, c := range s.cancels {
		c()
	}
	s.mu.Unlock()
	s.done.Wait()
}

// testWriter sends worker logs to the test log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func (s *stack) register(t testing.TB, file string) string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.cl.Register(context.Background(), string(src))
	if err != nil {
		t.Fatalf("register %s: %v", file, err)
	}
	return r.Path
}

// run executes a catalog path and waits for its end.
func (s *stack) run(t testing.TB, req wire.ExecuteRequest) (int64, *wire.Execution) {
	t.Helper()
	return s.runWith(t, req, s.cl.Wait)
}

// runWith executes a catalog path and waits for its end with wait.
func (s *stack) runWith(t testing.TB, req wire.ExecuteRequest,
	wait func(context.Context, int64, time.Duration) (*wire.Execution, error)) (int64, *wire.Execution) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	id, err := s.cl.Execute(ctx, req)
	if err != nil {
		t.Fatalf("execute %s: %v", req.Path, err)
	}
	view, err := wait(ctx, id, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("execution %d of %s: %v", id, req.Path, err)
	}
	return id, view
}

// events reads an execution's whole log.
func (s *stack) events(t testing.TB, id int64) []wire.Event {
	t.Helper()
	var all []wire.Event
	var after int64
	for {
		page, next, err := s.cl.Events(context.Background(), id, after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if next == 0 || len(page) == 0 {
			return all
		}
		after = next
	}
}

// verify replays the execution with verify=true: the fold of its log must equal
// the live snapshot (issue #6).
func (s *stack) verify(t testing.TB, id int64) {
	t.Helper()
	doc, err := s.cl.Replay(context.Background(), id, map[string][]string{"verify": {"true"}})
	if err != nil {
		t.Fatalf("replay %d: %v", id, err)
	}
	v, _ := doc["verify"].(map[string]any)
	if v["consistent"] != true {
		t.Fatalf("replay of %d is not consistent: %v", id, v["differences"])
	}
}

func step(view *wire.Execution, name string) wire.Step { return view.Steps[name] }

// index is the position of the nth event of a type for a step, or -1.
func index(evs []wire.Event, typ, stepName string, nth int) int {
	for i, e := range evs {
		if e.EventType == typ && string(e.NodeName) == stepName {
			if nth == 0 {
				return i
			}
			nth--
		}
	}
	return -1
}

func count(evs []wire.Event, typ, stepName string) int {
	n := 0
	for _, e := range evs {
		if e.EventType == typ && (stepName == "" || string(e.NodeName) == stepName) {
			n++
		}
	}
	return n
}
