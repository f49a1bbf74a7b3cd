package controlplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/noetl-go/noetl/shared/store"
)

// DatabaseState is one database's schema state (GET /api/db/validate): the
// cluster database, or a shard's.
type DatabaseState struct {
	// Name is "cluster" or "shard N".
	Name string
	store.SchemaState
}

// SchemaStates reads the schema of the cluster database and of every shard;
// it writes nothing.
func (s *Service) SchemaStates(ctx context.Context) ([]DatabaseState, error) {
	var out []DatabaseState
	err := s.eachDatabase(func(name, set string, pool *pgxpool.Pool, _ int) error {
		st, err := store.ReadSchemaState(ctx, pool, set)
		out = append(out, DatabaseState{Name: name, SchemaState: st})
		return err
	})
	return out, err
}

// InitSchema applies the migrations this binary carries that a database
// lacks (POST /api/db/init, the admin scope): normally none, as the server
// does not start on a database behind it; idempotent, and safe beside
// another migrator (store.ApplyMigrations). It answers the states after.
func (s *Service) InitSchema(ctx context.Context) ([]DatabaseState, error) {
	err := s.eachDatabase(func(name, set string, pool *pgxpool.Pool, shard int) error {
		if set == store.SetShard {
			return store.MigrateShard(ctx, pool, shard)
		}
		return store.ApplyMigrations(ctx, pool, set)
	})
	if err != nil {
		return nil, err
	}
	return s.SchemaStates(ctx)
}

func (s *Service) eachDatabase(fn func(name, set string, pool *pgxpool.Pool, shard int) error) error {
	if err := fn("cluster", store.SetCluster, s.st.Cluster(), -1); err != nil {
		return fmt.Errorf("cluster database: %w", err)
	}
	for i := range s.st.NumShards() {
		if err := fn(fmt.Sprintf("shard %d", i), store.SetShard, s.st.Shard(i).Pool(), i); err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return nil
}

// An operator's query (POST /api/postgres/execute, the admin scope) runs
// read-only within these bounds.
const (
	SQLTimeoutMS = 30_000
	SQLMaxRows   = 1000
)

// QueryReadOnly runs an operator's read on the cluster database, or on a
// shard's when shard is not nil (store.QueryReadOnly: a read-only
// transaction, rolled back). A statement Postgres refuses is a *SQLError,
// which the API answers as NoETL does (200, status error).
func (s *Service) QueryReadOnly(ctx context.Context, shard *int, schema, sql string) (store.SQLResult, error) {
	pool := s.st.Cluster()
	if shard != nil {
		if *shard < 0 || *shard >= s.st.NumShards() {
			return store.SQLResult{}, Errorf(ErrInvalid, "shard: this server has shards 0..%d, got %d", s.st.NumShards()-1, *shard)
		}
		pool = s.st.Shard(*shard).Pool()
	}
	res, err := store.QueryReadOnly(ctx, pool, schema, sql, SQLTimeoutMS, SQLMaxRows)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, store.ErrNotARead):
		return res, Errorf(ErrInvalid, "query: %v", err)
	case errors.As(err, &pgErr):
		return res, &SQLError{Message: pgErr.Message, Code: pgErr.Code}
	}
	return res, err
}

// SQLError is Postgres' refusal of an operator's statement.
type SQLError struct{ Message, Code string }

func (e *SQLError) Error() string { return e.Message + " (SQLSTATE " + e.Code + ")" }
