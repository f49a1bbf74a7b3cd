package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
)

// POST /api/catalog/register {content: yaml or base64 yaml, resource_type?}
func (a *API) register(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	content, err := o.str("content", true)
	if err != nil {
		return nil, err
	}
	if err := checkResourceType(o); err != nil {
		return nil, err
	}
	text := playbookText(content)
	if int64(len(text)) > a.opts.MaxPlaybookBytes {
		return nil, errorf(http.StatusRequestEntityTooLarge, "content: the playbook is %d bytes; the limit is %d bytes (%d KiB)",
			len(text), a.opts.MaxPlaybookBytes, a.opts.MaxPlaybookBytes>>10)
	}
	reg, err := a.svc.Register(ctx, text)
	if err != nil {
		return nil, err
	}
	warnings := make([]string, len(reg.Warnings))
	for i, w := range reg.Warnings {
		warnings[i] = w.String()
	}
	return wire.Registered{
		Status: "success", CatalogID: wire.ID(reg.Entry.CatalogID), Path: reg.Entry.Path,
		Version: reg.Entry.Version, Kind: reg.Entry.Kind, Created: reg.Created, Warnings: warnings,
	}, nil
}

func checkResourceType(o obj) error {
	rt, err := o.str("resource_type", false)
	if err != nil {
		return err
	}
	if rt != "" && !strings.EqualFold(rt, controlplane.KindPlaybook) {
		return invalid(o.name("resource_type"), "only %s is supported, got %q", controlplane.KindPlaybook, truncate(rt, 40))
	}
	return nil
}

// playbookText returns the YAML of content: content itself, or its decoding
// when it is base64 (NoETL clients send either). YAML playbooks always hold
// characters outside the base64 alphabet (':' at least), so the two cannot be
// confused.
func playbookText(content string) string {
	compact := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\n', '\r', '\t':
			return -1
		}
		return r
	}, content)
	if compact == "" || strings.TrimLeft(compact, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != "" {
		return content
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := enc.DecodeString(compact); err == nil && utf8.Valid(b) {
			return string(b)
		}
	}
	return content
}

// GET /api/catalog?path=&limit=&cursor=&latest=
func (a *API) listCatalogQuery(ctx context.Context, c *call) (any, error) {
	q := c.req.Query
	f := store.CatalogFilter{Path: q.Get("path")}
	limit, _, err := queryInt(q, "limit", 1, MaxListLimit)
	if err != nil {
		return nil, err
	}
	f.Limit = int(limit)
	if s := q.Get("latest"); s != "" {
		switch strings.ToLower(s) {
		case "true", "1":
			f.LatestOnly = true
		case "false", "0":
		default:
			return nil, invalid("latest", "expected true or false, got %q", truncate(s, 40))
		}
	}
	if s := q.Get("cursor"); s != "" {
		if f.After, err = decodeCatalogCursor(s); err != nil {
			return nil, err
		}
	}
	return a.listCatalog(ctx, f)
}

// POST /api/catalog/list {path?, limit?, cursor?, latest?, resource_type?}:
// NoETL's spelling of GET /api/catalog.
func (a *API) listCatalogBody(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	if err := checkResourceType(o); err != nil {
		return nil, err
	}
	var f store.CatalogFilter
	if f.Path, err = o.str("path", false); err != nil {
		return nil, err
	}
	limit, _, err := o.integer("limit", 1, MaxListLimit)
	if err != nil {
		return nil, err
	}
	f.Limit = int(limit)
	if f.LatestOnly, err = o.boolean("latest"); err != nil {
		return nil, err
	}
	cursor, err := o.str("cursor", false)
	if err != nil {
		return nil, err
	}
	if cursor != "" {
		if f.After, err = decodeCatalogCursor(cursor); err != nil {
			return nil, err
		}
	}
	return a.listCatalog(ctx, f)
}

func (a *API) listCatalog(ctx context.Context, f store.CatalogFilter) (any, error) {
	if f.Limit == 0 {
		f.Limit = DefaultListLimit
	}
	entries, err := a.svc.ListCatalog(ctx, f)
	if err != nil {
		return nil, err
	}
	out := wire.CatalogPage{Entries: make([]wire.CatalogSummary, len(entries))}
	for i, e := range entries {
		out.Entries[i] = catalogSummary(e)
	}
	if len(entries) == f.Limit {
		last := entries[len(entries)-1]
		out.NextCursor = wire.OptString(encodeCatalogCursor(store.CatalogCursor{Path: last.Path, Version: last.Version}))
	}
	return out, nil
}

