package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
)

// POST /api/catalog/register {content: yaml or base64 yaml, resource_type?}
func (a *API) register(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	content, err := o.Str("content", true)
	if err != nil {
		return nil, err
	}
	if err := checkResourceType(o); err != nil {
		return nil, err
	}
	text, err := a.playbookContentOf(content)
	if err != nil {
		return nil, err
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

// checkResourceType refuses a kind of resource other than a playbook, named
// in resource_type (NoETL's catalog) or resource_kind (its execute).
func checkResourceType(o obj) error {
	for _, k := range []string{"resource_type", "resource_kind"} {
		rt, err := o.Str(k, false)
		if err != nil {
			return err
		}
		if rt != "" && !strings.EqualFold(rt, controlplane.KindPlaybook) {
			return invalid(o.Name(k), "only %s is supported, got %q", controlplane.KindPlaybook, truncate(rt, 40))
		}
	}
	return nil
}

// playbookContentOf is a request's playbook text: its YAML (playbookText)
// within MaxPlaybookBytes.
func (a *API) playbookContentOf(content string) (string, error) {
	text := playbookText(content)
	if int64(len(text)) > a.opts.MaxPlaybookBytes {
		return "", errorf(http.StatusRequestEntityTooLarge, "content: the playbook is %d bytes; the limit is %d bytes (%d KiB)",
			len(text), a.opts.MaxPlaybookBytes, a.opts.MaxPlaybookBytes>>10)
	}
	return text, nil
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
	if f.Path, err = o.Str("path", false); err != nil {
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
	cursor, err := o.Str("cursor", false)
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

// MaxCatalogPageBytes bounds the playbook text one catalog list page parses
// into its entries' payloads: a page ends early (its next_cursor set) at the
// entry that passes it, so the answer stays within what one Lambda answer may
// hold (6 MB) at any page size.
const MaxCatalogPageBytes = 2 << 20

func (a *API) listCatalog(ctx context.Context, f store.CatalogFilter) (any, error) {
	if f.Limit == 0 {
		f.Limit = DefaultListLimit
	}
	f.MaxContentBytes = MaxCatalogPageBytes
	entries, err := a.svc.ListCatalog(ctx, f)
	if err != nil {
		return nil, err
	}
	out := wire.CatalogPage{Entries: make([]wire.CatalogSummary, len(entries))}
	size := 0
	for i, e := range entries {
		out.Entries[i] = catalogSummary(e)
		size += len(e.Content)
	}
	if len(entries) > 0 && (len(entries) == f.Limit || size >= f.MaxContentBytes) {
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
	pb, diags := parser.Parse([]byte(e.Content))
	out.Problems = problems(diags)
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
	path, err := o.Str("path", false)
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
	v, ok := o.Get("version")
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
	doc, _ := parser.Document([]byte(e.Content))
	return wire.CatalogSummary{CatalogID: wire.ID(e.CatalogID), Path: e.Path, Version: e.Version,
		Kind: e.Kind, CreatedAt: wire.At(e.CreatedAt), Payload: doc, Meta: wire.CatalogMeta{RegisteredAt: wire.At(e.CreatedAt)}}
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
	if err := checkResourceType(o); err != nil {
		return nil, err
	}
	var req controlplane.ExecuteRequest
	if req.Path, err = o.Str("path", false); err != nil {
		return nil, err
	}
	if req.CatalogID, err = o.id("catalog_id", false); err != nil {
		return nil, err
	}
	if req.Version, err = versionField(o); err != nil {
		return nil, err
	}
	if req.Payload, err = o.Object("payload", "workload"); err != nil {
		return nil, err
	}
	if req.ParentExecutionID, err = o.id("parent_execution_id", false); err != nil {
		return nil, err
	}
	if req.Pool, err = o.Str("execution_pool", false); err != nil {
		return nil, err
	}
	if req.IdempotencyKey, err = o.Str("idempotency_key", false); err != nil {
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
	case req.CatalogID != 0:
		// A catalog_id names one version already; NoETL's clients (its GUI's
		// terminal) send that entry's version beside it, and NoETL's servers
		// ignore it: so do we.
		req.Version = 0
	}
	st, err := a.svc.Execute(ctx, req)
	if err != nil {
		return nil, err
	}
	c.attrs.setExecution(st.ExecutionID)
	return wire.Started{ExecutionID: wire.ID(st.ExecutionID), Status: "started",
		CommandsGenerated: st.CommandsGenerated, Existing: st.Existing}, nil
}

// GET /api/catalog/{path+}/ui_schema?version=: the form of a playbook's
// workload (NoETL's ui_schema, which its GUI's Run dialog draws), inferred
// from the values the workload declares.
func (a *API) uiSchema(ctx context.Context, c *call) (any, error) {
	path := c.params["path"]
	version := 0
	if s := c.req.Query.Get("version"); s != "" && !strings.EqualFold(s, "latest") {
		n, _, err := queryInt(c.req.Query, "version", 1, 1<<31-1)
		if err != nil {
			return nil, invalid("version", "expected a version number or latest, got %q", truncate(s, 40))
		}
		version = int(n)
	}
	e, err := a.svc.CatalogByPath(ctx, path, version)
	if err != nil {
		return nil, err
	}
	fields, diags := parser.WorkloadForm([]byte(e.Content))
	if fields == nil {
		return nil, fmt.Errorf("catalog %d: the workload form: %s", e.CatalogID, diags)
	}
	doc, _ := parser.Document([]byte(e.Content))
	md, _ := doc["metadata"].(map[string]any)
	str := func(k string) wire.OptString { s, _ := md[k].(string); return wire.OptString(s) }
	exposed, _ := md["exposed_in_ui"].(bool)
	return wire.UISchema{Path: e.Path, Version: e.Version, Kind: strings.ToLower(e.Kind), Title: str("name"),
		DescriptionMarkdown: str("description"), ExposedInUI: exposed, Fields: uiFields(fields), GeneratedAt: wire.At(time.Now())}, nil
}

func uiFields(fs []parser.FormField) []wire.UIField {
	out := make([]wire.UIField, len(fs))
	for i, f := range fs {
		out[i] = wire.UIField{Name: f.Name, Kind: f.Kind, Default: wire.Value{V: f.Default},
			Description: wire.OptString(f.Description), Secret: f.Secret || redact.SecretKey(f.Name),
			CredentialGlob: wire.OptString(f.Credential)}
		if f.Options != nil {
			opts := make([]wire.Value, len(f.Options))
			for j, o := range f.Options {
				opts[j] = wire.Value{V: o}
			}
			out[i].Options = &opts
		}
		if f.Kind == "object" {
			children := uiFields(f.Children)
			out[i].Children = &children
		}
	}
	return out
}

// GET /api/catalog/playbook/content?playbook_id=: a playbook's YAML, by
// catalog_id or by path (its latest version); what NoETL's GUI asks for to
// draw a playbook's flow.
func (a *API) playbookContent(ctx context.Context, c *call) (any, error) {
	ref := c.req.Query.Get("playbook_id")
	if ref == "" {
		return nil, invalid("playbook_id", "required: a catalog_id or a playbook path")
	}
	var (
		e   store.CatalogEntry
		err error
	)
	if id, perr := strconv.ParseInt(ref, 10, 64); perr == nil && id > 0 {
		e, err = a.svc.Catalog(ctx, id)
	} else {
		e, err = a.svc.CatalogByPath(ctx, ref, 0)
	}
	if err != nil {
		return nil, err
	}
	return wire.PlaybookContent{CatalogID: wire.ID(e.CatalogID), Path: e.Path, Version: e.Version, Content: e.Content}, nil
}

// POST /api/catalog/playbooks/validate {content}: what register would say of
// a playbook, without registering it.
func (a *API) validatePlaybook(_ context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	content, err := o.Str("content", true)
	if err != nil {
		return nil, err
	}
	text, err := a.playbookContentOf(content)
	if err != nil {
		return nil, err
	}
	_, diags := parser.Parse([]byte(text))
	out := wire.Validation{Valid: !diags.HasErrors(), Errors: []string{}, Warnings: []string{}, Problems: problems(diags)}
	for _, d := range diags {
		if d.Severity == playbook.SeverityError {
			out.Errors = append(out.Errors, d.String())
		} else {
			out.Warnings = append(out.Warnings, d.String())
		}
	}
	return out, nil
}

func problems(diags playbook.Diagnostics) []wire.Problem {
	out := make([]wire.Problem, len(diags))
	for i, d := range diags {
		out[i] = wire.Problem{Severity: string(d.Severity), Path: d.Path, Line: d.Line, Message: d.Message}
	}
	return out
}
