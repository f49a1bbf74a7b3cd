package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// Transfer chunk sizes: the default, and the largest a step may ask for.
const (
	DefaultChunkSize = 1000
	MaxChunkSize     = 100_000
)

// transfer endpoint types.
const (
	endPostgres = "postgres"
	endDuckDB   = "duckdb"
	endHTTP     = "http"
)

// batchFn receives rows in batches: the source's columns and up to a chunk of
// rows (values in the jsonx convention).
type batchFn func(columns []string, rows [][]any) error

// runTransfer copies rows from a source to a target (NoETL's transfer tool):
// source {type: postgres | duckdb | http, auth, query | url, method, headers,
// data_path, database}, target {type: postgres | duckdb, auth, table | query,
// mapping, database}, chunk_size (default 1000) and mode (append, replace:
// empty the table first, upsert: on conflict of the first column update the
// rest). Rows stream through in chunks, so memory is bounded by the chunk
// whatever the row count: a postgres source is read through a cursor, a duckdb
// one as its engine produces rows, an http one decoded element by element. The
// target is written in one transaction: a transfer that fails leaves it as it
// was. mapping {column: field} picks and renames fields (dotted paths into an
// http record). The data is NoETL's {direction, source_type, target_type, mode,
// rows_transferred, chunks_processed, target_table, columns}.
func (r *Registry) runTransfer(ctx context.Context, it pipeline.Item) toolresult.Envelope {
	fail := func(err error) toolresult.Envelope { return failure(toolresult.KindTool, "transfer: "+err.Error()) }
	cfg := it.Config
	src, err := mapField(cfg, keyNames(toolkind.Transfer, "source")...)
	if err == nil && src == nil {
		err = errors.New("source is required ({type: postgres | duckdb | http, …})")
	}
	if err != nil {
		return fail(err)
	}
	dst, err := mapField(cfg, keyNames(toolkind.Transfer, "target")...)
	if err == nil && dst == nil {
		err = errors.New("target is required ({type: postgres | duckdb, table, …})")
	}
	if err != nil {
		return fail(err)
	}
	chunk := DefaultChunkSize
	if n, ok, err := numberField(cfg, keyNames(toolkind.Transfer, "chunk_size")...); err != nil {
		return fail(err)
	} else if ok {
		if n < 1 || n > MaxChunkSize || n != float64(int(n)) {
			return fail(fmt.Errorf("chunk_size: expected a whole number from 1 to %d, got %v", MaxChunkSize, n))
		}
		chunk = int(n)
	}
	mode, err := stringField(cfg, keyNames(toolkind.Transfer, "mode")...)
	if err != nil {
		return fail(err)
	}
	switch mode {
	case "":
		mode = "append"
	case "append", "replace", "upsert":
	default:
		return fail(fmt.Errorf("mode: expected append, replace or upsert, got %q", mode))
	}
	srcType, err := endpointType(src, "source", endPostgres, endDuckDB, endHTTP)
	if err != nil {
		return fail(err)
	}
	dstType, err := endpointType(dst, "target", endPostgres, endDuckDB)
	if err != nil {
		return fail(err)
	}
	table, _ := stringField(dst, "table")
	custom, _ := stringField(dst, "query")
	if table == "" && custom == "" {
		return fail(errors.New("target.table (or target.query, a statement with $1… per column) is required"))
	}
	mapping, err := mapField(dst, "mapping")
	if err != nil {
		return fail(fmt.Errorf("target.%w", err))
	}
	ctx, cancel, _, err := withToolTimeout(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	defer cancel()

	sink, err := r.openSink(ctx, dstType, dst)
	if err != nil {
		return failure(toolresult.KindConnection, "transfer: target: "+err.Error())
	}
	defer sink.close()
	if mode == "replace" && table != "" {
		if err := sink.exec(ctx, "DELETE FROM "+table, nil); err != nil {
			return fail(fmt.Errorf("target: emptying %s: %w", table, err))
		}
	}
	out := map[string]any{"status": "success", "direction": srcType + "_to_" + dstType, "source_type": srcType, "target_type": dstType,
		"mode": mode, "target_table": table}
	if custom != "" {
		out["mode"], out["target_table"] = "custom", "custom_query"
	}
	var rows, chunks int64
	var columns []string
	write := func(cols []string, batch [][]any) error {
		if mapping != nil {
			cols, batch = mapRows(mapping, cols, batch)
		}
		columns = cols
		if len(batch) == 0 {
			return nil
		}
		if err := sink.write(ctx, table, custom, mode, cols, batch); err != nil {
			return fmt.Errorf("target: %w", err)
		}
		rows += int64(len(batch))
		chunks++
		return nil
	}
	fetched, err := r.readSource(ctx, srcType, src, chunk, write)
	if err == nil {
		err = sink.commit(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctxEnvelope(ctx, "transfer")
		}
		return fail(err)
	}
	out["rows_transferred"], out["chunks_processed"], out["columns"] = rows, chunks, anySlice(columns)
	if srcType == endHTTP {
		out["records_fetched"] = fetched
	}
	return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: out}
}

