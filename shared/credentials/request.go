package credentials

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/credscope"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
)

// NoETL's credential shapes: the create request read here and the replies
// (shared/wire), so that the API's routes are thin and the functions without
// a keychain link none of this.

// nameRE is what a credential name may be: what a playbook's auth: can name
// and a URL path segment can carry. A name of digits only would be read as
// an id.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.:@-]{1,200}$`)

func invalid(field, format string, args ...any) error {
	return &noetlwire.FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// optional reads an optional field of body: absent and null are nil.
func optional(body map[string]any, keys ...string) (string, any, error) {
	var (
		found string
		val   any
	)
	for _, k := range keys {
		v := body[k]
		if v == nil {
			continue
		}
		if found == "" {
			found, val = k, v
		} else if string(jsonx.MustMarshal(v)) != string(jsonx.MustMarshal(val)) {
			return "", nil, invalid(k, "is an alias of %s; give one of them", found)
		}
	}
	return found, val, nil
}

func text(body map[string]any, keys ...string) (string, error) {
	k, v, err := optional(body, keys...)
	if err != nil || v == nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", invalid(k, "expected string, got %s", jsonx.TypeName(v))
	}
	return s, nil
}

func object(body map[string]any, key string) (map[string]any, error) {
	v := body[key]
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, invalid(key, "expected object, got %s", jsonx.TypeName(v))
	}
	return m, nil
}

// ReadInput reads NoETL's CredentialCreateRequest: name, type (alias
// credential_type, default generic), data (an object), meta, tags (a list,
// or NoETL's comma-separated string), description; and ours, scope
// ({playbooks, pools, hosts}: shared/credscope; absent or null keeps the
// stored scope, {} clears it). Its errors are noetlwire.FieldErrors naming
// the field.
func ReadInput(body map[string]any) (Input, error) {
	var in Input
	name, err := text(body, "name")
	if err != nil {
		return in, err
	}
	in.Name = strings.TrimSpace(name)
	if !nameRE.MatchString(in.Name) {
		if len(in.Name) > 60 {
			in.Name = in.Name[:60] + "…"
		}
		return in, invalid("name", "%q: use 1-200 letters, digits and _ . : @ - (what auth: and a URL path can carry)", in.Name)
	}
	if _, err := strconv.ParseInt(in.Name, 10, 64); err == nil {
		return in, invalid("name", "%q: digits only would be read as an id; add a letter", in.Name)
	}
	if in.Type, err = text(body, "type", "credential_type"); err != nil {
		return in, err
	}
	if in.Type = strings.TrimSpace(in.Type); in.Type == "" {
		in.Type = "generic"
	}
	if in.Data, err = object(body, "data"); err != nil {
		return in, err
	}
	if in.Data == nil {
		return in, invalid("data", "required: the credential's secret fields as an object")
	}
	if in.Meta, err = object(body, "meta"); err != nil {
		return in, err
	}
	if in.Description, err = text(body, "description"); err != nil {
		return in, err
	}
	if v := body["scope"]; v != nil {
		scope, err := credscope.Read(v)
		if err != nil {
			var fe *credscope.FieldError
			if errors.As(err, &fe) {
				return in, invalid(fe.Field, "%s", fe.Message)
			}
			return in, err
		}
		in.Scope = &scope
	}
	in.Tags = []string{}
	switch x := body["tags"].(type) {
	case nil:
	case string:
		for _, t := range strings.Split(x, ",") {
			if t = strings.TrimSpace(t); t != "" {
				in.Tags = append(in.Tags, t)
			}
		}
	case []any:
		for i, t := range x {
			s, ok := t.(string)
			if !ok {
				return in, invalid("tags["+strconv.Itoa(i)+"]", "expected string, got %s", jsonx.TypeName(t))
			}
			in.Tags = append(in.Tags, s)
		}
	default:
		return in, invalid("tags", "expected a list of strings or a comma-separated string, got %s", jsonx.TypeName(x))
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

// PutJSON is POST /api/credentials: the body read, the credential stored.
func (s *Service) PutJSON(ctx context.Context, body map[string]any) (wire.Credential, error) {
	in, err := ReadInput(body)
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
