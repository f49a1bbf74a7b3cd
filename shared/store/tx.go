package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Tx is a transaction on one shard that sends its statements in pipelined
// batches: BEGIN travels with the first batch and COMMIT with the last, so a
// transaction that locks and reads, then writes, costs two round trips. The
// cost of a step is round trips, not query work, so the hot paths queue what
// they can (Queue, Lock*, Write) and send it at once (Flush, Commit).
//
// Tx is also a Querier: a direct Exec, Query or QueryRow first sends whatever
// is queued (and BEGIN). A Tx is used by one goroutine.
type Tx struct {
	conn  *pgxpool.Conn
	shard int
	pid   uint32 // the server process (backend) of the connection
	began bool
	ended bool
	batch *pgx.Batch
}

// Begin takes a connection of the shard for a transaction; nothing is sent
// until the first statement.
func (s *Shard) Begin(ctx context.Context) (*Tx, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: begin on shard %d: %w", s.index, err)
	}
	return &Tx{conn: conn, shard: s.index, pid: conn.Conn().PgConn().PID(), batch: &pgx.Batch{}}, nil
}

// PID is the server process serving the transaction (see EndSession).
func (t *Tx) PID() uint32 { return t.pid }

// Queue adds a statement to the next batch; the callbacks set on the returned
// query run when the batch is sent.
func (t *Tx) Queue(sql string, args ...any) *pgx.QueuedQuery {
	if !t.began && t.batch.Len() == 0 {
		t.batch.Queue("begin")
		t.began = true
	}
	return t.batch.Queue(sql, args...)
}

// Flush sends the queued statements (with BEGIN if none was sent yet) in one
// round trip and runs their callbacks. An error leaves the transaction
// failed: roll it back.
func (t *Tx) Flush(ctx context.Context) error {
	if t.ended {
		return errors.New("store: the transaction already ended")
	}
	if t.batch.Len() == 0 {
		return nil
	}
	b := t.batch
	t.batch = &pgx.Batch{}
	if err := t.conn.SendBatch(ctx, b).Close(); err != nil {
		return wrapWrite(err)
	}
	return nil
}

// CommitTimeout bounds the round trip that carries COMMIT. It runs on its
// own: the caller leaving (an HTTP client gone) does not cancel it.
const CommitTimeout = 30 * time.Second

// Commit sends the queued statements and COMMIT in one round trip. Once sent,
// the COMMIT's fate does not depend on ctx: a caller that leaves cannot turn
// a committed transaction into one the server believes failed. An error
// wrapping ErrCommitInDoubt means the connection failed while COMMIT was in
// flight, so the answer does not say whether it committed; any other error
// means it did not.
func (t *Tx) Commit(ctx context.Context) error {
	if t.ended {
		return errors.New("store: the transaction already ended")
	}
	if !t.began && t.batch.Len() == 0 {
		t.release()
		return nil
	}
	t.batch.Queue("commit")
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CommitTimeout)
	defer cancel()
	err := t.Flush(cctx)
	if err != nil {
		t.Rollback(cctx)
		if inDoubt(err) {
			return &commitInDoubt{shard: t.shard, err: err}
		}
		return fmt.Errorf("store: commit on shard %d: %w", t.shard, err)
	}
	t.release()
	return nil
}

// commitInDoubt is ErrCommitInDoubt with its cause (errors.Unwrap gives it).
type commitInDoubt struct {
	shard int
	err   error
}

func (e *commitInDoubt) Error() string {
	return fmt.Sprintf("store: commit on shard %d: %s: %s", e.shard, ErrCommitInDoubt.Error(), e.err.Error())
}
func (e *commitInDoubt) Unwrap() error        { return e.err }
func (e *commitInDoubt) Is(target error) bool { return target == ErrCommitInDoubt }

