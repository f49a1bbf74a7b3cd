package api

import (
	"context"
	"regexp"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/wire"
)

// The keychain's routes, in NoETL's shapes (its credential API): users
// create, list, read and delete credentials; workers read a credential's
// data for the execution they run. controlplane/keychain.go owns the rules.

// credentialNameRE is what a credential name may be: what a playbook's auth:
// can name and a URL path segment can carry. A name of digits only would be
// read as an id.
var credentialNameRE = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,200}$`)

// credentialInput reads NoETL's CredentialCreateRequest: name, type (alias
// credential_type, default generic), data (an object), meta, tags (a list, or
// NoETL's comma-separated string), description.
func credentialInput(o obj) (controlplane.CredentialInput, error) {
	var in controlplane.CredentialInput
	name, err := o.str("name", true)
	if err != nil {
		return in, err
	}
	in.Name = strings.TrimSpace(name)
	if !credentialNameRE.MatchString(in.Name) {
		return in, invalid("name", "%q: use 1-200 letters, digits and _ . : @ - (what auth: names and a URL path can carry)", truncate(in.Name, 60))
	}
	if _, err := strconv.ParseInt(in.Name, 10, 64); err == nil {
		return in, invalid("name", "%q: a name of digits only would be read as a credential id; add a letter", in.Name)
	}
	if in.Type, err = o.strOf("type", false, "credential_type"); err != nil {
		return in, err
	}
	if in.Type = strings.TrimSpace(in.Type); in.Type == "" {
		in.Type = "generic"
	}
	data, err := o.object("data")
	if err != nil {
		return in, err
	}
	if data == nil {
		return in, invalid("data", "required: the credential's secret fields as an object, e.g. {\"password\": \"…\"}")
	}
	in.Data = data
	if in.Meta, err = o.object("meta"); err != nil {
		return in, err
	}
	if in.Description, err = o.str("description", false); err != nil {
		return in, err
	}
	in.Tags = []string{}
	if v, ok := o.get("tags"); ok {
		switch x := v.(type) {
		case string:
			for _, t := range strings.Split(x, ",") {
				if t = strings.TrimSpace(t); t != "" {
					in.Tags = append(in.Tags, t)
				}
			}
		case []any:
			for i, t := range x {
				s, isStr := t.(string)
				if !isStr {
					return in, invalid("tags["+strconv.Itoa(i)+"]", "expected string, got %s", jsonx.TypeName(t))
				}
				in.Tags = append(in.Tags, s)
			}
		default:
			return in, invalid("tags", "expected a list of strings or a comma-separated string, got %s", jsonx.TypeName(v))
		}
	}
	return in, nil
}

func credentialJSON(c controlplane.Credential) wire.Credential {
	tags := c.Tags
	if tags == nil {
		tags = []string{}
	}
	return wire.Credential{ID: wire.ID(c.ID), Name: c.Name, Type: c.Type, Meta: c.Meta, Tags: tags, Description: c.Description,
		KeyID: c.KeyID, CreatedAt: wire.At(c.CreatedAt), UpdatedAt: wire.At(c.UpdatedAt), Data: c.Data}
}

// POST /api/credentials: create or replace (NoETL's upsert by name).
func (a *API) putCredential(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	in, err := credentialInput(o)
	if err != nil {
		return nil, err
	}
	cred, created, err := a.svc.PutCredential(ctx, in)
	if err != nil {
		return nil, err
	}
	out := credentialJSON(cred)
	out.Created = &created
	return out, nil
}

// GET /api/credentials?type=&q=: every credential, never its data.
func (a *API) listCredentials(ctx context.Context, c *call) (any, error) {
	typ, q := c.req.Query.Get("type"), c.req.Query.Get("q")
	list, err := a.svc.ListCredentials(ctx, typ, q)
	if err != nil {
		return nil, err
	}
	out := wire.CredentialList{Items: make([]wire.Credential, len(list)), Filter: wire.CredentialFilter{Type: typ, Q: q}}
	for i, cr := range list {
		out.Items[i] = credentialJSON(cr)
	}
	return out, nil
}

// GET /api/credentials/{identifier}?include_data=&execution_id=&worker_id=:
// one credential by id or name; its data only to the worker scope for a
// running execution (controlplane.GetCredential). Every read is logged.
func (a *API) getCredential(ctx context.Context, c *call) (any, error) {
	q := c.req.Query
	include := false
	if s := q.Get("include_data"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, invalid("include_data", "expected true or false, got %q", truncate(s, 20))
		}
		include = b
	}
	eid, err := queryID(q, "execution_id")
	if err != nil {
		return nil, err
	}
	if eid != 0 {
		c.attrs.executionID = eid
	}
	r := controlplane.CredentialRequest{IncludeData: include, ExecutionID: eid, Reader: controlplane.Reader{
		Scope: c.auth.scopeLabel(), MayReadData: c.auth.scopes.Has(config.ScopeWorker), Token: c.auth.token,
		WorkerID: q.Get("worker_id"), RequestID: c.req.RequestID}}
	cred, err := a.svc.GetCredential(ctx, c.params["identifier"], r)
	if err != nil {
		return nil, err
	}
	return credentialJSON(cred), nil
}

// DELETE /api/credentials/{identifier}.
func (a *API) deleteCredential(ctx context.Context, c *call) (any, error) {
	id, err := a.svc.DeleteCredential(ctx, c.params["identifier"])
	if err != nil {
		return nil, err
	}
	return wire.CredentialDeleted{Message: "Credential deleted successfully", ID: wire.ID(id)}, nil
}

// GET /api/credentials/{identifier}/reads?execution_id=&limit=: the read log
// of a credential name, newest first.
func (a *API) listCredentialReads(ctx context.Context, c *call) (any, error) {
	limit, ok, err := queryInt(c.req.Query, "limit", 1, MaxListLimit)
	if err != nil {
		return nil, err
	}
	if !ok {
		limit = DefaultListLimit
	}
	eid, err := queryID(c.req.Query, "execution_id")
	if err != nil {
		return nil, err
	}
	reads, err := a.svc.CredentialReads(ctx, c.params["identifier"], eid, int(limit))
	if err != nil {
		return nil, err
	}
	out := wire.CredentialReads{Items: make([]wire.CredentialRead, len(reads))}
	for i, r := range reads {
		out.Items[i] = wire.CredentialRead{ReadID: wire.ID(r.ReadID), ReadAt: wire.At(r.ReadAt), Name: r.Name,
			CredentialID: wire.OptID(r.CredentialID), ExecutionID: wire.OptID(r.ExecutionID), IncludeData: r.IncludeData,
			Outcome: r.Outcome, Reason: wire.OptString(r.Reason), Scope: r.Scope, Token: wire.OptString(r.Token),
			WorkerID: wire.OptString(r.WorkerID), RequestID: wire.OptString(r.RequestID)}
	}
	return out, nil
}

// POST /api/credentials/rotate {new_key?, limit?}: reseal credentials under
// the keychain's current key (with new_key, a new one first: key files only).
func (a *API) rotateCredentials(ctx context.Context, c *call) (any, error) {
	o, err := decodeBody(c.req.Body)
	if err != nil {
		return nil, err
	}
	newKey, err := o.boolean("new_key")
	if err != nil {
		return nil, err
	}
	limit, _, err := o.integer("limit", 1, 1000)
	if err != nil {
		return nil, err
	}
	r, err := a.svc.RotateCredentials(ctx, newKey, int(limit))
	if err != nil {
		return nil, err
	}
	return wire.Rotation{KeyID: r.KeyID, NewKey: r.NewKey, Resealed: r.Resealed, Remaining: r.Remaining}, nil
}