// GET /api/catalog/{catalog_id}
func (a *API) getCatalog(ctx context.Context, c *call) (any, error) {
	id, err := parseID("catalog_id", c.params["catalog_id"])
	if err != nil {
		return nil, err
	}
	e, err := a.svc.Catalog(ctx, id)
	if err != nil {
		return nil, err
	}
	out := wire.CatalogDetail{CatalogEntry: catalogEntry(e)}
	// Ours, beside NoETL's fields (its alias POST /api/catalog/resource stays
	// as NoETL has it): the step graph the dashboard draws and the parser's
	// problems (a registered playbook has warnings at most), each at its
	// YAML path.
	pb, diags := engine.Parse([]byte(e.Content))
	out.Problems = make([]wire.Problem, len(diags))
	for i, d := range diags {
		out.Problems[i] = wire.Problem{Severity: string(d.Severity), Path: d.Path, Line: d.Line, Message: d.Message}
	}
	if pb != nil {
		b, err := json.Marshal(pb.Outline())
		var g map[string]any
		if err == nil {
			g, err = jsonx.DecodeObject(b)
		}
		if err != nil {
			return nil, fmt.Errorf("catalog %d: the step graph: %w", id, err)
		}
		out.Graph = g
	}
	return out, nil
}

// POST /api/catalog/resource {catalog_id} or {path, version?}: NoETL's spelling
// of GET /api/catalog/{catalog_id}, also by path.
func (a *API) catalogResource(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	if err := checkResourceType(o); err != nil {
		return nil, err
	}
	id, err := o.id("catalog_id", false)
	if err != nil {
		return nil, err
	}
	path, err := o.str("path", false)
	if err != nil {
		return nil, err
	}
	version, err := versionField(o)
	if err != nil {
		return nil, err
	}
	var e store.CatalogEntry
	switch {
	case id != 0 && path != "":
		return nil, invalid("catalog_id", "give exactly one of path and catalog_id, not both")
	case id != 0:
		if version != 0 {
			return nil, invalid("version", "a catalog_id names one version already; give version with path only")
		}
		e, err = a.svc.Catalog(ctx, id)
	case path != "":
		e, err = a.svc.CatalogByPath(ctx, path, version)
	default:
		return nil, invalid("path", "required: give the playbook's path or its catalog_id")
	}
	if err != nil {
		return nil, err
	}
	return catalogEntry(e), nil
}

// versionField reads version: a positive integer, a numeric string, or
// "latest" (NoETL's clients send it), 0 meaning the latest.
func versionField(o obj) (int, error) {
	v, ok := o.get("version")
	if !ok {
		return 0, nil
	}
	if s, isStr := v.(string); isStr && strings.EqualFold(strings.TrimSpace(s), "latest") {
		return 0, nil
	}
	n, _, err := o.integer("version", 1, 1<<31-1)
	return int(n), err
}

func catalogSummary(e store.CatalogEntry) wire.CatalogSummary {
	return wire.CatalogSummary{CatalogID: wire.ID(e.CatalogID), Path: e.Path, Version: e.Version,
		Kind: e.Kind, CreatedAt: wire.At(e.CreatedAt)}
}

func catalogEntry(e store.CatalogEntry) wire.CatalogEntry {
	return wire.CatalogEntry{CatalogSummary: catalogSummary(e), Content: e.Content}
}

// POST /api/execute {path?, catalog_id?, version?, payload|workload, parent_execution_id?,
// execution_pool?, idempotency_key?}
func (a *API) execute(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	var req controlplane.ExecuteRequest
	if req.Path, err = o.str("path", false); err != nil {
		return nil, err
	}
	if req.CatalogID, err = o.id("catalog_id", false); err != nil {
		return nil, err
	}
	if req.Version, err = versionField(o); err != nil {
		return nil, err
	}
	if req.Payload, err = o.object("payload", "workload"); err != nil {
		return nil, err
	}
	if req.ParentExecutionID, err = o.id("parent_execution_id", false); err != nil {
		return nil, err
	}
	if req.Pool, err = o.str("execution_pool", false); err != nil {
		return nil, err
	}
	if req.IdempotencyKey, err = o.str("idempotency_key", false); err != nil {
		return nil, err
	}
	if strings.HasPrefix(req.IdempotencyKey, controlplane.ScheduleKeyPrefix) {
		return nil, invalid("idempotency_key", "keys starting with %q are the schedules' own (one per due time); choose another", controlplane.ScheduleKeyPrefix)
	}
	switch {
	case req.Path != "" && req.CatalogID != 0:
		return nil, invalid("catalog_id", "give exactly one of path and catalog_id, not both")
	case req.Path == "" && req.CatalogID == 0:
		return nil, invalid("path", "required: give the playbook's path or its catalog_id")
	case req.CatalogID != 0 && req.Version != 0:
		return nil, invalid("version", "a catalog_id names one version already; give version with path only")
	}
	st, err := a.svc.Execute(ctx, req)
	if err != nil {
		return nil, err
	}
	c.attrs.setExecution(st.ExecutionID)
	return wire.Started{ExecutionID: wire.ID(st.ExecutionID), Status: "started",
		CommandsGenerated: st.CommandsGenerated, Existing: st.Existing}, nil
}
