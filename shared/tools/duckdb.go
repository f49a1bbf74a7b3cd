package tools

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// SQLEngine is an embedded SQL database linked into the worker binary: DuckDB
// (shared/tools/duckdb). Its driver needs cgo, so only the binaries built with
// it plug one in (noetl worker, noetl dev, noetl corpus); the Lambda functions
// never link it.
type SQLEngine interface {
	// Open opens the database file at path, creating it when missing
	// (":memory:": a database of its own, in memory).
	Open(ctx context.Context, path string) (SQLDB, error)
}

// SQLDB is an open embedded database, used by one tool run at a time: its
// statements run on one connection, in order.
type SQLDB interface {
	// Exec runs one statement with positional parameters ($1, …, values in the
	// jsonx convention) and returns its entry in NoETL's statement shape (see
	// statementsData): {status, columns, rows, row_count} when it returns
	// rows, else {status, row_count, affected_rows, message}.
	Exec(ctx context.Context, statement string, params []any) (map[string]any, error)
	// Query streams a query's rows to each in batches of at most n (the
	// transfer tool's source); values in the jsonx convention.
	Query(ctx context.Context, query string, n int, each func(columns []string, rows [][]any) error) error
	// Extensions lists the extensions linked into the engine: the only ones a
	// step may install or load.
	Extensions() []string
	Close() error
}

// SQLEngineAsUser is an SQLEngine that can run its databases as the tool
// user (the duckdb engine: in a helper process of the worker's binary running
// as that user), so a step's SQL reads and writes files with that user's
// rights, never the worker's. A registry with a tool user runs its engine
// through AsUser; an engine that cannot is refused (errEngineAsUser).
type SQLEngineAsUser interface {
	SQLEngine
	// AsUser returns the engine running as u, with dataDir (the tools' data
	// directory, which it makes u's) as its working directory. It starts
	// nothing yet; Open does.
	AsUser(u *User, dataDir string, log *slog.Logger) SQLEngine
}

// errEngineAsUser is the error of a duckdb step when the engine cannot run as
// the tool user.
var errEngineAsUser = errors.New("this worker's DuckDB engine cannot run as the tool user, and runs no SQL as the worker's own user " +
	"(it would read and write files the steps may not)")

// sqlEngine picks the engine a registry's duckdb steps use: as the tool user
// when there is one.
func sqlEngine(e SQLEngine, u *User, dataDir string, log *slog.Logger) SQLEngine {
	if e == nil || u == nil {
		return e
	}
	if as, ok := e.(SQLEngineAsUser); ok {
		return as.AsUser(u, dataDir, log)
	}
	return refusedEngine{}
}

type refusedEngine struct{}

func (refusedEngine) Open(context.Context, string) (SQLDB, error) { return nil, errEngineAsUser }

// errNoDuckDB is the error of a duckdb step on a worker without the engine.
var errNoDuckDB = errors.New("this worker has no DuckDB engine: it is linked into noetl binaries built with cgo " +
	"(noetl worker, noetl dev); run the step on such a worker")

// extensionStmt finds statements that would fetch an extension: INSTALL name,
// FORCE INSTALL name, LOAD name (a quoted path is a local file: allowed).
var extensionStmt = regexp.MustCompile(`(?is)^\s*(?:force\s+)?(install|load)\s+([a-z_][a-z0-9_]*)\b`)

// missingExtension finds DuckDB's error for an extension it would have to fetch.
var missingExtension = regexp.MustCompile(`(?i)install it first using "install ([a-z0-9_]+)"|extension "([a-z0-9_]+)" is an existing extension`)

