package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// availability follows whether one database is reachable from this process,
// seeing every statement's and every dial's outcome (it is the pool's pgx
// tracer, wrapping Config.Tracer). An outage is logged twice, not once per
// failed request: when the first failure shows it and when the first success
// after it ends it. When it ends, a shard database records that it is
// reachable again (MarkReachable), so its leases get a lease's time before
// they can expire: their holders could not heartbeat meanwhile. A failover
// that left the pool on a read-only server resets the pool, so the next
// dials reach the new writer.
type availability struct {
	name  string // "cluster database", "shard 1", "cluster database and shard 0"
	log   *slog.Logger
	inner pgx.QueryTracer
	pool  *pgxpool.Pool
	shard bool // the database has shard_info (MarkReachable)

	down     atomic.Bool
	closed   atomic.Bool
	mu       sync.Mutex
	since    time.Time
	failures int
	// heldUp: every failure of this outage was a refused slot (53300).
	// The server kept serving the sessions it had, heartbeats included,
	// so its end moves no lease (MarkReachable): one process near
	// max_connections would otherwise hold every lease open.
	heldUp bool
}

func newAvailability(log *slog.Logger, inner pgx.QueryTracer) *availability {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &availability{log: log, inner: inner}
}

// observe notes the outcome of a statement (dial false) or of a dial. A
// statement that loses its connection is not an outage by itself (one
// session ended; the pool replaces it): a dial that fails is, as is a
// server that answers it cannot serve now.
func (a *availability) observe(err error, dial bool) {
	switch {
	case err == nil:
		if a.down.Load() {
			a.recovered()
		}
	case Failover(err):
		a.failed(err)
		a.pool.Reset()
	case errorClass(err) == classUnavailable, dial && ConnectionLost(err):
		a.failed(err)
	}
}

func (a *availability) failed(err error) {
	a.mu.Lock()
	first := !a.down.Load()
	if first {
		a.down.Store(true)
		a.since, a.failures, a.heldUp = time.Now(), 0, true
	}
	a.failures++
	a.heldUp = a.heldUp && noSlot(err)
	a.mu.Unlock()
	if first {
		a.log.Warn("the database is unreachable; what needs it answers 503 with Retry-After until it is back",
			"database", a.name, "error", err.Error())
		go a.probe()
	}
}

// probe pings the database while it is down, so its return is seen (and
// said, and recorded) when it happens, not at the next request that needs
// it.
func (a *availability) probe() {
	for wait := 500 * time.Millisecond; a.down.Load() && !a.closed.Load(); wait = min(2*wait, 5*time.Second) {
		time.Sleep(wait)
		if a.closed.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a.observe(a.pool.Ping(ctx), true)
		cancel()
	}
}

func (a *availability) recovered() {
	a.mu.Lock()
	if !a.down.Load() {
		a.mu.Unlock()
		return
	}
	a.down.Store(false)
	since, failures, heldUp := a.since, a.failures, a.heldUp
	a.mu.Unlock()
	a.log.Info("the database is reachable again", "database", a.name,
		"down_for", time.Since(since).Round(time.Millisecond).String(), "failed_attempts", failures)
	if a.shard && !heldUp {
		// Not on the statement that saw the recovery: it holds its
		// connection, and may hold locks.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := MarkReachable(ctx, a.pool); err != nil {
				a.log.Warn("recording that the database is reachable again failed; leases that lapsed during the outage may expire before their holders report",
					"database", a.name, "error", err.Error())
			}
		}()
	}
}

// noSlot: the server refused a new session for want of a slot
// (too_many_connections) and still serves the ones it has.
func noSlot(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "53300"
}

// Down reports whether the last outcome seen was an outage.
func (a *availability) Down() bool { return a.down.Load() }

// The pgx tracer interfaces: each outcome is observed, and the wrapped
// tracer (the Counter, say) sees everything as before.

func (a *availability) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if a.inner != nil {
		return a.inner.TraceQueryStart(ctx, conn, data)
	}
	return ctx
}

func (a *availability) TraceQueryEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryEndData) {
	a.observe(data.Err, false)
	if a.inner != nil {
		a.inner.TraceQueryEnd(ctx, conn, data)
	}
}

func (a *availability) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if t, ok := a.inner.(pgx.BatchTracer); ok {
		return t.TraceBatchStart(ctx, conn, data)
	}
	return ctx
}

func (a *availability) TraceBatchQuery(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchQueryData) {
	if t, ok := a.inner.(pgx.BatchTracer); ok {
		t.TraceBatchQuery(ctx, conn, data)
	}
}

func (a *availability) TraceBatchEnd(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchEndData) {
	a.observe(data.Err, false)
	if t, ok := a.inner.(pgx.BatchTracer); ok {
		t.TraceBatchEnd(ctx, conn, data)
	}
}

func (a *availability) TraceConnectStart(ctx context.Context, data pgx.TraceConnectStartData) context.Context {
	if t, ok := a.inner.(pgx.ConnectTracer); ok {
		return t.TraceConnectStart(ctx, data)
	}
	return ctx
}

func (a *availability) TraceConnectEnd(ctx context.Context, data pgx.TraceConnectEndData) {
	a.observe(data.Err, true)
	if t, ok := a.inner.(pgx.ConnectTracer); ok {
		t.TraceConnectEnd(ctx, data)
	}
}

// MarkReachable records that the shard database is reachable again after an
// outage (shard_info.reachable_since): no lease on it expires until a
// lease's time has passed since (lifecycle.Ended), so the holders, which
// could not heartbeat during the outage, report first.
func MarkReachable(ctx context.Context, q Querier) error {
	_, err := q.Exec(ctx, `UPDATE shard_info SET reachable_since = now()`)
	return err
}
