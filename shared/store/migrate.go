package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// migrationFiles holds the numbered SQL files of both sets; read-only.
//
//go:embed migrations/cluster/*.sql migrations/shard/*.sql
var migrationFiles embed.FS

// Migration sets. With one database configured both apply to it; schema_migrations
// keys rows by set so they do not collide.
const (
	SetCluster = "cluster"
	SetShard   = "shard"
)

// Migration is one embedded SQL file.
type Migration struct {
	Set     string
	Version int    // from the file name's numeric prefix: 0001_x.sql is 1
	Name    string // file name
	SQL     string
}

// Migrations lists a set's migrations in version order. It fails on a file name
// without a numeric prefix, a duplicate version or a gap.
func Migrations(set string) ([]Migration, error) {
	dir := "migrations/" + set
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("store: migrations %s: %w", set, err)
	}
	var out []Migration
	for _, e := range entries {
		prefix, _, ok := strings.Cut(e.Name(), "_")
		version, err := strconv.Atoi(prefix)
		if !ok || err != nil || version <= 0 {
			return nil, fmt.Errorf("store: migration %s/%s: name must start with a positive number and '_'", set, e.Name())
		}
		body, err := fs.ReadFile(migrationFiles, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("store: migration %s/%s: %w", set, e.Name(), err)
		}
		out = append(out, Migration{Set: set, Version: version, Name: e.Name(), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("store: migrations %s: expected version %d, found %s", set, i+1, m.Name)
		}
	}
	return out, nil
}

// Migrate applies the cluster set to cfg's cluster database and the shard set (plus
// the shard_info row) to every shard database, each over its own short connection.
// It is idempotent and safe to run concurrently with itself.
func Migrate(ctx context.Context, cfg Config) error {
	cfg = cfg.normalized()
	if err := migrateDSN(ctx, cfg.ClusterDSN, func(conn DB) error {
		return ApplyMigrations(ctx, conn, SetCluster)
	}); err != nil {
		return fmt.Errorf("store: migrate cluster database: %w", err)
	}
	for i, dsn := range cfg.ShardDSNs {
		if err := migrateDSN(ctx, dsn, func(conn DB) error {
			return MigrateShard(ctx, conn, i)
		}); err != nil {
			return fmt.Errorf("store: migrate shard %d: %w", i, err)
		}
	}
	return nil
}

func migrateDSN(ctx context.Context, dsn string, fn func(DB) error) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return fn(conn)
}

// MigrateShard applies the shard set and records (or checks) the shard index.
func MigrateShard(ctx context.Context, conn DB, shardIndex int) error {
	if err := ApplyMigrations(ctx, conn, SetShard); err != nil {
		return err
	}
	var recorded int
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO shard_info (shard_index) VALUES ($1) ON CONFLICT (singleton) DO NOTHING`, shardIndex); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT shard_index FROM shard_info`).Scan(&recorded)
	})
	if err != nil {
		return fmt.Errorf("record shard index: %w", err)
	}
	if recorded != shardIndex {
		return fmt.Errorf("%w: database records shard index %d, configured at position %d", ErrShardMismatch, recorded, shardIndex)
	}
	return nil
}

// ApplyMigrations applies the set's migrations that the database lacks, each in its own
// transaction that first takes a table lock on schema_migrations. A second migrator
// waits on that lock and then finds the version recorded, so each migration runs
// once. A table lock, not an advisory lock: advisory locks pin RDS Proxy
// connections.
func ApplyMigrations(ctx context.Context, conn DB, set string) error {
	migrations, err := Migrations(set)
	if err != nil {
		return err
	}
	if err := ensureMigrationsTable(ctx, conn); err != nil {
		return err
	}
	applied, err := appliedVersions(ctx, conn, set)
	if err != nil {
		return err
	}
	for _, m := range migrations {
		if applied[m.Version] {
			continue // fast path: no lock when already applied
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			// SHARE ROW EXCLUSIVE conflicts with itself but not with readers.
			if _, err := tx.Exec(ctx, `LOCK TABLE schema_migrations IN SHARE ROW EXCLUSIVE MODE`); err != nil {
				return err
			}
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE set_name = $1 AND version = $2)`, set, m.Version).Scan(&done); err != nil {
				return err
			}
			if done {
				return nil
			}
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (set_name, version, name) VALUES ($1, $2, $3)`, set, m.Version, m.Name)
			return err
		})
		if err != nil {
			return fmt.Errorf("store: migration %s/%s: %w", set, m.Name, err)
		}
	}
	return nil
}

func ensureMigrationsTable(ctx context.Context, conn DB) error {
	const ddl = `CREATE TABLE IF NOT EXISTS schema_migrations (
		set_name   text        NOT NULL,
		version    integer     NOT NULL,
		name       text        NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now(),
		PRIMARY KEY (set_name, version))`
	for attempt := 0; ; attempt++ {
		_, err := conn.Exec(ctx, ddl)
		// Two concurrent IF NOT EXISTS can both pass the check; the loser fails with
		// duplicate_object/duplicate_table or on a catalog unique index. The table
		// exists then: run again to see it.
		var pgErr *pgconn.PgError
		if err != nil && attempt < 3 && errors.As(err, &pgErr) &&
			(pgErr.Code == "23505" || pgErr.Code == "42P07" || pgErr.Code == "42710") {
			continue
		}
		if err != nil {
			return fmt.Errorf("store: create schema_migrations: %w", err)
		}
		return nil
	}
}

func appliedVersions(ctx context.Context, conn DB, set string) (map[int]bool, error) {
	rows, err := conn.Query(ctx, `SELECT version FROM schema_migrations WHERE set_name = $1`, set)
	if err != nil {
		return nil, fmt.Errorf("store: read schema_migrations: %w", err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("store: read schema_migrations: %w", err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}