// EndSession ends the server process pid if it is still in a COMMIT and
// started before startedBefore (not a later session that reuses the number
// after a restart), and waits up to wait for it to exit. After a COMMIT
// whose answer was lost the session may still be in it (waiting for a
// synchronous standby, say): its transaction is not visible to others until
// the commit ends, so what it did can only be read after. Ending the session
// completes a commit under way. It says whether there was such a session.
// Behind a pooling proxy (RDS Proxy) the pid the client knows is not the
// server's, nothing matches, and the caller reads at once.
func EndSession(ctx context.Context, q Querier, pid uint32, startedBefore time.Time, wait time.Duration) (bool, error) {
	var ended bool
	err := q.QueryRow(ctx, `SELECT coalesce(bool_or(pg_terminate_backend(pid, $3)), false) FROM pg_stat_activity
		WHERE pid = $1 AND backend_start < $2 AND lower(btrim(query)) = 'commit'`, int64(pid), startedBefore, wait.Milliseconds()).Scan(&ended)
	if err != nil {
		return false, fmt.Errorf("store: end session %d: %w", pid, err)
	}
	return ended, nil
}

// inDoubt: the commit batch failed without the server saying the
// transaction ended without committing. An ERROR ends it (COMMIT then rolls
// back); nothing sent is nothing done; anything else (a lost connection, a
// FATAL, a timeout) may have come after the commit record was written.
func inDoubt(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		sev := pgErr.SeverityUnlocalized
		if sev == "" {
			sev = pgErr.Severity
		}
		return sev != "ERROR"
	}
	return !pgconn.SafeToRetry(err)
}

// Rollback ends the transaction without its changes; it is a no-op after
// Commit, so defer it.
func (t *Tx) Rollback(ctx context.Context) {
	if t.ended {
		return
	}
	if t.began {
		// A connection left inside a transaction is destroyed by the pool on
		// release, so a failed rollback loses nothing.
		_, _ = t.conn.Exec(context.WithoutCancel(ctx), "rollback")
	}
	t.release()
}

func (t *Tx) release() {
	t.ended = true
	t.conn.Release()
}

// start sends what is queued (and BEGIN) before a direct statement.
func (t *Tx) start(ctx context.Context) error {
	if !t.began {
		t.batch.Queue("begin")
		t.began = true
	}
	return t.Flush(ctx)
}

// Exec runs a statement now (see Querier).
func (t *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.start(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

// Query runs a query now (see Querier).
func (t *Tx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.start(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow runs a single-row query now (see Querier).
func (t *Tx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.start(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// queryRows runs a statement and reads every row it returns with scan; its
// errors name what was read.
func queryRows[T any](ctx context.Context, q Querier, what string, scan func(pgx.Row) (T, error), sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return out, nil
}

// queryMap reads rows of (key, value) pairs into a map; what names the read
// in errors.
func queryMap[K comparable, V any](ctx context.Context, q Querier, what string, sql string, args ...any) (map[K]V, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	out := map[K]V{}
	var (
		k K
		v V
	)
	if _, err := pgx.ForEachRow(rows, []any{&k, &v}, func() error { out[k] = v; return nil }); err != nil {
		return nil, fmt.Errorf("store: %s: %w", what, err)
	}
	return out, nil
}

// found is what reading one row returns: v, or ErrNotFound when there was no
// row, or the error; errors name what was read (format and args).
func found[T any](v T, err error, format string, args ...any) (T, error) {
	if errors.Is(err, pgx.ErrNoRows) {
		return v, fmt.Errorf("store: "+format+": %w", append(args, ErrNotFound)...)
	}
	if err != nil {
		return v, fmt.Errorf("store: "+format+": %w", append(args, err)...)
	}
	return v, nil
}

// deleteOne runs sql, a DELETE of the row what whose id is $1: ErrNotFound
// when there was none.
func deleteOne(ctx context.Context, q Querier, what string, id int64, sql string) error {
	tag, err := q.Exec(ctx, sql, id)
	if err != nil {
		return fmt.Errorf("store: delete %s %d: %w", what, id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store: %s %d: %w", what, id, ErrNotFound)
	}
	return nil
}

// conds is a WHERE clause built a condition at a time, its values numbered
// arguments ($1, $2, …) in the order they are added.
type conds struct {
	where []string
	args  []any
}

// arg adds a value and names its placeholder.
func (c *conds) arg(v any) string {
	c.args = append(c.args, v)
	return fmt.Sprintf("$%d", len(c.args))
}

// add adds a condition.
func (c *conds) add(cond string) { c.where = append(c.where, cond) }

// sql is the clause, " WHERE a AND b", or "" without conditions.
func (c *conds) sql() string {
	if len(c.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.where, " AND ")
}