func endpointType(m map[string]any, what string, allowed ...string) (string, error) {
	t, err := stringField(m, "type", "kind", "tool")
	if err != nil {
		return "", fmt.Errorf("%s.%w", what, err)
	}
	t = strings.ToLower(t)
	if !slices.Contains(allowed, t) {
		return "", fmt.Errorf("%s.type: expected %s, got %q", what, strings.Join(allowed, ", "), t)
	}
	return t, nil
}

func anySlice(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// mapRows picks the mapping's fields (dotted paths) of each row as its columns,
// in column name order.
func mapRows(mapping map[string]any, cols []string, rows [][]any) ([]string, [][]any) {
	out := slices.Sorted(maps.Keys(mapping))
	mapped := make([][]any, len(rows))
	for i, row := range rows {
		rec := make(map[string]any, len(cols))
		for j, c := range cols {
			rec[c] = row[j]
		}
		vals := make([]any, len(out))
		for j, c := range out {
			vals[j] = fieldPath(rec, tmpl.Text(mapping[c]))
		}
		mapped[i] = vals
	}
	return out, mapped
}

// fieldPath reads a dotted path out of a record (nil when absent).
func fieldPath(v any, path string) any {
	for _, part := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	return v
}

// ---- sources ----

// readSource streams the source's rows to each in chunks; it returns the
// records an http source fetched.
func (r *Registry) readSource(ctx context.Context, typ string, src map[string]any, chunk int, each batchFn) (int64, error) {
	if typ == endHTTP {
		return r.httpRecords(ctx, src, chunk, each)
	}
	query, _ := stringField(src, "query")
	if query == "" {
		return 0, errors.New("source.query is required")
	}
	if typ == endDuckDB {
		db, err := r.openDuckDB(ctx, src)
		if err != nil {
			return 0, fmt.Errorf("source: %w", err)
		}
		defer db.Close()
		return 0, db.Query(ctx, query, chunk, each)
	}
	conn, err := r.pgConnect(ctx, src)
	if err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	defer closePG(ctx, conn)
	// A cursor in a read-only transaction: PostgreSQL hands out a chunk per FETCH.
	if _, err := conn.Exec(ctx, "BEGIN READ ONLY; DECLARE noetl_transfer NO SCROLL CURSOR FOR "+query).ReadAll(); err != nil {
		return 0, fmt.Errorf("source: %w", pgErr(err))
	}
	tm := pgtype.NewMap()
	fetch := "FETCH " + strconv.Itoa(chunk) + " FROM noetl_transfer"
	for {
		mrr := conn.Exec(ctx, fetch)
		if !mrr.NextResult() {
			return 0, fmt.Errorf("source: %w", pgErr(mrr.Close()))
		}
		res, err := readResult(tm, mrr.ResultReader())
		if cerr := mrr.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return 0, fmt.Errorf("source: %w", pgErr(err))
		}
		list, _ := res["rows"].([]any)
		if len(list) == 0 {
			return 0, nil
		}
		cols := make([]string, 0, len(list))
		for _, c := range res["columns"].([]any) {
			cols = append(cols, c.(string))
		}
		batch := make([][]any, len(list))
		for i, row := range list {
			m := row.(map[string]any)
			vals := make([]any, len(cols))
			for j, c := range cols {
				vals[j] = m[c]
			}
			batch[i] = vals
		}
		if err := each(cols, batch); err != nil {
			return 0, err
		}
	}
}

func pgErr(err error) error {
	var e *pgconn.PgError
	if errors.As(err, &e) {
		return errors.New(pgErrorMessage(e))
	}
	return err
}

