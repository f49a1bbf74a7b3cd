// Package duckdb is the worker's embedded DuckDB engine (tools.SQLEngine) over
// the maintained cgo driver github.com/duckdb/duckdb-go. The driver needs cgo,
// so only the noetl binary's worker commands link this package (cmd/noetl
// plugs it into the tools); the Lambda functions never import it, and e2e's
// TestBootstrapsStayCGOFree holds them to that.
//
// Databases are opened without fetching extensions: autoinstall is off and
// INSTALL cannot write anywhere, so a statement needing an extension the
// driver does not bundle fails, and the duckdb tool names the extension
// (shared/tools/duckdb.go); the settings are locked, so a step cannot change
// that (see settings). One database file
// is opened once per process and shared by the steps using it at the same time
// (DuckDB locks a file to one process); another process holding it is waited
// for a few seconds, as NoETL's workers wait.
package duckdb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/noetl-go/noetl/shared/tools"
)

// Engine opens DuckDB databases. The zero value is not usable; use New.
type Engine struct {
	mu      sync.Mutex
	dbs     map[string]*shared       // open files by absolute path
	helpers map[string]*helperEngine // the engine as tool users (helper.go)
}

type shared struct {
	db   *sql.DB
	refs int
	exts []string
}

// New returns an engine.
func New() *Engine { return &Engine{dbs: map[string]*shared{}, helpers: map[string]*helperEngine{}} }

var _ tools.SQLEngine = (*Engine)(nil)

// settings are applied to every database opened: never fetch extensions
// (R-P3). DuckDB still downloads on INSTALL, FORCE INSTALL and UPDATE
// EXTENSIONS with autoinstall off, so its extension directory is one that
// can never be made (noExtensionDir): they fail before downloading anything.
// lock_configuration, applied with the rest when the database opens, then
// refuses every SET, RESET and PRAGMA of a setting, so a step cannot turn
// any of these back (SET VARIABLE and search_path still work).
const settings = "autoinstall_known_extensions=false&autoload_known_extensions=true&allow_community_extensions=false" +
	"&extension_directory=" + noExtensionDir + "&lock_configuration=true"

// noExtensionDir is DuckDB's extension directory: below /dev/null, which is
// no directory, so DuckDB cannot create it to install into.
const noExtensionDir = "/dev/null/noetl-installs-no-extensions"

// explain says why DuckDB refused what settings forbid.
func explain(err error, bundled []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, `directory "/dev/null"`):
		return fmt.Errorf("installing DuckDB extensions (INSTALL, UPDATE EXTENSIONS) is refused: workers never download code at run time (R-P3); "+
			"the bundled ones need no INSTALL: %s", strings.Join(bundled, ", "))
	case strings.Contains(msg, "the configuration has been locked"):
		return fmt.Errorf("%w (the worker locks DuckDB's settings, so a step cannot turn extension downloads on, R-P3)", err)
	}
	return err
}

// Open opens a database file (created when missing; its folder too) or, for
// ":memory:" or "", a new in-memory database of its own.
func (e *Engine) Open(ctx context.Context, path string) (tools.SQLDB, error) {
	if path == "" || path == ":memory:" {
		db, err := sql.Open("duckdb", "?"+settings)
		if err != nil {
			return nil, err
		}
		return e.conn(ctx, &shared{db: db, refs: 1}, "")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.dbs[abs]
	if s == nil {
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return nil, err
		}
		db, err := openFile(ctx, abs)
		if err != nil {
			return nil, err
		}
		s = &shared{db: db}
		e.dbs[abs] = s
	}
	s.refs++
	c, err := e.conn(ctx, s, abs)
	if err != nil {
		e.release(s, abs)
		return nil, err
	}
	return c, nil
}

// openFile opens a file, waiting (up to about 8 s) while another process holds
// its lock.
func openFile(ctx context.Context, abs string) (*sql.DB, error) {
	delay := 250 * time.Millisecond
	for attempt := 0; ; attempt++ {
		db, err := sql.Open("duckdb", abs+"?"+settings)
		if err == nil {
			err = db.PingContext(ctx)
			if err == nil {
				return db, nil
			}
			_ = db.Close()
		}
		if !strings.Contains(err.Error(), "lock") || attempt == 5 || ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
		delay *= 2
	}
}

func (e *Engine) conn(ctx context.Context, s *shared, abs string) (*conn, error) {
	c, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	if s.exts == nil {
		exts, err := bundled(ctx, c)
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		s.exts = exts
	}
	return &conn{e: e, s: s, abs: abs, c: c}, nil
}

