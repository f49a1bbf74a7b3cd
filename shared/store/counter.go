package store

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// Counter is a pgx tracer that counts the work the store sends to Postgres:
// round trips, statements, and commits (an explicit COMMIT, or a statement or
// batch sent outside a transaction, which Postgres commits on its own), and
// of those the transactions: the explicit ones, BEGIN … COMMIT, the kind
// that holds locks across round trips. Set it as Config.Tracer; tests assert
// these counts per step where timings would be noise.
type Counter struct {
	roundTrips   atomic.Int64
	statements   atomic.Int64
	commits      atomic.Int64
	transactions atomic.Int64
}

// CounterSnapshot is a Counter's counts at one moment.
type CounterSnapshot struct {
	RoundTrips, Statements, Commits, Transactions int64
}

// Snapshot reads the counts.
func (c *Counter) Snapshot() CounterSnapshot {
	return CounterSnapshot{RoundTrips: c.roundTrips.Load(), Statements: c.statements.Load(), Commits: c.commits.Load(),
		Transactions: c.transactions.Load()}
}

// Sub is the work done between two snapshots.
func (s CounterSnapshot) Sub(before CounterSnapshot) CounterSnapshot {
	return CounterSnapshot{RoundTrips: s.RoundTrips - before.RoundTrips, Statements: s.Statements - before.Statements,
		Commits: s.Commits - before.Commits, Transactions: s.Transactions - before.Transactions}
}

func isStatement(sql, word string) bool {
	return strings.EqualFold(strings.TrimSpace(sql), word)
}

// TraceQueryStart counts a statement sent on its own.
func (c *Counter) TraceQueryStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	c.roundTrips.Add(1)
	c.statements.Add(1)
	switch {
	case isStatement(data.SQL, "commit"):
		c.commits.Add(1)
		c.transactions.Add(1)
	case isStatement(data.SQL, "begin"), isStatement(data.SQL, "rollback"):
	case conn.PgConn().TxStatus() == 'I':
		c.commits.Add(1) // outside a transaction: committed on its own
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *Counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts a batch: one round trip, its statements, and its
// commits (an explicit COMMIT in it, or the whole batch when it is sent
// outside a transaction without BEGIN: Postgres runs it as one).
func (c *Counter) TraceBatchStart(ctx context.Context, conn *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	c.roundTrips.Add(1)
	qs := data.Batch.QueuedQueries
	c.statements.Add(int64(len(qs)))
	for _, q := range qs {
		if isStatement(q.SQL, "commit") {
			c.commits.Add(1)
			c.transactions.Add(1)
		}
	}
	if conn.PgConn().TxStatus() == 'I' && len(qs) > 0 && !isStatement(qs[0].SQL, "begin") {
		c.commits.Add(1)
	}
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (c *Counter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (c *Counter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
