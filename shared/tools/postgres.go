package tools

import (
	"context"
	"database/sql/driver"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// runPostgres runs `query` (alias `command`) on a connection of its own for
// the step: a new one or one an earlier step left idle (pgIdle).
//
// Without params the script goes out as one simple-protocol Query: PostgreSQL runs
// the statements of such a message in order as one implicit transaction (an error
// rolls back all of them; explicit BEGIN/COMMIT in the script take over, as in psql).
// With params the single statement is bound server-side (extended protocol), the
// values sent as untyped text so the server infers their types as it does for
// quoted literals ($1::int where it cannot).
//
// Decisions where the spec is silent are in the package doc.
func (r *Registry) runPostgres(ctx context.Context, it pipeline.Item) toolresult.Envelope {
	env, conn, key := r.postgres(ctx, it, false)
	switch {
	case conn == nil:
	case env.Status == toolresult.StatusSuccess:
		r.pgIdle.release(ctx, key, conn)
	default:
		closePG(ctx, conn)
	}
	return env
}

// Claim runs a cursor loop's claim (a postgres command whose payload says so,
// shared/engine's Cursor) inside a transaction it leaves open: settle commits
// it once the server has taken the claimed rows (accepted true) and rolls it
// back otherwise. A worker that dies in between drops the connection, so
// PostgreSQL rolls the claim back and the rows stay pending for the next claim;
// no row is marked taken that the loop does not hold. Settle must be called
// once; a claim left unsettled rolls back after holdMax.
func (r *Registry) Claim(ctx context.Context, it pipeline.Item) (toolresult.Envelope, func(accepted bool)) {
	env, conn, _ := r.postgres(ctx, it, true)
	if conn == nil {
		return env, func(bool) {}
	}
	if data, ok := env.Data.(map[string]any); ok && env.Status == toolresult.StatusSuccess {
		// The iterations of these rows wait for this transaction to end
		// (AwaitClaim): the server may issue them before the COMMIT lands.
		res, err := conn.Exec(ctx, "SELECT txid_current()::text").ReadAll()
		if err != nil || len(res) != 1 || len(res[0].Rows) != 1 {
			closePG(ctx, conn)
			return failure(toolresult.KindConnection, fmt.Sprintf("postgres: the claim's transaction id: %v", err)), func(bool) {}
		}
		data[toolresult.ClaimTxidKey] = string(res[0].Rows[0][0])
	}
	var once sync.Once
	settle := func(accepted bool) {
		once.Do(func() {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if accepted && env.Status == toolresult.StatusSuccess {
				if _, err := conn.Exec(cctx, "COMMIT").ReadAll(); err != nil {
					r.log.Error("committing a cursor claim failed: its rows stay pending and are claimed again", "error", err.Error())
				}
			} else {
				// Rolled back before the close returns, not when the server
				// notices the closed session: the next claim must find these
				// rows unlocked, not skip them (SKIP LOCKED) as still held.
				rctx, done := context.WithTimeout(cctx, pgCloseTimeout)
				_, _ = conn.Exec(rctx, "ROLLBACK").ReadAll()
				done()
			}
			closePG(cctx, conn) // a transaction still open (a failed COMMIT's) rolls back
		})
	}
	t := time.AfterFunc(holdMax, func() { settle(false) })
	return env, func(accepted bool) { t.Stop(); settle(accepted) }
}

// holdMax bounds how long a claim's transaction waits for its report.
const holdMax = 10 * time.Minute

// AwaitClaim waits until the cursor claim an iteration names (its payload's
// cursor: {after_txid, auth}, shared/engine) has ended, committed or rolled
// back, so the iteration sees its rows as the claim left them. Our workers
// commit a claim only once the server has its rows, and the server may issue
// their iterations first. Transactions seen ended are remembered, so a worker
// checks each claim once.
func (r *Registry) AwaitClaim(ctx context.Context, cursor map[string]any) error {
	tx, _ := cursor["after_txid"].(string)
	if tx == "" {
		return nil
	}
	if r.claimsEnded.seen(tx) {
		return nil
	}
	pc, key, err := r.pgConfig(ctx, map[string]any{"auth": cursor["auth"]})
	if err != nil {
		return fmt.Errorf("the cursor's database: %w", err)
	}
	conn, err := r.pgIdle.connect(ctx, key, pc)
	if err != nil {
		return fmt.Errorf("the cursor's database: %w", err)
	}
	for {
		res := conn.ExecParams(ctx, "SELECT coalesce(txid_status($1::bigint), 'ended')", [][]byte{[]byte(tx)}, nil, nil, nil).Read()
		if res.Err != nil {
			closePG(ctx, conn)
			return fmt.Errorf("the claim's transaction %s: %w", tx, res.Err)
		}
		if len(res.Rows) == 1 && string(res.Rows[0][0]) != "in progress" {
			r.claimsEnded.add(tx)
			r.pgIdle.release(ctx, key, conn)
			return nil
		}
		select {
		case <-ctx.Done():
			closePG(ctx, conn)
			return fmt.Errorf("waiting for the claim's transaction %s: %w", tx, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// txidSet remembers the claim transactions seen ended, up to a bound.
type txidSet struct {
	mu  sync.Mutex
	set map[string]bool
}

func (s *txidSet) seen(tx string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set[tx]
}

func (s *txidSet) add(tx string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.set == nil || len(s.set) >= 4096 {
		s.set = map[string]bool{} // old claims' iterations have run
	}
	s.set[tx] = true
}

// pgCloseTimeout bounds a close and a refused claim's ROLLBACK: a server that
// does not answer ends the session's transaction when the connection goes.
const pgCloseTimeout = 5 * time.Second

func closePG(ctx context.Context, conn *pgconn.PgConn) {
	closeCtx, done := context.WithTimeout(context.WithoutCancel(ctx), pgCloseTimeout)
	defer done()
	_ = conn.Close(closeCtx)
}

// postgres runs the item's SQL; with hold, inside a transaction left open on the
// connection it returns (nil when it could not connect) with its pgIdle key.
// The caller closes or releases it.
func (r *Registry) postgres(ctx context.Context, it pipeline.Item, hold bool) (toolresult.Envelope, *pgconn.PgConn, string) {
	cfg := it.Config
	query, err := r.sqlSource(ctx, cfg, keyNames(toolkind.Postgres, "query"), nil, keyNames(toolkind.Postgres, "script"))
	if err != nil {
		return failure(toolresult.KindTool, "postgres: "+err.Error()), nil, ""
	}
	var params []any
	if v := valueOf(cfg, keyNames(toolkind.Postgres, "params")...); v != nil {
		list, isList := v.([]any)
		if !isList {
			return failure(toolresult.KindTool, fmt.Sprintf("postgres: params: expected a list (positional $1, $2, …), got %s", jsonx.TypeName(v))), nil, ""
		}
		params = list
	}
	if params != nil {
		if n := countStatements(query); n > 1 {
			return failure(toolresult.KindTool, fmt.Sprintf("postgres: params need exactly one statement, the query has %d", n)), nil, ""
		}
	}
	pc, key, err := r.pgConfig(ctx, cfg)
	if err != nil {
		return failure(toolresult.KindTool, "postgres: "+err.Error()), nil, ""
	}
	ctx, cancel, _, err := withToolTimeout(ctx, cfg)
	if err != nil {
		return failure(toolresult.KindTool, "postgres: "+err.Error()), nil, ""
	}
	defer cancel()

	conn, err := r.pgIdle.connect(ctx, key, pc)
	if err != nil {
		return pgFailure(ctx, err, "postgres: connect", "postgres: connect", true), nil, ""
	}
	if hold {
		if _, err = conn.Exec(ctx, "BEGIN").ReadAll(); err != nil {
			return failure(toolresult.KindConnection, fmt.Sprintf("postgres: begin: %v", err)), conn, key
		}
	}
	var data map[string]any
	if params != nil {
		data, err = execParams(ctx, conn, query, params)
	} else {
		data, err = execScript(ctx, conn, query)
	}
	if err != nil {
		return pgFailure(ctx, err, "postgres", "postgres: query cancelled", pgconn.SafeToRetry(err) || conn.IsClosed()), conn, key
	}
	return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: data}, conn, key
}

// sqlSource reads a SQL tool's statements from the keys given: the query (a
// string, or a list of statements NoETL joins with newlines), its base64 form
// (duckdb's query_b64; nil: none), or a script (a path, or NoETL's {uri,
// source}: read like python's, never rendered) — exactly one.
func (r *Registry) sqlSource(ctx context.Context, cfg map[string]any, queryKeys, b64Keys, scriptKeys []string) (string, error) {
	var given []string
	qk, q, _ := first(cfg, queryKeys...)
	if q != nil && q != "" {
		given = append(given, qk)
	}
	bk, b64, _ := first(cfg, b64Keys...)
	if b64 != nil && b64 != "" {
		given = append(given, bk)
	}
	_, script, _ := first(cfg, scriptKeys...)
	if script != nil && script != "" {
		given = append(given, "script")
	}
	switch {
	case len(given) == 0:
		return "", errors.New("query is required (or script)")
	case len(given) > 1:
		return "", fmt.Errorf("give the SQL once: %s are set", strings.Join(given, " and "))
	}
	var text string
	switch given[0] {
	case "script":
		code, _, err := r.loadScript(ctx, script)
		if err != nil {
			return "", err
		}
		text = code
	case bk:
		s, ok := b64.(string)
		if !ok {
			return "", fmt.Errorf("%s: expected a base64 string, got %s", bk, jsonx.TypeName(b64))
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
		if err != nil {
			return "", fmt.Errorf("%s: not base64: %w", bk, err)
		}
		text = string(raw)
	default:
		switch x := q.(type) {
		case string:
			text = x
		case []any: // NoETL joins a list of statements with newlines
			lines := make([]string, len(x))
			for i, l := range x {
				lines[i] = tmpl.Text(l)
			}
			text = strings.Join(lines, "\n")
		default:
			return "", fmt.Errorf("%s: expected a string or a list of statements, got %s", qk, jsonx.TypeName(q))
		}
	}
	if strings.TrimSpace(text) == "" {
		return "", fmt.Errorf("%s is empty", given[0])
	}
	return text, nil
}

// pgFailure is the envelope of a failed connect or query (what names it):
// stopped by the context (stopped says what), refused by the server (a tool
// error with its message), or else lost with the connection (lost: retryable)
// or the tool's.
func pgFailure(ctx context.Context, err error, what, stopped string, lost bool) toolresult.Envelope {
	if ctx.Err() != nil {
		return ctxEnvelope(ctx, stopped)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return failure(toolresult.KindTool, what+": "+pgErrorMessage(pgErr))
	}
	if lost {
		return failure(toolresult.KindConnection, fmt.Sprintf("%s: %v", what, err))
	}
	return failure(toolresult.KindTool, fmt.Sprintf("%s: %v", what, err))
}

// pgErrorMessage is the server's message with its SQLSTATE ("ERROR: … (SQLSTATE
// 42601)"), plus detail and hint when the server gave them.
func pgErrorMessage(e *pgconn.PgError) string {
	msg := e.Error()
	if e.Detail != "" {
		msg += "; DETAIL: " + e.Detail
	}
	if e.Hint != "" {
		msg += "; HINT: " + e.Hint
	}
	return msg
}

// pgConfig builds the connection config (see runPostgres for the precedence)
// and its key: every input the config is made from (the DSN, the fields
// over it), so two configs with one key reach the same database as the same
// user with the same password (pgIdle).
func (r *Registry) pgConfig(ctx context.Context, cfg map[string]any) (*pgconn.Config, string, error) {
	dsn, err := stringField(cfg, keyNames(toolkind.Postgres, "connection")...)
	if err != nil {
		return nil, "", err
	}
	var cred Credential
	alias, err := authAlias(cfg)
	if err != nil {
		return nil, "", err
	}
	usesCred := dsn == "" && alias != ""
	if usesCred {
		if cred, err = r.lookupCredential(ctx, alias); err != nil {
			return nil, "", err
		}
		dsn = cred.DSN
	}
	fields := map[string]string{}
	for _, f := range []struct {
		key   string
		names []string
	}{
		{"host", keyNames(toolkind.Postgres, "host")}, {"port", keyNames(toolkind.Postgres, "port")},
		{"user", keyNames(toolkind.Postgres, "user")}, {"password", keyNames(toolkind.Postgres, "password")},
		{"dbname", keyNames(toolkind.Postgres, "database")},
	} {
		v, err := stringField(cfg, f.names...)
		if err != nil {
			return nil, "", err
		}
		if v != "" {
			fields[f.key] = v
		}
	}
	if dsn == "" {
		// Build a keyword/value DSN from the credential's fields, the config's winning.
		base := map[string]string{"host": cred.Host, "user": cred.User, "password": cred.Password, "dbname": cred.Database}
		if cred.Port != 0 {
			base["port"] = strconv.Itoa(cred.Port)
		}
		for k, v := range fields {
			base[k] = v
		}
		var parts []string
		for _, k := range []string{"host", "port", "user", "password", "dbname"} {
			if base[k] != "" {
				parts = append(parts, k+"="+quoteDSNValue(base[k]))
			}
		}
		if len(parts) == 0 {
			return nil, "", errors.New("no connection: give connection (a DSN), auth (a credential alias) or host/port/user/password/database")
		}
		dsn = strings.Join(parts, " ")
		fields = nil
	}
	key := dsn
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		key += "\x00" + k + "=" + fields[k]
	}
	pc, err := pgconn.ParseConfig(dsn)
	if err != nil {
		// pgconn's message may quote the DSN, password included: keep only the kind.
		var pe *pgconn.ParseConfigError
		if errors.As(err, &pe) {
			return nil, "", fmt.Errorf("invalid connection string: %s", redactParseError(pe))
		}
		return nil, "", errors.New("invalid connection string")
	}
	for k, v := range fields {
		switch k {
		case "host":
			pc.Host = v
		case "port":
			p, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return nil, "", fmt.Errorf("port: expected a TCP port, got %q", v)
			}
			pc.Port = uint16(p)
		case "user":
			pc.User = v
		case "password":
			pc.Password = v
		case "dbname":
			pc.Database = v
		}
	}
	if usesCred {
		if err := checkPostgresHosts(alias, cred, pc); err != nil {
			return nil, "", err
		}
	}
	if _, ok := pc.RuntimeParams["application_name"]; !ok {
		pc.RuntimeParams["application_name"] = "noetl-worker"
	}
	// Dates and timestamps are parsed from text: pin the ISO output style.
	pc.RuntimeParams["DateStyle"] = "ISO, MDY"
	// On ctx end, ask the server to cancel the running statement (not only drop the
	// socket, which would leave it running server-side).
	pc.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 2 * time.Second}
	}
	return pc, key, nil
}

// redactParseError describes a DSN parse failure without quoting the DSN (it may hold
// a password).
func redactParseError(e *pgconn.ParseConfigError) string {
	inner := e.Unwrap()
	var ue *url.Error
	if errors.As(inner, &ue) {
		inner = ue.Err
	}
	if inner != nil {
		return inner.Error()
	}
	return "malformed"
}

// quoteDSNValue quotes a keyword/value DSN value.
func quoteDSNValue(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// execScript runs a script through the simple protocol and returns its outcome in
// NoETL's shape (see statementsData).
func execScript(ctx context.Context, conn *pgconn.PgConn, query string) (map[string]any, error) {
	tm := pgtype.NewMap()
	mrr := conn.Exec(ctx, query)
	var stmts []map[string]any
	for mrr.NextResult() {
		res, err := readResult(tm, mrr.ResultReader())
		if err != nil {
			_ = mrr.Close()
			return nil, err
		}
		if res != nil {
			stmts = append(stmts, res)
		}
	}
	if err := mrr.Close(); err != nil {
		return nil, err
	}
	return statementsData(stmts), nil
}

// execParams runs one statement with positional params bound server-side; results
// come back in text format, as with the simple protocol.
func execParams(ctx context.Context, conn *pgconn.PgConn, query string, params []any) (map[string]any, error) {
	values := make([][]byte, len(params))
	oids := make([]uint32, len(params)) // 0: let the server infer each type
	for i, p := range params {
		if p != nil {
			values[i] = []byte(tmpl.Text(p))
		}
	}
	res, err := readResult(pgtype.NewMap(), conn.ExecParams(ctx, query, values, oids, nil, nil))
	if err != nil || res == nil {
		return statementsData(nil), err
	}
	return statementsData([]map[string]any{res}), nil
}

// statementsData is the tool's data in NoETL's shape: one entry per statement,
// command_0, command_1, … (what NoETL's playbooks read as step.command_0.rows), and
// the last statement's entry again at the top (what NoETL's current postgres tool
// returns, and step.rows), with statement_count. A script without a statement (only
// comments) gives statement_count 0 and affected_rows 0.
func statementsData(stmts []map[string]any) map[string]any {
	out := map[string]any{"statement_count": int64(len(stmts))}
	for i, st := range stmts {
		out["command_"+strconv.Itoa(i)] = st
	}
	if len(stmts) == 0 {
		out["status"], out["affected_rows"], out["row_count"] = "success", int64(0), int64(0)
		return out
	}
	for k, v := range stmts[len(stmts)-1] {
		out[k] = v
	}
	return out
}

// readResult reads one statement's result, as NoETL reports a statement: {status,
// columns, rows, row_count} when it returns rows, else {status, row_count (the rows
// it changed), message}, or nil for an empty query; affected_rows repeats row_count (this project's earlier
// name, kept for the playbooks that read it).
func readResult(tm *pgtype.Map, rr *pgconn.ResultReader) (map[string]any, error) {
	fds := rr.FieldDescriptions()
	var rows []any
	var decodeErr error
	for rr.NextRow() {
		if decodeErr != nil {
			continue // drain: the connection must reach the end of the result
		}
		vals := rr.Values()
		row := make(map[string]any, len(fds))
		for i, fd := range fds {
			v, err := pgValue(tm, fd.DataTypeOID, fd.Format, vals[i])
			if err != nil {
				decodeErr = fmt.Errorf("column %q: %w", fd.Name, err)
				break
			}
			row[fd.Name] = v
		}
		rows = append(rows, row)
	}
	tag, err := rr.Close()
	if err != nil {
		return nil, err
	}
	if decodeErr != nil {
		return nil, decodeErr
	}
	if fds == nil && tag.String() == "" {
		return nil, nil // an empty query (only comments): no statement
	}
	if fds == nil && !tag.Select() {
		n := tag.RowsAffected()
		return map[string]any{"status": "success", "row_count": n, "affected_rows": n,
			"message": fmt.Sprintf("Command executed. %d rows affected.", n)}, nil
	}
	columns := make([]any, len(fds))
	for i, fd := range fds {
		columns[i] = fd.Name
	}
	if rows == nil {
		rows = []any{}
	}
	return map[string]any{"status": "success", "columns": columns, "rows": rows, "row_count": int64(len(rows))}, nil
}

// pgValue converts one column value to a convention value (R-P5).
func pgValue(tm *pgtype.Map, oid uint32, format int16, src []byte) (any, error) {
	if src == nil {
		return nil, nil
	}
	if format != pgtype.TextFormatCode {
		// Not expected (every query here asks for text); decode generically.
		t, ok := tm.TypeForOID(oid)
		if !ok {
			return base64.StdEncoding.EncodeToString(src), nil
		}
		v, err := t.Codec.DecodeValue(tm, oid, format, src)
		if err != nil {
			return nil, err
		}
		return goValue(oid, v), nil
	}
	s := string(src)
	switch oid {
	case pgtype.BoolOID:
		return s == "t" || s == "true", nil
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID, pgtype.XIDOID, pgtype.CIDOID:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, err
		}
		return n, nil
	case pgtype.Float4OID, pgtype.Float8OID:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return s, nil
		}
		return f, nil
	case pgtype.NumericOID:
		return numericValue(s), nil
	case pgtype.JSONOID, pgtype.JSONBOID:
		v, err := jsonx.Decode(src)
		if err != nil {
			return nil, err
		}
		return v, nil
	case pgtype.ByteaOID:
		b, err := byteaText(s)
		if err != nil {
			return nil, err
		}
		return base64.StdEncoding.EncodeToString(b), nil
	case pgtype.DateOID:
		return s, nil // ISO DateStyle: already YYYY-MM-DD (or infinity)
	case pgtype.TimestampOID, pgtype.TimestamptzOID:
		if s == "infinity" || s == "-infinity" {
			return s, nil
		}
		t, ok := tm.TypeForOID(oid)
		if !ok {
			return s, nil
		}
		v, err := t.Codec.DecodeValue(tm, oid, format, src)
		if err != nil {
			return nil, err
		}
		return goValue(oid, v), nil
	}
	if t, ok := tm.TypeForOID(oid); ok {
		if ac, isArray := t.Codec.(*pgtype.ArrayCodec); isArray {
			v, err := ac.DecodeValue(tm, oid, format, src)
			if err != nil {
				return s, nil //nolint:nilerr // an array we cannot decode keeps its text form
			}
			return goValue(ac.ElementType.OID, v), nil
		}
	}
	return s, nil
}