// bundled lists the extensions linked into the driver (DuckDB calls them
// installed once they are, statically).
func bundled(ctx context.Context, c *sql.Conn) ([]string, error) {
	rows, err := c.QueryContext(ctx, "SELECT extension_name FROM duckdb_extensions() WHERE installed ORDER BY 1")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

// release drops a reference; the last one checkpoints and closes the file.
func (e *Engine) release(s *shared, abs string) error {
	if abs == "" {
		return s.db.Close()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	s.refs--
	if s.refs > 0 {
		return nil
	}
	delete(e.dbs, abs)
	_, cerr := s.db.Exec("CHECKPOINT")
	return errors.Join(cerr, s.db.Close())
}

// conn is one tool run's connection.
type conn struct {
	e   *Engine
	s   *shared
	abs string
	c   *sql.Conn
}

func (c *conn) Extensions() []string { return c.s.exts }

func (c *conn) Close() error {
	err := c.c.Close()
	return errors.Join(err, c.e.release(c.s, c.abs))
}

// rowsStatements are the statement types whose result is rows even when
// they would look like a count.
var rowsStatements = map[duckdb.StmtType]bool{duckdb.STATEMENT_TYPE_SELECT: true, duckdb.STATEMENT_TYPE_EXPLAIN: true,
	duckdb.STATEMENT_TYPE_PRAGMA: true, duckdb.STATEMENT_TYPE_CALL: true, duckdb.STATEMENT_TYPE_RELATION: true}

// Exec runs one statement (see tools.SQLDB).
func (c *conn) Exec(ctx context.Context, statement string, params []any) (map[string]any, error) {
	var out map[string]any
	err := c.c.Raw(func(dc any) error {
		dconn, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		st, err := dconn.PrepareContext(ctx, statement)
		if err != nil {
			return err
		}
		defer st.Close()
		ds := st.(*duckdb.Stmt)
		typ, err := ds.StatementType()
		if err != nil {
			return err
		}
		rows, err := ds.QueryContext(ctx, namedValues(params))
		if err != nil {
			return err
		}
		defer rows.Close()
		cols := rows.Columns()
		batch, err := readRows(rows, cols, 0)
		if err != nil {
			return err
		}
		if !rowsStatements[typ] && len(cols) == 1 && (cols[0] == "Count" || cols[0] == "Success") {
			var n int64
			if cols[0] == "Count" && len(batch) == 1 {
				n, _ = batch[0][0].(int64)
			}
			out = map[string]any{"status": "success", "row_count": n, "affected_rows": n,
				"message": fmt.Sprintf("Command executed. %d rows affected.", n)}
			return nil
		}
		list := make([]any, len(batch))
		for i, row := range batch {
			m := make(map[string]any, len(cols))
			for j, col := range cols {
				m[col] = row[j]
			}
			list[i] = m
		}
		columns := make([]any, len(cols))
		for i, col := range cols {
			columns[i] = col
		}
		out = map[string]any{"status": "success", "columns": columns, "rows": list, "row_count": int64(len(list))}
		return nil
	})
	return out, explain(err, c.s.exts)
}

// Query streams a query's rows (see tools.SQLDB).
func (c *conn) Query(ctx context.Context, query string, n int, each func(columns []string, rows [][]any) error) error {
	return explain(c.c.Raw(func(dc any) error {
		dconn, ok := dc.(*duckdb.Conn)
		if !ok {
			return fmt.Errorf("unexpected driver connection %T", dc)
		}
		rows, err := dconn.QueryContext(ctx, query, nil)
		if err != nil {
			return err
		}
		defer rows.Close()
		cols := rows.Columns()
		for {
			batch, err := readRows(rows, cols, n)
			if err != nil {
				return err
			}
			if len(batch) == 0 {
				return nil
			}
			if err := each(cols, batch); err != nil {
				return err
			}
			if len(batch) < n {
				return nil
			}
		}
	}), c.s.exts)
}

// readRows reads up to n rows (0: all), values converted (see value).
func readRows(rows driver.Rows, cols []string, n int) ([][]any, error) {
	types := make([]string, len(cols))
	if tn, ok := rows.(driver.RowsColumnTypeDatabaseTypeName); ok {
		for i := range cols {
			types[i] = tn.ColumnTypeDatabaseTypeName(i)
		}
	}
	var out [][]any
	dest := make([]driver.Value, len(cols))
	for n == 0 || len(out) < n {
		if err := rows.Next(dest); err != nil {
			if err == io.EOF {
				break
			}
			return nil, err
		}
		row := make([]any, len(cols))
		for i, v := range dest {
			row[i] = value(types[i], v)
		}
		out = append(out, row)
	}
	return out, nil
}

// namedValues binds jsonx values: objects and lists as JSON text.
func namedValues(params []any) []driver.NamedValue {
	out := make([]driver.NamedValue, len(params))
	for i, p := range params {
		switch p.(type) {
		case map[string]any, []any:
			p = jsonText(p)
		}
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: p}
	}
	return out
}
