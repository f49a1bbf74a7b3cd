// Package store is the Postgres layer: embedded migrations, shard routing, id
// allocation, the pipelined transaction (Tx) every state change is written through
// (Tx.Lock takes a LockSet, Tx.Write a Changes), and plain query functions over a
// Querier for the catalog, executions, events, commands, the outbox and step results.
// It holds no orchestration logic.
//
// Locking rules (R-L5): execution rows first, then command rows (Tx.Lock does both
// in that order); row locks only, never advisory locks (they pin RDS Proxy
// connections). Functions named Lock* must run inside a transaction; the others
// work on a pool, a connection or a transaction.
//
// JSON columns use the shared/jsonx convention: objects are map[string]any, integral
// numbers int64. A nil map is SQL NULL. Times come back in UTC; a zero time.Time is
// SQL NULL.
package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/noetl-go/noetl/shared/ids"
)

// Querier runs statements: a pgx.Tx, *pgx.Conn or *pgxpool.Pool.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// DB is a Querier that can also begin transactions: a *pgx.Conn or *pgxpool.Pool.
type DB interface {
	Querier
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	// ErrNotFound: no such row (or an id on a shard that is not configured).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the row is not in the state the statement requires (a claim of a
	// command that is not PENDING, a heartbeat from a worker that lost the lease).
	ErrConflict = errors.New("conflict")
	// ErrDuplicate: a unique constraint rejected the insert; the transaction is aborted.
	ErrDuplicate = errors.New("duplicate")
	// ErrShardMismatch: a shard database records another index than its position in
	// the configured shard map.
	ErrShardMismatch = errors.New("shard map mismatch")
)

// Config names the databases. With ShardDSNs empty (or ShardDSNs[0] == ClusterDSN)
// the cluster database is also shard 0 and shares its pool.
type Config struct {
	ClusterDSN string
	ShardDSNs  []string
	// MaxConns per pool (default 2: a Lambda instance serves one request at a time).
	MaxConns int
	// MaxConnIdleTime closes idle connections (default 5 min).
	MaxConnIdleTime time.Duration
	// ExecMode overrides pgx's statement mode; zero keeps pgx's default (cached
	// prepared statements). Behind RDS Proxy, pgx.QueryExecModeExec avoids the named
	// prepared statements that pin proxy connections.
	ExecMode pgx.QueryExecMode
	// Tracer, when set, sees every statement of every pool (a *Counter counts
	// round trips, statements and commits).
	Tracer pgx.QueryTracer
	// Logger hears when a database becomes unreachable and when it is back
	// (one line each per outage); nil: nobody.
	Logger *slog.Logger
}

func (c Config) normalized() Config {
	if len(c.ShardDSNs) == 0 {
		c.ShardDSNs = []string{c.ClusterDSN}
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 2
	}
	if c.MaxConnIdleTime <= 0 {
		c.MaxConnIdleTime = 5 * time.Minute
	}
	return c
}

// Shard is one shard database.
type Shard struct {
	index int
	pool  *pgxpool.Pool
}

// Index is the shard's index, the low 10 bits of every id minted on it.
func (s *Shard) Index() int { return s.index }

// Pool is the shard's connection pool.
func (s *Shard) Pool() *pgxpool.Pool { return s.pool }

// Store holds the pools of the cluster database and the shard databases.
type Store struct {
	cluster *pgxpool.Pool
	shards  []*Shard
	pools   []*pgxpool.Pool // distinct pools, closed once each
	avail   []*availability // one per pool
	next    atomic.Uint64   // round robin over shards (R-I3)
	pinned  atomic.Int64    // shard NextShard returns, or -1
}

