package tools

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgIdle keeps the postgres tool's connections open between steps, per
// target, so a loop of short statements does not pay a connection (a
// backend started, authentication) per row: on two cores that was most of a
// cursor loop's time. A connection goes back only as it came: after a step
// that succeeded, outside a transaction, on a context still live (a
// cancelled statement's cancel request could otherwise reach the next
// step's), and reset with DISCARD ALL, so no step sees another's settings,
// temporary tables, prepared statements or advisory locks.
type pgIdle struct {
	mu     sync.Mutex
	byKey  map[string][]idleConn // most recently used last
	total  int
	sweep  *time.Timer
	closed bool
}

type idleConn struct {
	conn  *pgconn.PgConn
	since time.Time
}

const (
	// pgIdlePerTarget bounds the idle connections to one target (a worker's
	// concurrency rarely runs more of one loop's rows at once).
	pgIdlePerTarget = 16
	// pgIdleMax bounds them over all targets.
	pgIdleMax = 64
	// pgIdleFor closes a connection no step has used for this long.
	pgIdleFor = 30 * time.Second
	// pgPingAfter: a connection idle this long is pinged before it is used.
	pgPingAfter = time.Second
)

// connect returns an idle connection to pc's target (key names it: every
// input of pc, password included, so credentials never share one) or a new
// one.
func (p *pgIdle) connect(ctx context.Context, key string, pc *pgconn.Config) (*pgconn.PgConn, error) {
	p.mu.Lock()
	if list := p.byKey[key]; len(list) > 0 {
		c := list[len(list)-1]
		p.byKey[key] = list[:len(list)-1]
		p.total--
		p.mu.Unlock()
		// One idle a while is pinged first (the server may have ended it:
		// a restart, idle_session_timeout), so a step is never sent down a
		// dead connection; one in steady use is not.
		if !c.conn.IsClosed() && (time.Since(c.since) < pgPingAfter || c.conn.Ping(ctx) == nil) {
			return c.conn, nil
		}
		closePG(ctx, c.conn)
		return pgconn.ConnectConfig(ctx, pc)
	}
	p.mu.Unlock()
	return pgconn.ConnectConfig(ctx, pc)
}

// release gives a connection back after a step that succeeded on ctx, or
// closes it.
func (p *pgIdle) release(ctx context.Context, key string, conn *pgconn.PgConn) {
	if ctx.Err() != nil || conn.IsClosed() || conn.TxStatus() != 'I' {
		closePG(ctx, conn)
		return
	}
	if _, err := conn.Exec(ctx, "DISCARD ALL").ReadAll(); err != nil {
		closePG(ctx, conn)
		return
	}
	p.mu.Lock()
	if p.closed || len(p.byKey[key]) >= pgIdlePerTarget {
		p.mu.Unlock()
		closePG(ctx, conn)
		return
	}
	var evicted *pgconn.PgConn
	if p.total >= pgIdleMax {
		evicted = p.evictOldest()
	}
	if p.byKey == nil {
		p.byKey = map[string][]idleConn{}
	}
	p.byKey[key] = append(p.byKey[key], idleConn{conn: conn, since: time.Now()})
	p.total++
	if p.sweep == nil {
		p.sweep = time.AfterFunc(pgIdleFor, p.closeIdle)
	}
	p.mu.Unlock()
	if evicted != nil {
		closePG(ctx, evicted)
	}
}

// evictOldest takes out the connection idle longest; p.mu is held.
func (p *pgIdle) evictOldest() *pgconn.PgConn {
	var oldKey string
	var oldest time.Time
	for k, list := range p.byKey {
		if len(list) > 0 && (oldest.IsZero() || list[0].since.Before(oldest)) {
			oldKey, oldest = k, list[0].since
		}
	}
	if oldest.IsZero() {
		return nil
	}
	c := p.byKey[oldKey][0]
	p.byKey[oldKey] = p.byKey[oldKey][1:]
	p.total--
	return c.conn
}

// closeIdle closes the connections idle for pgIdleFor, and comes back while
// some remain.
func (p *pgIdle) closeIdle() {
	p.mu.Lock()
	var stale []*pgconn.PgConn
	cutoff := time.Now().Add(-pgIdleFor)
	for k, list := range p.byKey {
		n := 0
		for n < len(list) && !list[n].since.After(cutoff) {
			stale = append(stale, list[n].conn)
			n++
		}
		p.byKey[k] = list[n:]
		if len(p.byKey[k]) == 0 {
			delete(p.byKey, k)
		}
	}
	p.total -= len(stale)
	p.sweep = nil
	if p.total > 0 && !p.closed {
		p.sweep = time.AfterFunc(pgIdleFor/2, p.closeIdle)
	}
	p.mu.Unlock()
	for _, c := range stale {
		closePG(context.Background(), c)
	}
}

// close closes every idle connection and keeps none from now on.
func (p *pgIdle) close() {
	p.mu.Lock()
	p.closed = true
	if p.sweep != nil {
		p.sweep.Stop()
	}
	var all []*pgconn.PgConn
	for _, list := range p.byKey {
		for _, c := range list {
			all = append(all, c.conn)
		}
	}
	p.byKey, p.total = nil, 0
	p.mu.Unlock()
	for _, c := range all {
		closePG(context.Background(), c)
	}
}
