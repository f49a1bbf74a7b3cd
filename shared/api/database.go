package api

import (
	"context"
	"encoding/base64"
	"errors"
	"slices"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/wire"
)

// The database routes NoETL's CLI calls (db validate, db init, query;
// docs/noetl-compat.md). validate reads and needs the api scope; init and
// execute need the admin scope, which only an admin token grants
// (docs/security.md, "The database routes").

// GET /api/db/validate: every database's schema, read-only.
func (a *API) dbValidate(ctx context.Context, c *call) (wire.SchemaReport, error) {
	states, err := a.svc.SchemaStates(ctx)
	if err != nil {
		return wire.SchemaReport{}, err
	}
	return schemaReport(states, "the schema is current", "the schema is behind this server: run `noetl migrate`, or POST /api/db/init with the admin token"), nil
}

// POST /api/db/init: apply the migrations a database lacks (normally none),
// then the states.
func (a *API) dbInit(ctx context.Context, c *call, _ wire.DBInitRequest) (wire.SchemaReport, error) {
	states, err := a.svc.InitSchema(ctx)
	if err != nil {
		return wire.SchemaReport{}, err
	}
	return schemaReport(states, "Database schema ready", "the schema is still incomplete after migrating: see missing"), nil
}

func schemaReport(states []controlplane.DatabaseState, okMsg, badMsg string) wire.SchemaReport {
	out := wire.SchemaReport{Status: "ok", Valid: true, Message: okMsg, Tables: []string{}, Missing: []string{}, AllTables: []string{}}
	for _, st := range states {
		out.Databases = append(out.Databases, wire.DatabaseSchema{Name: st.Name, Set: st.Set, Applied: st.Applied, Wanted: st.Wanted,
			Valid: st.Valid(), Missing: st.Missing})
		out.Tables = append(out.Tables, st.Tables...)
		out.Missing = append(out.Missing, st.Missing...)
		out.AllTables = append(out.AllTables, st.AllTables...)
		if !st.Valid() {
			out.Status, out.Valid, out.Message = "error", false, badMsg
		}
	}
	for _, l := range []*[]string{&out.Tables, &out.Missing, &out.AllTables} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	return out
}

// POST /api/postgres/execute {query | query_base64, schema?, shard?}: one
// read, in a read-only transaction rolled back, bounded in time and rows.
// A statement Postgres refuses is answered as NoETL does: 200, status error.
func (a *API) postgresExecute(ctx context.Context, c *call, r wire.SQLRequest) (wire.SQLAnswer, error) {
	for _, f := range []struct{ name, v, why string }{
		{"procedure", r.Procedure, "procedures write; this route only reads"},
		{"database", r.Database, "name a shard (shard: N) or leave it out for the cluster database"},
		{"credential", r.Credential, "this route reads this server's own databases only"},
		{"connection_string", r.Connection, "this route reads this server's own databases only"},
	} {
		if f.v != "" {
			return wire.SQLAnswer{}, invalid(f.name, "not served: %s", f.why)
		}
	}
	query := r.Query
	if query == "" && r.QueryBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(r.QueryBase64)
		if err != nil {
			return wire.SQLAnswer{}, invalid("query_base64", "not base64: %v", err)
		}
		query = string(b)
	}
	if query == "" {
		return wire.SQLAnswer{}, invalid("query", "required: one statement that reads (or query_base64)")
	}
	res, err := a.svc.QueryReadOnly(ctx, r.Shard, r.Schema, query)
	var sqlErr *controlplane.SQLError
	if errors.As(err, &sqlErr) {
		return wire.SQLAnswer{Status: "error", Columns: []string{}, Error: wire.OptString(sqlErr.Error())}, nil
	}
	if err != nil {
		return wire.SQLAnswer{}, err
	}
	rows := make([]any, len(res.Rows))
	for i, row := range res.Rows {
		rows[i] = row
	}
	cols := res.Columns
	if cols == nil {
		cols = []string{}
	}
	return wire.SQLAnswer{Status: "ok", Columns: cols, Result: wire.Value{V: rows}, Truncated: res.Truncated}, nil
}
