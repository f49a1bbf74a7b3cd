package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
)

// TestLeasesWaitAfterAnOutage (issue 23): a lease that lapsed while the
// database was unreachable is not swept the moment it is back. After
// MarkReachable (a server process saw the outage end) no lease expires, and
// no deadline fails a command, until quiet has passed since; the lock of a
// transaction reads when that was. Without an outage, or after quiet, the
// sweeps take them as before.
func TestLeasesWaitAfterAnOutage(t *testing.T) {
	s, _ := newStore(t, 1)
	ctx := testContext(t)
	sh := s.Shard(0)
	db := sh.Pool()
	_, cmds := issue(t, sh, 2, nil)
	hold(t, sh, cmds[0], "w", -time.Minute) // lapsed
	hold(t, sh, cmds[1], "w", time.Hour)
	mustExec(t, db, `UPDATE command SET deadline_at = now() - interval '10 minutes' WHERE command_id = $1`, cmds[1].CommandID)
	sweep := func(quiet time.Duration) (expired, late int) {
		inTx(t, db, func(tx pgx.Tx) error {
			ended, err := store.LockEndedLeases(ctx, tx, lifecycle.Limits{Lease: quiet, Grace: time.Minute}, nil, 100)
			for _, c := range ended {
				switch c.CommandID {
				case cmds[0].CommandID:
					expired++
				case cmds[1].CommandID:
					late++
				}
			}
			return err
		})
		return expired, late
	}
	// The test database's server started over a lease ago for a 1 ms lease.
	time.Sleep(5 * time.Millisecond)
	if e, l := sweep(time.Millisecond); e != 1 || l != 1 {
		t.Fatalf("before any outage: %d expired, %d past deadline; want 1 and 1", e, l)
	}
	if err := store.MarkReachable(ctx, db); err != nil {
		t.Fatal(err)
	}
	if e, l := sweep(time.Hour); e != 0 || l != 0 {
		t.Fatalf("within an hour's quiet of the outage's end: %d expired, %d past deadline; want none", e, l)
	}
	if e, l := sweep(0); e != 1 || l != 1 {
		t.Fatalf("with no quiet: %d expired, %d past deadline; want 1 and 1", e, l)
	}
	ls := &store.LockSet{Executions: []int64{cmds[0].ExecutionID}}
	tx := lock(t, sh, ls)
	defer tx.Rollback(ctx)
	if since := time.Since(ls.ReachableSince); ls.ReachableSince.IsZero() || since < 0 || since > time.Minute {
		t.Errorf("the lock read the database reachable since %v (%s ago); want the mark just made", ls.ReachableSince, since)
	}
}

// TestTransientErrors: what an outage looks like to a caller, from a real
// server: a refused dial and a session ended by the server are transient
// (503, retried before COMMIT), bad SQL, a missing row and the caller's
// own context are not.
func TestTransientErrors(t *testing.T) {
	s, _ := newStore(t, 0)
	ctx := testContext(t)
	db := s.Cluster()

	_, err := db.Exec(ctx, `SELECT no_such_column FROM shard_info`)
	if err == nil || store.Transient(err) {
		t.Errorf("bad SQL: %v transient %v", err, store.Transient(err))
	}
	if _, err := store.EventIDAt(ctx, db, 1, 1); !errors.Is(err, store.ErrNotFound) || store.Transient(err) {
		t.Errorf("a missing row: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := db.Exec(cancelled, `SELECT 1`); err == nil || store.Transient(err) {
		t.Errorf("the caller's context ended: %v transient %v", err, store.Transient(err))
	}

	// A session the server ends (as a shutdown or a crash does).
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := conn.Conn().PgConn().PID()
	if _, err := db.Exec(ctx, `SELECT pg_terminate_backend($1, 10000)`, int64(pid)); err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `SELECT 1`)
	conn.Release()
	if err == nil || !store.Transient(err) || !store.Retryable(err) || !store.ConnectionLost(err) {
		t.Errorf("a session ended by the server: %v (transient %v)", err, store.Transient(err))
	}

	// A dial refused (nothing listens there).
	refused, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=2")
	if err == nil {
		refused.Close(ctx)
		t.Fatal("a dial to port 1 succeeded")
	}
	var connectErr *pgconn.ConnectError
	if !errors.As(err, &connectErr) || !store.Transient(err) {
		t.Errorf("a refused dial: %v (transient %v)", err, store.Transient(err))
	}
}

// TestDeadIdleConnectionIsReplaced (issue 23): connections that died while
// idle in the pool (the server ended them, as a restart does) are never
// handed to a request: the first statements after succeed, each on a
// connection of its own or a new one.
func TestDeadIdleConnectionIsReplaced(t *testing.T) {
	s, _ := newStore(t, 0)
	ctx := testContext(t)
	db := s.Cluster()
	// Three connections, then idle in the pool.
	var conns []*pgxpool.Conn
	for range 3 {
		c, err := db.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	var pids []int64
	for _, c := range conns {
		pids = append(pids, int64(c.Conn().PgConn().PID()))
		c.Release()
	}
	// Ended by the server, from another session, while idle: each says
	// goodbye and closes its socket.
	admin, err := pgx.Connect(ctx, db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, pid := range pids {
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1, 10000)`, pid); err != nil {
			t.Fatal(err)
		}
	}
	// At once (well within the pool's 1 s idle ping), three statements at
	// the same time: none fails, and none ran on a dead connection.
	errs := make(chan error, 3)
	got := make(chan int64, 3)
	for range 3 {
		go func() {
			var pid int64
			errs <- db.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid)
			got <- pid
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("a statement after the sessions ended: %v", err)
		}
		if pid := <-got; slices.Contains(pids, pid) {
			t.Errorf("ran on ended session %d", pid)
		}
	}
}

// TestRefusedSlotsMoveNoLease: a process refused a connection slot (53300,
// as one near max_connections is) saw an outage, and its end recorded the
// shard reachable again, so leases could not end; one such process every
// lease held every lease open (the liveness review of 2026-11-29, F5). The
// server served its other sessions, heartbeats included: only an outage
// with another failure in it moves the leases.
func TestRefusedSlotsMoveNoLease(t *testing.T) {
	noSlot := &pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"}
	lost := &pgconn.PgError{Code: "08006", Message: "connection failure"}
	starting := &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}
	for _, c := range []struct {
		name string
		errs []error
		want bool
	}{
		{"refused slots only", []error{noSlot, noSlot}, false},
		{"a lost connection", []error{lost}, true},
		{"refused slots, then a restart", []error{noSlot, starting}, true},
		{"a restart, then refused slots", []error{starting, noSlot}, true},
	} {
		if got := store.OutageMovesLeases(c.errs...); got != c.want {
			t.Errorf("%s: moves leases %v, want %v", c.name, got, c.want)
		}
	}
}