// Open creates the pools and checks every database: migrations applied, and each
// shard database recording the index of its position in cfg.ShardDSNs. It does not
// migrate (see Migrate): production never migrates on a cold start.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.normalized()
	if cfg.ClusterDSN == "" {
		return nil, errors.New("store: no cluster database configured")
	}
	if len(cfg.ShardDSNs) > ids.MaxShards {
		return nil, fmt.Errorf("store: %d shards configured, at most %d", len(cfg.ShardDSNs), ids.MaxShards)
	}
	s := &Store{}
	s.pinned.Store(-1)
	byDSN := map[string]*pgxpool.Pool{}
	availOf := map[*pgxpool.Pool]*availability{}
	pool := func(dsn, role string) (*pgxpool.Pool, error) {
		if p, ok := byDSN[dsn]; ok {
			availOf[p].name += " and " + role
			return p, nil
		}
		pc, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return nil, err
		}
		pc.MaxConns = int32(cfg.MaxConns)
		pc.MaxConnIdleTime = cfg.MaxConnIdleTime
		if cfg.ExecMode != 0 {
			pc.ConnConfig.DefaultQueryExecMode = cfg.ExecMode
		} else {
			// Every statement of the store is a keyed lookup or an ordered
			// index scan. A prepared statement's generic plan is made when it
			// is first run and kept until ANALYZE: made while a table was
			// small (every new database), it scans the whole table, and keeps
			// doing so as the table grows to millions of rows. Without seq
			// scans every plan uses its index; a table with none is still
			// scanned. (Unprepared statements, ExecMode set, are planned on
			// each run with the table's current size.)
			pc.ConnConfig.RuntimeParams["enable_seqscan"] = "off"
			// That price (disable_cost) lifts any plan that must still scan
			// a table over jit_above_cost: Postgres would JIT-compile such
			// a statement each time it runs, tens of milliseconds for a
			// one-row table. No statement here gains from JIT.
			pc.ConnConfig.RuntimeParams["jit"] = "off"
		}
		av := newAvailability(cfg.Logger, cfg.Tracer)
		av.name = role
		pc.ConnConfig.Tracer = av
		// A connection that died idle (the server restarted, or ended it)
		// is found by a look at its socket, not a round trip, and replaced.
		pc.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) {
			return socketAlive(c.PgConn().Conn()), nil
		}
		p, err := pgxpool.NewWithConfig(ctx, pc) // connects lazily
		if err != nil {
			return nil, err
		}
		av.pool = p
		byDSN[dsn], availOf[p] = p, av
		s.pools, s.avail = append(s.pools, p), append(s.avail, av)
		return p, nil
	}
	var err error
	if s.cluster, err = pool(cfg.ClusterDSN, "cluster database"); err != nil {
		return nil, fmt.Errorf("store: cluster database: %w", err)
	}
	for i, dsn := range cfg.ShardDSNs {
		p, err := pool(dsn, fmt.Sprintf("shard %d", i))
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("store: shard %d: %w", i, err)
		}
		availOf[p].shard = true
		s.shards = append(s.shards, &Shard{index: i, pool: p})
	}
	if err := s.verify(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) verify(ctx context.Context) error {
	if err := checkMigrated(ctx, s.cluster, SetCluster); err != nil {
		return fmt.Errorf("store: cluster database: %w", err)
	}
	for _, sh := range s.shards {
		if err := checkMigrated(ctx, sh.pool, SetShard); err != nil {
			return fmt.Errorf("store: shard %d: %w", sh.index, err)
		}
		var recorded int
		if err := sh.pool.QueryRow(ctx, `SELECT shard_index FROM shard_info`).Scan(&recorded); err != nil {
			return fmt.Errorf("store: shard %d: read shard_info: %w", sh.index, err)
		}
		if recorded != sh.index {
			return fmt.Errorf("store: shard %d: %w: the database records shard index %d", sh.index, ErrShardMismatch, recorded)
		}
	}
	return nil
}