// numericValue: int64 when integral and in range; an integral value beyond int64
// stays exact as a string; otherwise float64 when finite, else the text.
func numericValue(s string) any {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	if intPart, frac, ok := strings.Cut(s, "."); ok && strings.Trim(frac, "0") == "" {
		if n, err := strconv.ParseInt(intPart, 10, 64); err == nil {
			return n
		}
		return intPart // integral, beyond int64: exact text
	}
	if _, ok := new(big.Int).SetString(s, 10); ok {
		return s // integral, beyond int64
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return s
	}
	return f
}

// byteaText decodes bytea's text output (hex "\x…", or the legacy escape format).
func byteaText(s string) ([]byte, error) {
	if strings.HasPrefix(s, `\x`) {
		return hex.DecodeString(s[2:])
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '\\' {
			out = append(out, '\\')
			i++
			continue
		}
		if i+3 < len(s) {
			n, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
			if err != nil {
				return nil, fmt.Errorf("bytea: bad escape at %d", i)
			}
			out = append(out, byte(n))
			i += 3
			continue
		}
		return nil, fmt.Errorf("bytea: bad escape at %d", i)
	}
	return out, nil
}

// goValue converts what a pgtype codec decoded (array elements, timestamps).
// elemOID is the PostgreSQL type of the value (of the elements, for slices).
func goValue(elemOID uint32, v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = goValue(elemOID, e)
		}
		return out
	case bool, string, int64:
		return x
	case float32:
		return goValue(elemOID, float64(x))
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
		return x
	case []byte:
		if elemOID == pgtype.JSONOID || elemOID == pgtype.JSONBOID {
			if d, err := jsonx.Decode(x); err == nil {
				return d
			}
		}
		return base64.StdEncoding.EncodeToString(x)
	case time.Time:
		if elemOID == pgtype.DateOID {
			return x.Format(time.DateOnly)
		}
		return x.UTC().Format(time.RFC3339Nano)
	case pgtype.Numeric:
		if !x.Valid {
			return nil
		}
		if x.NaN || x.InfinityModifier != pgtype.Finite {
			b, _ := x.MarshalJSON()
			return strings.Trim(string(b), `"`)
		}
		b, err := x.MarshalJSON()
		if err != nil {
			return fmt.Sprint(x)
		}
		return numericValue(string(b))
	case [16]byte:
		return fmt.Sprintf("%x-%x-%x-%x-%x", x[0:4], x[4:6], x[6:8], x[8:10], x[10:16])
	case map[string]any:
		return jsonx.Normalize(x)
	case driver.Valuer:
		dv, err := x.Value()
		if err != nil {
			return fmt.Sprint(x)
		}
		if _, same := dv.(driver.Valuer); same {
			return fmt.Sprint(dv)
		}
		return goValue(elemOID, dv)
	default: // int2, int4 and oid's int16, int32 and uint32 among them
		return jsonx.Normalize(x)
	}
}
