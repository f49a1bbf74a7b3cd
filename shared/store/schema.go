package store

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaState is one database's schema as GET /api/db/validate reports it:
// the migrations applied against those this binary carries, and the tables
// its migrations create, found or missing.
type SchemaState struct {
	Set string
	// Applied is the highest migration version recorded; Wanted the
	// binary's newest.
	Applied, Wanted int
	// Tables are the migrations' tables found, Missing those not found,
	// AllTables every base table of the database's search path.
	Tables, Missing, AllTables []string
}

// Valid reports whether the database holds every migration and table.
func (s SchemaState) Valid() bool { return s.Applied >= s.Wanted && len(s.Missing) == 0 }

var createTableRE = regexp.MustCompile(`(?i)CREATE TABLE (?:IF NOT EXISTS )?([a-z_][a-z0-9_]*)`)

// SchemaTables lists the tables a migration set creates, read from the
// migrations themselves (their one owner), sorted.
func SchemaTables(set string) ([]string, error) {
	ms, err := Migrations(set)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		for _, sub := range createTableRE.FindAllStringSubmatch(m.SQL, -1) {
			out = append(out, sub[1])
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ReadSchemaState reads a database's SchemaState for a migration set; it
// writes nothing.
func ReadSchemaState(ctx context.Context, q Querier, set string) (SchemaState, error) {
	st := SchemaState{Set: set, Tables: []string{}, Missing: []string{}}
	ms, err := Migrations(set)
	if err != nil {
		return st, err
	}
	st.Wanted = ms[len(ms)-1].Version
	want, err := SchemaTables(set)
	if err != nil {
		return st, err
	}
	rows, err := q.Query(ctx, `SELECT table_name::text FROM information_schema.tables
		WHERE table_type = 'BASE TABLE' AND table_schema = ANY (current_schemas(false)) ORDER BY 1`)
	if err != nil {
		return st, fmt.Errorf("store: read tables: %w", err)
	}
	if st.AllTables, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return st, fmt.Errorf("store: read tables: %w", err)
	}
	for _, t := range want {
		if slices.Contains(st.AllTables, t) {
			st.Tables = append(st.Tables, t)
		} else {
			st.Missing = append(st.Missing, t)
		}
	}
	if slices.Contains(st.AllTables, "schema_migrations") {
		if err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations WHERE set_name = $1`, set).Scan(&st.Applied); err != nil {
			return st, fmt.Errorf("store: read schema_migrations: %w", err)
		}
	}
	return st, nil
}

// SQLResult is what a read-only query returned: its columns, rows as arrays
// of values in Postgres' text form (nil for NULL), and whether rows past the
// cap were left out.
type SQLResult struct {
	Columns   []string
	Rows      [][]any
	Truncated bool
}

// QueryReadOnly runs an operator's SQL (POST /api/postgres/execute) in a
// READ ONLY transaction that is rolled back, with the search path schema
// first (a schema that does not exist is skipped by Postgres), under a
// statement timeout; at most maxRows rows are kept. A write is refused by
// Postgres itself.
func QueryReadOnly(ctx context.Context, db *pgxpool.Pool, schema, sql string, timeoutMS, maxRows int) (SQLResult, error) {
	var out SQLResult
	if err := readStatement(sql); err != nil {
		return out, err
	}
	err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('statement_timeout', $1, true)`, fmt.Sprint(timeoutMS)); err != nil {
			return err
		}
		// A superuser (the dev stack's) may still run what a read-only
		// transaction allows a superuser: pg_read_file, lo_export. The
		// statement runs as pg_read_all_data (Postgres 14+) instead, which
		// reads every table and nothing else: a guard, not a boundary, as
		// the session's superuser may set the role back (docs/security.md).
		if _, err := tx.Exec(ctx, `SELECT set_config('role', 'pg_read_all_data', true) FROM pg_roles
			WHERE rolname = current_user AND rolsuper AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'pg_read_all_data')`); err != nil {
			return err
		}
		if schema != "" {
			if _, err := tx.Exec(ctx, `SELECT set_config('search_path', quote_ident($1) || ', ' || current_setting('search_path'), true)`, schema); err != nil {
				return err
			}
		}
		// The extended protocol runs one statement: no COMMIT; DELETE ….
		// Values come as Postgres writes them in text: one rule for every type.
		rows, err := tx.Query(ctx, sql, pgx.QueryExecModeDescribeExec, pgx.QueryResultFormats{pgx.TextFormatCode})
		if err != nil {
			return err
		}
		defer rows.Close()
		for _, f := range rows.FieldDescriptions() {
			out.Columns = append(out.Columns, f.Name)
		}
		out.Rows = [][]any{}
		for rows.Next() {
			if len(out.Rows) == maxRows {
				out.Truncated = true
				break
			}
			raw := rows.RawValues()
			vals := make([]any, len(raw))
			for i, b := range raw {
				if b != nil {
					vals[i] = string(b)
				}
			}
			out.Rows = append(out.Rows, vals)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		return errReadOnlyDone // never commit
	})
	if errors.Is(err, errReadOnlyDone) {
		err = nil
	}
	return out, err
}

// ErrNotARead refuses a statement QueryReadOnly does not run.
var ErrNotARead = errors.New("only a query runs here")

// readStatement admits a statement that only reads by its first word
// (SELECT, WITH, TABLE, VALUES, SHOW, EXPLAIN without ANALYZE), past leading
// comments: beside the read-only transaction, it keeps out what such a
// transaction still allows (COPY … TO PROGRAM, LOCK, LISTEN, session SETs).
func readStatement(sql string) error {
	rest := sql
	for {
		rest = strings.TrimLeft(rest, " \t\r\n")
		switch {
		case strings.HasPrefix(rest, "--"):
			_, rest, _ = strings.Cut(rest, "\n")
			continue
		case strings.HasPrefix(rest, "/*"):
			rest = afterBlockComment(rest)
			continue
		}
		break
	}
	word := ""
	if f := strings.FieldsFunc(rest, func(r rune) bool { return !unicode.IsLetter(r) }); len(f) > 0 {
		word = strings.ToUpper(f[0])
	}
	switch word {
	case "SELECT", "WITH", "TABLE", "VALUES", "SHOW":
		return nil
	case "EXPLAIN":
		if !strings.Contains(strings.ToUpper(rest), "ANALYZE") {
			return nil
		}
	}
	return fmt.Errorf("%w: the statement starts with %q; a read is SELECT, WITH, TABLE, VALUES, SHOW or EXPLAIN (without ANALYZE)", ErrNotARead, word)
}

// afterBlockComment is what follows the block comment sql opens with.
// Postgres nests block comments, so the first "*/" need not end it: an
// unnested reading would take a statement inside the comment for the one
// that runs. An unclosed comment leaves nothing.
func afterBlockComment(sql string) string {
	depth := 0
	for i := 0; i+1 < len(sql); i++ {
		switch sql[i : i+2] {
		case "/*":
			depth++
			i++
		case "*/":
			depth--
			i++
			if depth == 0 {
				return sql[i+1:]
			}
		}
	}
	return ""
}

// errReadOnlyDone rolls back QueryReadOnly's transaction after a success.
var errReadOnlyDone = errors.New("store: read-only query done")
