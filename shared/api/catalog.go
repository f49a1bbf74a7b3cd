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
func (a *API) register(ctx context.Context, c *call, r wire.RegisterRequest) (wire.Registered, error) {
	if err := playbookKind("resource_type", r.ResourceType); err != nil {
		return wire.Registered{}, err
	}
	text, err := a.playbookContentOf(r.Content)
	if err != nil {
		return wire.Registered{}, err
	}
	reg, err := a.svc.Register(ctx, text)
	if err != nil {
		return wire.Registered{}, err
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

// playbookKind refuses a kind of resource other than a playbook, named in
// resource_type (NoETL's catalog) or resource_kind (its execute).
func playbookKind(field, kind string) error {
	if kind != "" && !strings.EqualFold(kind, controlplane.KindPlaybook) {
		return invalid(field, "only %s is supported, got %q", controlplane.KindPlaybook, jsonx.Cut(kind, 40))
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
func (a *API) listCatalogQuery(ctx context.Context, c *call, q catalogQuery) (wire.CatalogPage, error) {
	f := store.CatalogFilter{Path: q.Path, Limit: int(q.Limit)}
	if s := string(q.Latest); s != "" {
		switch strings.ToLower(s) {
		case "true", "1":
			f.LatestOnly = true
		case "false", "0":
		default:
			return wire.CatalogPage{}, invalid("latest", "expected true or false, got %q", jsonx.Cut(s, 40))
		}
	}
	if q.Cursor != "" {
		var err error
		if f.After, err = decodeCatalogCursor(q.Cursor); err != nil {
			return wire.CatalogPage{}, err
		}
	}
	return a.listCatalog(ctx, f)
}

// POST /api/catalog/list {path?, limit?, cursor?, latest?, resource_type?}:
// NoETL's spelling of GET /api/catalog.
func (a *API) listCatalogBody(ctx context.Context, c *call, r wire.CatalogListRequest) (wire.CatalogPage, error) {
	if isCredentialKind(r.ResourceType) {
		return a.listCredentialEntries(ctx, r)
	}
	if err := playbookKind("resource_type", r.ResourceType); err != nil {
		return wire.CatalogPage{}, invalid("resource_type", "expected %s or %s, got %q", controlplane.KindPlaybook, controlplane.KindCredential, jsonx.Cut(r.ResourceType, 40))
	}
	f := store.CatalogFilter{Path: r.Path, Limit: r.Limit, LatestOnly: r.Latest}
	if r.Cursor != "" {
		var err error
		if f.After, err = decodeCatalogCursor(r.Cursor); err != nil {
			return wire.CatalogPage{}, err
		}
	}
	return a.listCatalog(ctx, f)
}

// isCredentialKind reports whether a catalog list's resource_type names
// credentials, in NoETL's spellings.
func isCredentialKind(kind string) bool {
	switch strings.ToLower(kind) {
	case "credential", "credentials", "secret", "secrets":
		return true
	}
	return false
}

// listCredentialEntries is the catalog list of kind Credential (NoETL's
// `catalog list Credential`): the keychain's credentials by name, path
// filtering by a substring of the name, each with its metadata and never
// its data (the rows hold it sealed; it is not opened here).
func (a *API) listCredentialEntries(ctx context.Context, r wire.CatalogListRequest) (wire.CatalogPage, error) {
	if r.Cursor != "" {
		return wire.CatalogPage{}, invalid("cursor", "a list of credentials is one page (up to %d); leave cursor out", MaxListLimit)
	}
	limit := r.Limit
	if limit == 0 {
		limit = MaxListLimit
	}
	rows, err := a.svc.ListCredentialEntries(ctx, r.Path, limit)
	if err != nil {
		return wire.CatalogPage{}, err
	}
	out := wire.CatalogPage{Entries: make([]wire.CatalogSummary, len(rows))}
	for i, c := range rows {
		tags := c.Tags
		if tags == nil {
			tags = []string{}
		}
		out.Entries[i] = wire.CatalogSummary{CatalogID: wire.ID(c.CredentialID), Path: c.Name, Version: 1, Kind: controlplane.KindCredential,
			CreatedAt: wire.At(c.CreatedAt), Meta: wire.CatalogMeta{RegisteredAt: wire.At(c.CreatedAt)},
			Credential: &wire.Credential{ID: wire.ID(c.CredentialID), Name: c.Name, Type: c.Type, Meta: c.Meta, Tags: tags,
				Description: c.Description, KeyID: c.KeyID, CreatedAt: wire.At(c.CreatedAt), UpdatedAt: wire.At(c.UpdatedAt)}}
	}
	return out, nil
}

// MaxCatalogPageBytes bounds a catalog list page: the stored playbook text
// the page reads, and the JSON of the payloads it answers (a playbook's
// aliases may expand its few KiB to MaxExpandedBytes of payload). A page ends
// early (its next_cursor set) before the entry that would pass it, holding at
// least one entry, so the answer stays within what one Lambda answer may hold
// (6 MB) at any page size and whatever the aliases.
const MaxCatalogPageBytes = 2 << 20

func (a *API) listCatalog(ctx context.Context, f store.CatalogFilter) (wire.CatalogPage, error) {
	if f.Limit == 0 {
		f.Limit = DefaultListLimit
	}
	f.MaxContentBytes = MaxCatalogPageBytes
	entries, err := a.svc.ListCatalog(ctx, f)
	if err != nil {
		return wire.CatalogPage{}, err
	}
	out := wire.CatalogPage{Entries: make([]wire.CatalogSummary, 0, len(entries))}
	content, sent := 0, 0
	for _, e := range entries {
		s := catalogSummary(e)
		// What the payload costs the answer is its JSON, not its YAML.
		b, err := s.Payload.MarshalJSON()
		if err != nil {
			return wire.CatalogPage{}, fmt.Errorf("catalog %d: its payload: %w", e.CatalogID, err)
		}
		if len(out.Entries) > 0 && sent+len(b) > MaxCatalogPageBytes {
			break
		}
		out.Entries = append(out.Entries, s)
		content += len(e.Content)
		sent += len(b)
	}
	if n := len(out.Entries); n > 0 && (n < len(entries) || n == f.Limit || content >= f.MaxContentBytes) {
		last := entries[n-1]
		out.NextCursor = wire.OptString(encodeCatalogCursor(store.CatalogCursor{Path: last.Path, Version: last.Version}))
	}
	return out, nil
}

// GET /api/catalog/{catalog_id}
func (a *API) getCatalog(ctx context.Context, c *call, p catalogPath) (wire.CatalogDetail, error) {
	id := int64(p.CatalogID)
	e, err := a.svc.Catalog(ctx, id)
	if err != nil {
		return wire.CatalogDetail{}, err
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
			return wire.CatalogDetail{}, fmt.Errorf("catalog %d: the step graph: %w", id, err)
		}
		out.Graph = g
	}
	return out, nil
}

// POST /api/catalog/resource {catalog_id} or {path, version?}: NoETL's spelling
// of GET /api/catalog/{catalog_id}, also by path.
func (a *API) catalogResource(ctx context.Context, c *call, r wire.CatalogResourceRequest) (wire.CatalogEntry, error) {
	if err := playbookKind("resource_type", r.ResourceType); err != nil {
		return wire.CatalogEntry{}, err
	}
	var (
		e   store.CatalogEntry
		err error
	)
	if r.CatalogID != 0 {
		e, err = a.svc.Catalog(ctx, int64(r.CatalogID))
	} else {
		e, err = a.svc.CatalogByPath(ctx, r.Path, int(r.Version))
	}
	if err != nil {
		return wire.CatalogEntry{}, err
	}
	return catalogEntry(e), nil
}

func catalogSummary(e store.CatalogEntry) wire.CatalogSummary {
	doc, _ := parser.Document([]byte(e.Content))
	return wire.CatalogSummary{CatalogID: wire.ID(e.CatalogID), Path: e.Path, Version: e.Version,
		Kind: e.Kind, CreatedAt: wire.At(e.CreatedAt), Payload: doc, Meta: wire.CatalogMeta{RegisteredAt: wire.At(e.CreatedAt)}}
}

func catalogEntry(e store.CatalogEntry) wire.CatalogEntry {
	return wire.CatalogEntry{CatalogSummary: catalogSummary(e), Content: e.Content}
}

// GET /api/catalog/{path+}/ui_schema?version=: the form of a playbook's
// workload (NoETL's ui_schema, which its GUI's Run dialog draws), inferred
// from the values the workload declares.
func (a *API) uiSchema(ctx context.Context, c *call, q uiSchemaQuery) (wire.UISchema, error) {
	version := 0
	if s := q.Version; s != "" && !strings.EqualFold(s, "latest") {
		n, err := intParam("version", s, 1, 1<<31-1)
		if err != nil {
			return wire.UISchema{}, invalid("version", "expected a version number or latest, got %q", jsonx.Cut(s, 40))
		}
		version = int(n)
	}
	e, err := a.svc.CatalogByPath(ctx, q.Path, version)
	if err != nil {
		return wire.UISchema{}, err
	}
	fields, diags := parser.WorkloadForm([]byte(e.Content))
	if fields == nil {
		return wire.UISchema{}, fmt.Errorf("catalog %d: the workload form: %s", e.CatalogID, diags)
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
func (a *API) playbookContent(ctx context.Context, c *call, q playbookContentQuery) (wire.PlaybookContent, error) {
	ref := q.PlaybookID
	if ref == "" {
		return wire.PlaybookContent{}, invalid("playbook_id", "required: a catalog_id or a playbook path")
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
		return wire.PlaybookContent{}, err
	}
	return wire.PlaybookContent{CatalogID: wire.ID(e.CatalogID), Path: e.Path, Version: e.Version, Content: e.Content}, nil
}

// POST /api/catalog/playbooks/validate {content}: what register would say of
// a playbook, without registering it.
func (a *API) validatePlaybook(_ context.Context, c *call, r wire.ValidateRequest) (wire.Validation, error) {
	text, err := a.playbookContentOf(r.Content)
	if err != nil {
		return wire.Validation{}, err
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
