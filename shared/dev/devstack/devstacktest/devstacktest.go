// Package devstacktest shares devstack infrastructure among the tests of one test
// binary: one Postgres server, started on first use (or DATABASE_URL's server), in
// which every test gets fresh databases of its own; and an embedded NATS per test.
//
// Use it from a test package:
//
//	func TestMain(m *testing.M) { devstacktest.Main(m) }
//
//	func TestX(t *testing.T) {
//		pg := devstacktest.Postgres(t, 2) // cluster + 2 shards, dropped after the test
//		nats := devstacktest.NATS(t)      // shut down after the test
//	}
//
// A package that prefers to hold the state itself declares an Env in its test code
// and calls env.Run(m) from TestMain. A package with runnable examples passes
// Main a Setup that builds the examples' fixture (an example takes no
// *testing.T).
package devstacktest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/dev/devstack"
)

// Env lazily starts one Postgres server and hands out databases in it.
type Env struct {
	// Options for the server; AdminURL defaults to $DATABASE_URL.
	Options devstack.PostgresOptions

	once   sync.Once
	server *devstack.PostgresServer
	err    error

	mu     sync.Mutex
	closed bool
}

// Postgres returns a fresh cluster database and shards shard databases (0:
// single-database mode) on the shared server, dropped when t ends. Start failures fail
// the test: tests must run against a real Postgres.
func (e *Env) Postgres(t testing.TB, shards int) *devstack.Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, started, err := e.databases(ctx, shards)
	if started != "" {
		t.Logf("devstacktest: %s", started)
	}
	if err != nil {
		t.Fatalf("devstacktest: %v", err)
	}
	t.Cleanup(func() {
		if err := pg.Stop(); err != nil {
			t.Errorf("devstacktest: drop databases: %v", err)
		}
	})
	return pg
}

// Databases is Postgres for a caller without a *testing.T (a Setup): the
// caller drops them (Postgres.Stop).
func (e *Env) Databases(ctx context.Context, shards int) (*devstack.Postgres, error) {
	pg, _, err := e.databases(ctx, shards)
	return pg, err
}

// databases starts the server on first use (started then says how) and
// creates the databases in it.
func (e *Env) databases(ctx context.Context, shards int) (pg *devstack.Postgres, started string, err error) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, "", fmt.Errorf("devstacktest: Env used after Close")
	}
	e.once.Do(func() {
		opts := e.Options
		if opts.AdminURL == "" {
			opts.AdminURL = os.Getenv("DATABASE_URL")
		}
		// The server lives until Close, not until this test's end.
		e.server, e.err = devstack.StartPostgresServer(context.Background(), opts)
		if e.err == nil {
			where := "started"
			if e.server.External() {
				where = "DATABASE_URL reached"
			}
			started = fmt.Sprintf("postgres %s in %s", where, e.server.StartDuration().Round(time.Millisecond))
		}
	})
	if e.err != nil {
		return nil, started, fmt.Errorf("postgres: %w", e.err)
	}
	pg, err = e.server.CreateDatabases(ctx, shards)
	return pg, started, err
}

// NATS starts an embedded JetStream server for t (about 30 ms), shut down when t ends.
func (e *Env) NATS(t testing.TB) *devstack.NATS {
	t.Helper()
	n, err := devstack.StartNATS(context.Background(), devstack.NATSOptions{})
	if err != nil {
		t.Fatalf("devstacktest: %v", err)
	}
	t.Cleanup(n.Shutdown)
	return n
}

// Close stops the server if this Env started one. Idempotent.
func (e *Env) Close() error {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	// Wait for a start in progress (or make later ones no-ops).
	e.once.Do(func() { e.err = fmt.Errorf("devstacktest: closed") })
	if e.server != nil {
		return e.server.Stop()
	}
	return nil
}

// A Setup prepares what a package's examples read before its tests run: an
// example takes no *testing.T, so TestMain builds its fixture (databases from
// the Env, a NATS server) into a package variable the examples use. ctx
// lasts until the tests end; the teardown it returns runs after them.
type Setup func(ctx context.Context, e *Env) (teardown func(), err error)

// Run runs each setup, the tests, the teardowns, then Close; it returns the
// exit code for os.Exit.
func (e *Env) Run(m *testing.M, setups ...Setup) int {
	code := e.run(m, setups)
	if err := e.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func (e *Env) run(m *testing.M, setups []Setup) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, setup := range setups {
		teardown, err := setup(ctx, e)
		if err != nil {
			fmt.Fprintf(os.Stderr, "devstacktest: the examples' setup: %v\n", err)
			return 1
		}
		defer teardown()
	}
	return m.Run()
}

// shared is the one per-process Env behind Main, Postgres and NATS. It is package
// state because TestMain has no way to hand a value to the tests it runs, and starting
// a server per test costs ~1.5 s where fresh databases cost ~50 ms. Main sets inMain
// so that a package that forgot TestMain fails loudly instead of leaking the server.
var shared = struct {
	env    Env
	inMain bool
}{}

// Main runs the test binary with the shared Env and exits: call it from
// TestMain, with the setups of the package's examples if it has any.
func Main(m *testing.M, setups ...Setup) {
	shared.inMain = true
	os.Exit(shared.env.Run(m, setups...))
}

// Postgres is Env.Postgres on the shared Env; it needs Main in TestMain.
func Postgres(t testing.TB, shards int) *devstack.Postgres {
	t.Helper()
	if !shared.inMain {
		t.Fatal("devstacktest: add `func TestMain(m *testing.M) { devstacktest.Main(m) }` to use devstacktest.Postgres")
	}
	return shared.env.Postgres(t, shards)
}

// NATS is Env.NATS on the shared Env.
func NATS(t testing.TB) *devstack.NATS {
	t.Helper()
	return shared.env.NATS(t)
}