// runDuckDB runs SQL against a DuckDB database file (NoETL's duckdb tool):
// `query` (aliases command, sql, …; a list of statements is joined), its base64
// form or a `script`, statement by statement on one connection. The database is
// `database` (":memory:" for one of the step's own), else a file per execution
// under the worker's data dir, so the steps of one execution share it as
// NoETL's do. The data is NoETL's statement shape, as postgres returns it,
// with the database path. Extensions are those the engine bundles: a step that
// would install or load another (INSTALL httpfs, ATTACH … (TYPE postgres),
// reading s3://) fails naming it, since workers never fetch code at run time
// (R-P3); so does `auth`, which NoETL turns into DuckDB secrets for those
// extensions.
func (r *Registry) runDuckDB(ctx context.Context, it pipeline.Item) toolresult.Envelope {
	fail := func(err error) toolresult.Envelope { return failure(toolresult.KindTool, "duckdb: "+err.Error()) }
	if r.duckdb == nil {
		return fail(errNoDuckDB)
	}
	cfg := it.Config
	script, err := r.sqlSource(ctx, cfg, keyNames(toolkind.DuckDB, "query"), keyNames(toolkind.DuckDB, "query_b64"), keyNames(toolkind.DuckDB, "script"))
	if err != nil {
		return fail(err)
	}
	var params []any
	if v := valueOf(cfg, keyNames(toolkind.DuckDB, "params")...); v != nil {
		list, isList := v.([]any)
		if !isList {
			return fail(fmt.Errorf("params: expected a list (positional $1, $2, …), got %s", jsonx.TypeName(v)))
		}
		params = list
	}
	stmts := splitStatements(script)
	if params != nil && len(stmts) != 1 {
		return fail(fmt.Errorf("params need exactly one statement, the query has %d", len(stmts)))
	}
	if alias, _ := authAlias(cfg); alias != "" || valueOf(cfg, toolkind.CommonNames("auth")...) != nil {
		return fail(errors.New("auth: NoETL turns credentials into DuckDB secrets for its postgres, httpfs and cloud extensions, " +
			"which this worker's DuckDB does not bundle (installing them would download code at run time, which workers never do, R-P3); " +
			"read the other database with a postgres step, or move rows with the transfer tool"))
	}
	path, err := r.duckdbPath(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	ctx, cancel, _, err := withToolTimeout(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	defer cancel()
	db, err := r.duckdb.Open(ctx, path)
	if err != nil {
		return failure(toolresult.KindConnection, fmt.Sprintf("duckdb: open %s: %v", path, err))
	}
	defer db.Close()
	bundled := db.Extensions()
	entries := make([]map[string]any, 0, len(stmts))
	for i, st := range stmts {
		if m := extensionStmt.FindStringSubmatch(st); m != nil && !slices.Contains(bundled, strings.ToLower(m[2])) {
			return fail(offlineExtension(strings.ToLower(m[2]), bundled))
		}
		e, err := db.Exec(ctx, st, params)
		if err != nil {
			if ctx.Err() != nil {
				return ctxEnvelope(ctx, "duckdb: statement cancelled")
			}
			if m := missingExtension.FindStringSubmatch(err.Error()); m != nil {
				return fail(offlineExtension(cmp.Or(m[1], m[2]), bundled))
			}
			return fail(fmt.Errorf("statement %d: %w", i+1, err))
		}
		entries = append(entries, e)
	}
	data := statementsData(entries)
	data["database"] = path
	return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: data}
}

// offlineExtension is the error of a step that needs an extension the engine
// does not bundle.
func offlineExtension(name string, bundled []string) error {
	return fmt.Errorf("the step needs DuckDB's %s extension, which this worker's DuckDB does not bundle; installing it would download code at run time, "+
		"which workers never do (R-P3). Bundled: %s", name, strings.Join(bundled, ", "))
}

// duckdbPath is the database a duckdb step (or a transfer endpoint) uses:
// database when given (a relative path is the worker's), else the execution's
// file under the data dir.
func (r *Registry) duckdbPath(ctx context.Context, cfg map[string]any) (string, error) {
	path, err := stringField(cfg, keyNames(toolkind.DuckDB, "database")...)
	if err != nil {
		return "", err
	}
	if path == ":memory:" {
		return path, nil
	}
	if path != "" {
		// Relative to the worker's directory, wherever the engine runs.
		return filepath.Abs(path)
	}
	id := CallFrom(ctx).ExecutionID
	if id == "" {
		id = "default"
	}
	if strings.ContainsAny(id, `/\`) {
		return "", fmt.Errorf("execution id %q cannot name a file", id)
	}
	return filepath.Join(r.dataDir, "duckdb_"+id+".duckdb"), nil
}