func checkMigrated(ctx context.Context, q Querier, set string) error {
	migrations, err := Migrations(set)
	if err != nil {
		return err
	}
	want := migrations[len(migrations)-1].Version
	var have int
	err = q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations WHERE set_name = $1`, set).Scan(&have)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		have, err = 0, nil
	}
	if err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	if have < want {
		return fmt.Errorf("%s migrations at version %d, this binary needs %d: run `noetl migrate`", set, have, want)
	}
	return nil
}

// Close closes every pool.
func (s *Store) Close() {
	for _, a := range s.avail {
		a.closed.Store(true)
	}
	for _, p := range s.pools {
		p.Close()
	}
}

// Unreachable names the databases whose last statement or dial failed for
// an outage (Transient); empty when all are reachable.
func (s *Store) Unreachable() []string {
	var out []string
	for _, a := range s.avail {
		if a.Down() {
			out = append(out, a.name)
		}
	}
	return out
}

// Cluster is the cluster database's pool.
func (s *Store) Cluster() *pgxpool.Pool { return s.cluster }

// NumShards is the number of configured shards.
func (s *Store) NumShards() int { return len(s.shards) }

// Shard returns shard i; i outside 0..NumShards()-1 is a bug and panics.
func (s *Store) Shard(i int) *Shard {
	if i < 0 || i >= len(s.shards) {
		panic(fmt.Sprintf("store: shard %d of %d", i, len(s.shards)))
	}
	return s.shards[i]
}

// ShardFor routes an execution, event or outbox id to its shard by its low bits
// (R-I1). An id of a shard that is not configured wraps ErrNotFound.
func (s *Store) ShardFor(id int64) (*Shard, error) {
	i := ids.ShardOf(id)
	if id <= 0 || i >= len(s.shards) {
		return nil, fmt.Errorf("store: %w: id %d belongs to shard %d, %d configured", ErrNotFound, id, i, len(s.shards))
	}
	return s.shards[i], nil
}

// NextShard picks the shard for a new top-level execution: round robin (R-I3), or the
// pinned shard.
func (s *Store) NextShard() *Shard {
	if p := s.pinned.Load(); p >= 0 {
		return s.shards[p]
	}
	return s.shards[(s.next.Add(1)-1)%uint64(len(s.shards))]
}

// PinShard makes NextShard return shard i (tests); -1 restores round robin.
func (s *Store) PinShard(i int) {
	if i >= len(s.shards) {
		panic(fmt.Sprintf("store: pin shard %d of %d", i, len(s.shards)))
	}
	s.pinned.Store(int64(max(i, -1)))
}

// ShardForKey is the shard for an execute request with an idempotency key: a hash, so
// a repeated key reaches the shard whose unique index holds it (round robin would not).
// Changing the number of shards remaps keys; repeats across such a change are not
// detected.
func (s *Store) ShardForKey(key string) *Shard {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return s.shards[h.Sum64()%uint64(len(s.shards))]
}

// AllocateIDs mints n ids (1..100000) on the shard with index shardIndex, to which q
// must be connected, in one round trip: n nextval calls of the shard sequence, each
// composed with the shard bits (R-I1). Returned ascending. Values are unique across
// concurrent callers and never reused (a rolled-back transaction leaves gaps).
func AllocateIDs(ctx context.Context, q Querier, shardIndex, n int) ([]int64, error) {
	if n < 1 || n > 100000 {
		return nil, fmt.Errorf("store: allocate %d ids: count outside 1..100000", n)
	}
	rows, err := q.Query(ctx, `SELECT nextval('id_seq') AS v FROM generate_series(1, $1) ORDER BY v`, n)
	if err != nil {
		return nil, fmt.Errorf("store: allocate %d ids on shard %d: %w", n, shardIndex, err)
	}
	seqs, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("store: allocate %d ids on shard %d: %w", n, shardIndex, err)
	}
	out := make([]int64, len(seqs))
	for i, v := range seqs {
		out[i] = ids.Compose(v, shardIndex)
	}
	return out, nil
}

// isUniqueViolation reports a unique-constraint error (SQLSTATE 23505).
func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// wrapWrite turns a unique violation into ErrDuplicate (keeping the cause).
func wrapWrite(err error) error {
	if isUniqueViolation(err) {
		return fmt.Errorf("%w: %w", ErrDuplicate, err)
	}
	return err
}

// PoolStats counts the connections of the store's pools (each distinct pool
// once): what the process can still hand out.
type PoolStats struct {
	Max, Total, Acquired, Idle int
}

// PoolStats reads the pools' counts (no I/O).
func (s *Store) PoolStats() PoolStats {
	var p PoolStats
	for _, pool := range s.pools {
		st := pool.Stat()
		p.Max += int(st.MaxConns())
		p.Total += int(st.TotalConns())
		p.Acquired += int(st.AcquiredConns())
		p.Idle += int(st.IdleConns())
	}
	return p
}
