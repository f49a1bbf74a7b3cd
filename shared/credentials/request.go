package credentials

import (
	"context"
	"regexp"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
)

// NoETL's credential shapes: the create request checked here and the replies
// (shared/wire), so that the API's routes are thin and the functions without
// a keychain link none of this.

// nameRE is what a credential name may be: what a playbook's auth: can name
// and a URL path segment can carry. A name of digits only would be read as
// an id.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,200}$`)

// NewInput checks NoETL's CredentialCreateRequest, read by jsonx.Read: the
// name a playbook's auth: and a URL path can carry, data given, type generic
// when none. Its errors are FieldErrors naming the field.
func NewInput(r wire.CredentialRequest) (Input, error) {
	in := Input{Name: strings.TrimSpace(r.Name), Type: strings.TrimSpace(r.Type), Data: r.Data, Meta: r.Meta,
		Tags: r.Tags, Description: r.Description, Scope: r.Scope}
	if !nameRE.MatchString(in.Name) {
		return in, jsonx.Refuse("name", "%q: use 1-200 letters, digits and _ . : @ - (what auth: and a URL path can carry)", jsonx.Cut(in.Name, 60))
	}
	if _, err := strconv.ParseInt(in.Name, 10, 64); err == nil {
		return in, jsonx.Refuse("name", "%q: digits only would be read as an id; add a letter", in.Name)
	}
	if in.Type == "" {
		in.Type = "generic"
	}
	if in.Data == nil {
		return in, jsonx.Refuse("data", "required: the credential's secret fields as an object")
	}
	if in.Tags == nil {
		in.Tags = []string{}
	}
	return in, nil
}

// JSON is a credential in NoETL's reply shape.
func (c Credential) JSON() wire.Credential {
	tags := c.Tags
	if tags == nil {
		tags = []string{}
	}
	out := wire.Credential{ID: wire.ID(c.ID), Name: c.Name, Type: c.Type, Meta: c.Meta, Tags: tags, Description: c.Description,
		KeyID: c.KeyID, CreatedAt: wire.At(c.CreatedAt), UpdatedAt: wire.At(c.UpdatedAt), Data: c.Data}
	if !c.Scope.Empty() {
		scope := c.Scope
		out.Scope = &scope
	}
	return out
}

// readJSON is a logged read in the reply shape.
func readJSON(r store.CredentialRead) wire.CredentialRead {
	return wire.CredentialRead{ReadID: wire.ID(r.ReadID), ReadAt: wire.At(r.ReadAt), Name: r.Name,
		CredentialID: wire.OptID(r.CredentialID), ExecutionID: wire.OptID(r.ExecutionID), IncludeData: r.IncludeData,
		Outcome: r.Outcome, Reason: wire.OptString(r.Reason), Scope: r.Scope, Token: wire.OptString(r.Token),
		WorkerID: wire.OptString(r.WorkerID), CommandID: wire.OptString(r.CommandID), RequestID: wire.OptString(r.RequestID)}
}

// The API's routes (api.Keychain): NoETL's shapes over the Service.

// PutJSON is POST /api/credentials: the request checked, the credential stored.
func (s *Service) PutJSON(ctx context.Context, r wire.CredentialRequest) (wire.Credential, error) {
	in, err := NewInput(r)
	if err != nil {
		return wire.Credential{}, err
	}
	c, created, err := s.Put(ctx, in)
	if err != nil {
		return wire.Credential{}, err
	}
	out := c.JSON()
	out.Created = &created
	return out, nil
}

// GetJSON is GET /api/credentials/{identifier} (Get).
func (s *Service) GetJSON(ctx context.Context, identifier string, read store.CredentialRead, mayReadData bool, claim store.ClaimAsk) (wire.Credential, error) {
	c, err := s.Get(ctx, identifier, read, mayReadData, claim)
	return c.JSON(), err
}

// ListJSON is GET /api/credentials?type=&q=.
func (s *Service) ListJSON(ctx context.Context, typ, query string) (wire.CredentialList, error) {
	list, err := s.List(ctx, typ, query)
	if err != nil {
		return wire.CredentialList{}, err
	}
	out := wire.CredentialList{Items: make([]wire.Credential, len(list)), Filter: wire.CredentialFilter{Type: typ, Q: query}}
	for i, c := range list {
		out.Items[i] = c.JSON()
	}
	return out, nil
}

// DeleteJSON is DELETE /api/credentials/{identifier}.
func (s *Service) DeleteJSON(ctx context.Context, identifier string) (wire.CredentialDeleted, error) {
	id, err := s.Delete(ctx, identifier)
	if err != nil {
		return wire.CredentialDeleted{}, err
	}
	return wire.CredentialDeleted{Message: "Credential deleted successfully", ID: wire.ID(id)}, nil
}

// ReadsJSON is GET /api/credentials/{identifier}/reads.
func (s *Service) ReadsJSON(ctx context.Context, identifier string, executionID int64, limit int) (wire.CredentialReads, error) {
	reads, err := s.Reads(ctx, identifier, executionID, limit)
	if err != nil {
		return wire.CredentialReads{}, err
	}
	out := wire.CredentialReads{Items: make([]wire.CredentialRead, len(reads))}
	for i, r := range reads {
		out.Items[i] = readJSON(r)
	}
	return out, nil
}

// RotateJSON is POST /api/credentials/rotate.
func (s *Service) RotateJSON(ctx context.Context, newKey bool, limit int) (wire.Rotation, error) {
	r, err := s.Rotate(ctx, newKey, limit)
	return wire.Rotation{KeyID: r.KeyID, NewKey: r.NewKey, Resealed: r.Resealed, Remaining: r.Remaining}, err
}