// httpRecords GETs (or method) the source url and streams the records of its
// JSON body: the array at data_path (dotted; default the body itself), each
// element one record; an object there is one record. Columns are the records'
// keys, those of the first record in name order (mapping picks others).
func (r *Registry) httpRecords(ctx context.Context, src map[string]any, chunk int, each batchFn) (int64, error) {
	url, _ := stringField(src, "url", "endpoint")
	if url == "" {
		return 0, errors.New("source.url is required for an http source")
	}
	method, _ := stringField(src, "method")
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, strings.ToUpper(method), url, nil)
	if err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	if err := r.guardURL(req.URL); err != nil {
		return 0, fmt.Errorf("source: %w", err)
	}
	headers, err := mapField(src, "headers")
	if err != nil {
		return 0, fmt.Errorf("source.%w", err)
	}
	for k, v := range headers {
		if v != nil {
			req.Header.Set(k, tmpl.Text(v))
		}
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.httpClient(true, true, nil).Do(req)
	if err != nil {
		return 0, fmt.Errorf("source: %s %s: %w", req.Method, redactURL(req.URL), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return 0, fmt.Errorf("source: %s %s: HTTP %s", req.Method, redactURL(req.URL), resp.Status)
	}
	dataPath, _ := stringField(src, "data_path")
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := seekPath(dec, dataPath); err != nil {
		return 0, fmt.Errorf("source: data_path %q: %w", dataPath, err)
	}
	var cols []string
	var batch [][]any
	var fetched int64
	emit := func(rec any) error {
		fetched++
		m, ok := jsonx.Normalize(rec).(map[string]any)
		if !ok {
			m = map[string]any{"value": jsonx.Normalize(rec)}
		}
		if cols == nil {
			cols = slices.Sorted(maps.Keys(m))
		}
		vals := make([]any, len(cols))
		for j, c := range cols {
			vals[j] = m[c]
		}
		batch = append(batch, vals)
		if len(batch) == chunk {
			err := each(cols, batch)
			batch = nil
			return err
		}
		return nil
	}
	tok, err := dec.Token()
	if err != nil {
		return 0, fmt.Errorf("source: the body is not JSON: %w", err)
	}
	if d, isArray := tok.(json.Delim); isArray && d == '[' {
		for dec.More() {
			var rec any
			if err := dec.Decode(&rec); err != nil {
				return fetched, fmt.Errorf("source: record %d: %w", fetched+1, err)
			}
			if err := emit(rec); err != nil {
				return fetched, err
			}
		}
	} else {
		rec, err := rest(dec, tok)
		if err != nil {
			return fetched, fmt.Errorf("source: %w", err)
		}
		if err := emit(rec); err != nil {
			return fetched, err
		}
	}
	if len(batch) > 0 {
		return fetched, each(cols, batch)
	}
	return fetched, nil
}

// seekPath moves the decoder to the value at a dotted path of objects, values
// of other keys skipped as they stream by.
func seekPath(dec *json.Decoder, path string) error {
	if path == "" {
		return nil
	}
	for _, part := range strings.Split(path, ".") {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return fmt.Errorf("%s: not inside an object", part)
		}
		for {
			if !dec.More() {
				return fmt.Errorf("no field %s", part)
			}
			k, err := dec.Token()
			if err != nil {
				return err
			}
			if k == part {
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
		}
	}
	return nil
}

// rest decodes the value whose first token was already read.
func rest(dec *json.Decoder, tok json.Token) (any, error) {
	d, isDelim := tok.(json.Delim)
	if !isDelim {
		return tok, nil
	}
	switch d {
	case '{':
		m := map[string]any{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, err
			}
			m[k.(string)] = v
		}
		_, err := dec.Token()
		return m, err
	case '[':
		var l []any
		for dec.More() {
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err := dec.Token()
		return l, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// ---- targets ----

// sink is a transfer target: one transaction, written in chunks.
type sink interface {
	exec(ctx context.Context, stmt string, params []any) error
	write(ctx context.Context, table, custom, mode string, cols []string, rows [][]any) error
	commit(ctx context.Context) error
	close()
}

func (r *Registry) openSink(ctx context.Context, typ string, dst map[string]any) (sink, error) {
	if typ == endDuckDB {
		db, err := r.openDuckDB(ctx, dst)
		if err != nil {
			return nil, err
		}
		s := &sqlSink{exec1: func(ctx context.Context, stmt string, params []any) error {
			_, err := db.Exec(ctx, stmt, params)
			return err
		},
			closeFn: func() { _ = db.Close() }}
		return s, s.exec(ctx, "BEGIN TRANSACTION", nil)
	}
	conn, err := r.pgConnect(ctx, dst)
	if err != nil {
		return nil, err
	}
	s := &sqlSink{exec1: func(ctx context.Context, stmt string, params []any) error {
		var err error
		if params == nil {
			_, err = conn.Exec(ctx, stmt).ReadAll()
		} else {
			_, err = execParams(ctx, conn, stmt, params)
		}
		return pgErr(err)
	}, closeFn: func() { closePG(ctx, conn) }, maxParams: 65535}
	return s, s.exec(ctx, "BEGIN", nil)
}

// sqlSink writes rows with multi-row INSERTs ($1, … positional parameters,
// which both PostgreSQL and DuckDB take) in one transaction.
type sqlSink struct {
	exec1     func(ctx context.Context, stmt string, params []any) error
	closeFn   func()
	maxParams int // per statement (PostgreSQL's protocol allows 65535); 0: no limit
	done      bool
}

func (s *sqlSink) exec(ctx context.Context, stmt string, params []any) error {
	return s.exec1(ctx, stmt, params)
}

func (s *sqlSink) write(ctx context.Context, table, custom, mode string, cols []string, rows [][]any) error {
	if custom != "" {
		// NoETL's target query takes psycopg's %s per column.
		stmt := custom
		for i := 1; strings.Contains(stmt, "%s"); i++ {
			stmt = strings.Replace(stmt, "%s", "$"+strconv.Itoa(i), 1)
		}
		for _, row := range rows {
			if err := s.exec(ctx, stmt, row); err != nil {
				return err
			}
		}
		return nil
	}
	if len(cols) == 0 {
		return errors.New("the source returned rows without columns")
	}
	per := len(rows)
	if s.maxParams > 0 {
		per = max(1, min(per, s.maxParams/len(cols)))
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = `"` + strings.ReplaceAll(c, `"`, `""`) + `"`
	}
	var suffix string
	if mode == "upsert" {
		suffix = " ON CONFLICT (" + quoted[0] + ")"
		if len(cols) == 1 {
			suffix += " DO NOTHING"
		} else {
			sets := make([]string, len(cols)-1)
			for i, q := range quoted[1:] {
				sets[i] = q + " = EXCLUDED." + q
			}
			suffix += " DO UPDATE SET " + strings.Join(sets, ", ")
		}
	}
	for start := 0; start < len(rows); start += per {
		part := rows[start:min(start+per, len(rows))]
		var b strings.Builder
		b.WriteString("INSERT INTO " + table + " (" + strings.Join(quoted, ", ") + ") VALUES ")
		params := make([]any, 0, len(part)*len(cols))
		for i, row := range part {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteByte('(')
			for j := range cols {
				if j > 0 {
					b.WriteString(", ")
				}
				params = append(params, row[j])
				b.WriteString("$" + strconv.Itoa(len(params)))
			}
			b.WriteByte(')')
		}
		b.WriteString(suffix)
		if err := s.exec(ctx, b.String(), params); err != nil {
			return err
		}
	}
	return nil
}

func (s *sqlSink) commit(ctx context.Context) error {
	s.done = true
	return s.exec(ctx, "COMMIT", nil)
}

// close rolls back a transaction not committed (closing the connection does).
func (s *sqlSink) close() {
	if !s.done {
		_ = s.exec(context.Background(), "ROLLBACK", nil)
	}
	s.closeFn()
}

// openDuckDB opens a transfer endpoint's DuckDB database.
func (r *Registry) openDuckDB(ctx context.Context, end map[string]any) (SQLDB, error) {
	if r.duckdb == nil {
		return nil, errNoDuckDB
	}
	path, err := r.duckdbPath(ctx, end)
	if err != nil {
		return nil, err
	}
	return r.duckdb.Open(ctx, path)
}

// pgConnect connects to a transfer endpoint's PostgreSQL (auth, connection or
// host/… as the postgres tool reads them).
func (r *Registry) pgConnect(ctx context.Context, end map[string]any) (*pgconn.PgConn, error) {
	pc, _, err := r.pgConfig(ctx, end)
	if err != nil {
		return nil, err
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", pgErr(err))
	}
	return conn, nil
}
