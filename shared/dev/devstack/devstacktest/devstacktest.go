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
// and calls env.Run(m) from TestMain.
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
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		t.Fatal("devstacktest: Env used after Close")
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
			t.Logf("devstacktest: postgres %s in %s", where, e.server.StartDuration().Round(time.Millisecond))
		}
	})
	if e.err != nil {
		t.Fatalf("devstacktest: postgres: %v", e.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, err := e.server.CreateDatabases(ctx, shards)
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

// Run runs the tests, then Close; it returns the exit code for os.Exit.
func (e *Env) Run(m *testing.M) int {
	code := m.Run()
	if err := e.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// shared is the one per-process Env behind Main, Postgres and NATS. It is package
// state because TestMain has no way to hand a value to the tests it runs, and starting
// a server per test costs ~1.5 s where fresh databases cost ~50 ms. Main sets inMain
// so that a package that forgot TestMain fails loudly instead of leaking the server.
var shared = struct {
	env    Env
	inMain bool
}{}

// Main runs the test binary with the shared Env and exits: call it from TestMain.
func Main(m *testing.M) {
	shared.inMain = true
	os.Exit(shared.env.Run(m))
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
