package controlplane

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/keychain"
	"github.com/noetl-go/noetl/shared/store"
)

// The keychain: credentials stored sealed (shared/keychain) in the cluster
// database, NoETL's credential API over them, and the log of every read.
// This file owns the credential lifecycle and the rule of who gets a
// credential's data: the worker scope, for an execution that is running.

// CredentialInput is a credential to create or replace (NoETL's
// CredentialCreateRequest).
type CredentialInput struct {
	Name        string
	Type        string
	Data        map[string]any
	Meta        map[string]any
	Tags        []string
	Description string
}

// Credential is a keychain entry as served: Data only when it was asked for
// and given.
type Credential struct {
	ID          int64
	Name        string
	Type        string
	Meta        map[string]any
	Tags        []string
	Description string
	KeyID       string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Data        map[string]any
}

// Reader is who reads a credential, as the API authenticated them.
type Reader struct {
	// Scope names the caller's token scopes ("worker", "api", "open" when
	// the API runs without tokens).
	Scope string
	// MayReadData is true for the worker scope (and an open API): only they
	// get a credential's data.
	MayReadData bool
	// Token is a fingerprint of the bearer token (never the token).
	Token     string
	WorkerID  string
	RequestID string
}

// CredentialRequest is one read of a credential.
type CredentialRequest struct {
	IncludeData bool
	ExecutionID int64
	Reader      Reader
}

// MaxCredentialDataBytes bounds a credential's data (its JSON).
const MaxCredentialDataBytes = 64 << 10

// aad is the associated data a credential's data is sealed with: its name,
// so a ciphertext moved onto another row does not open.
func aad(name string) string { return "credential:" + name }

func (s *Service) ring() (keychain.KeyRing, error) {
	if s.cfg.KeyRing == nil {
		return nil, Errorf(ErrUnavailable, "this server has no keychain key: set NOETL_KEYCHAIN_KMS_KEY_ID (a KMS key, in AWS) or NOETL_KEYCHAIN_KEY_FILE (a key file, locally)")
	}
	return s.cfg.KeyRing, nil
}

// PutCredential creates or replaces a credential; its data is sealed before
// it reaches the database.
func (s *Service) PutCredential(ctx context.Context, in CredentialInput) (Credential, bool, error) {
	ring, err := s.ring()
	if err != nil {
		return Credential{}, false, err
	}
	plain, err := jsonx.Marshal(in.Data)
	if err != nil {
		return Credential{}, false, err
	}
	defer clear(plain)
	if len(plain) > MaxCredentialDataBytes {
		return Credential{}, false, Errorf(ErrInvalid, "data: %d bytes of JSON; a credential holds at most %d (MaxCredentialDataBytes)", len(plain), MaxCredentialDataBytes)
	}
	sealed, err := keychain.Seal(ctx, ring, aad(in.Name), plain)
	if err != nil {
		return Credential{}, false, err
	}
	row, created, err := store.PutCredential(ctx, s.st.Cluster(), store.Credential{Name: in.Name, Type: in.Type, Meta: in.Meta,
		Tags: in.Tags, Description: in.Description, KeyID: sealed.KeyID, WrappedKey: sealed.WrappedKey, Nonce: sealed.Nonce,
		Ciphertext: sealed.Ciphertext})
	if err != nil {
		return Credential{}, false, err
	}
	s.log.InfoContext(ctx, "credential stored", "credential", in.Name, "type", in.Type, "created", created, "key_id", sealed.KeyID)
	return credentialOf(row), created, nil
}

func credentialOf(r store.Credential) Credential {
	return Credential{ID: r.CredentialID, Name: r.Name, Type: r.Type, Meta: r.Meta, Tags: r.Tags, Description: r.Description,
		KeyID: r.KeyID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// GetCredential reads a credential by id or name. Its data is given only
// when asked for, to a reader that may read data (the worker scope), for a
// running execution named by ExecutionID; otherwise the request is refused
// (ErrForbidden, naming why). Every read, served or not, is logged without
// the data; a read that cannot be logged is not served.
func (s *Service) GetCredential(ctx context.Context, identifier string, r CredentialRequest) (Credential, error) {
	read := store.CredentialRead{Name: identifier, ExecutionID: r.ExecutionID, IncludeData: r.IncludeData, Scope: r.Reader.Scope,
		Token: r.Reader.Token, WorkerID: r.Reader.WorkerID, RequestID: r.Reader.RequestID}
	row, err := store.GetCredential(ctx, s.st.Cluster(), identifier)
	if errors.Is(err, store.ErrNotFound) {
		read.Outcome = store.ReadNotFound
		if lerr := s.logRead(ctx, read); lerr != nil {
			return Credential{}, lerr
		}
		return Credential{}, Errorf(ErrNotFound, "credential %q not found", identifier)
	}
	if err != nil {
		return Credential{}, err
	}
	read.Name, read.CredentialID = row.Name, row.CredentialID
	c := credentialOf(row)
	if !r.IncludeData {
		read.Outcome = store.ReadServed
		return c, s.logRead(ctx, read)
	}
	if why := s.dataRefusal(ctx, r); why != "" {
		read.Outcome, read.Reason = store.ReadRefused, why
		if lerr := s.logRead(ctx, read); lerr != nil {
			return Credential{}, lerr
		}
		s.log.WarnContext(ctx, "credential data refused", "credential", row.Name, "execution_id", r.ExecutionID, "scope", r.Reader.Scope, "reason", why)
		return Credential{}, Errorf(ErrForbidden, "credential %q: %s", row.Name, why)
	}
	ring, err := s.ring()
	if err != nil {
		return Credential{}, err
	}
	plain, err := keychain.Open(ctx, ring, aad(row.Name), keychain.Sealed{KeyID: row.KeyID, WrappedKey: row.WrappedKey, Nonce: row.Nonce, Ciphertext: row.Ciphertext})
	if err != nil {
		return Credential{}, fmt.Errorf("credential %q: %w", row.Name, err)
	}
	data, err := jsonx.DecodeObject(plain)
	clear(plain)
	if err != nil {
		return Credential{}, fmt.Errorf("credential %q: its data is not a JSON object: %w", row.Name, err)
	}
	read.Outcome = store.ReadServed
	if err := s.logRead(ctx, read); err != nil {
		return Credential{}, err
	}
	s.log.InfoContext(ctx, "credential data served", "credential", row.Name, "execution_id", r.ExecutionID, "scope", r.Reader.Scope, "worker_id", r.Reader.WorkerID)
	c.Data = data
	return c, nil
}

// dataRefusal says why a read may not have the data, or "".
func (s *Service) dataRefusal(ctx context.Context, r CredentialRequest) string {
	if !r.Reader.MayReadData {
		return fmt.Sprintf("include_data=true is answered only to the worker scope; this token has the %s scope", r.Reader.Scope)
	}
	if r.ExecutionID == 0 {
		return "include_data=true needs execution_id, the running execution the credential is for"
	}
	row, _, _, err := s.readExecution(ctx, r.ExecutionID)
	if err != nil {
		return fmt.Sprintf("execution %d is not known here", r.ExecutionID)
	}
	if terminal(row.Status) {
		return fmt.Sprintf("execution %d is %s; credential data is given only while an execution runs", r.ExecutionID, row.Status)
	}
	return ""
}

func (s *Service) logRead(ctx context.Context, r store.CredentialRead) error {
	if err := store.RecordCredentialRead(ctx, s.st.Cluster(), r); err != nil {
		return fmt.Errorf("the read of credential %q was not served: logging it failed: %w", r.Name, err)
	}
	return nil
}

// ListCredentials lists credentials (never their data): of a type when typ
// is set, whose name or description contains query when it is.
func (s *Service) ListCredentials(ctx context.Context, typ, query string) ([]Credential, error) {
	rows, err := store.ListCredentials(ctx, s.st.Cluster(), store.CredentialFilter{Type: typ, Query: query})
	if err != nil {
		return nil, err
	}
	out := make([]Credential, len(rows))
	for i, r := range rows {
		out[i] = credentialOf(r)
	}
	return out, nil
}

// DeleteCredential deletes a credential by id or name and returns its id.
func (s *Service) DeleteCredential(ctx context.Context, identifier string) (int64, error) {
	row, err := store.GetCredential(ctx, s.st.Cluster(), identifier)
	if errors.Is(err, store.ErrNotFound) {
		return 0, Errorf(ErrNotFound, "credential %q not found", identifier)
	}
	if err != nil {
		return 0, err
	}
	if err := store.DeleteCredential(ctx, s.st.Cluster(), row.CredentialID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return 0, Errorf(ErrNotFound, "credential %q not found", identifier)
		}
		return 0, err
	}
	s.log.InfoContext(ctx, "credential deleted", "credential", row.Name)
	return row.CredentialID, nil
}

// CredentialReads lists the logged reads of a credential, newest first (of
// one execution when executionID is set). The log is kept by name, which
// outlives a deleted credential; an identifier of digits that is a
// credential's id stands for its name.
func (s *Service) CredentialReads(ctx context.Context, identifier string, executionID int64, limit int) ([]store.CredentialRead, error) {
	name := identifier
	if _, err := strconv.ParseInt(identifier, 10, 64); err == nil {
		if row, err := store.GetCredential(ctx, s.st.Cluster(), identifier); err == nil {
			name = row.Name
		}
	}
	return store.ListCredentialReads(ctx, s.st.Cluster(), store.CredentialReadFilter{Name: name, ExecutionID: executionID, Limit: limit})
}

// Rotation is what one rotation call did.
type Rotation struct {
	// KeyID is the key new values are sealed under.
	KeyID string
	// NewKey is true when this call made KeyID (a key file's new key).
	NewKey bool
	// Resealed counts the credentials moved under KeyID by this call;
	// Remaining those still under another key.
	Resealed, Remaining int
}

// KeyAdder is a key ring that can make a new current key (a key file; a KMS
// key is rotated in KMS instead).
type KeyAdder interface {
	AddKey() (string, error)
}

// RotateCredentials reseals up to limit credentials under the key ring's
// current key; with newKey it first makes a new current key (a key file's:
// with KMS, point the key id at a new key, or let KMS rotate the key's
// material, which needs no resealing). Call it until Remaining is 0.
func (s *Service) RotateCredentials(ctx context.Context, newKey bool, limit int) (Rotation, error) {
	ring, err := s.ring()
	if err != nil {
		return Rotation{}, err
	}
	var rot Rotation
	if newKey {
		adder, ok := ring.(KeyAdder)
		if !ok {
			return rot, Errorf(ErrInvalid, "new_key: %s cannot make a key here; create a new KMS key (or let KMS rotate this one's material yearly, which needs no resealing), point NOETL_KEYCHAIN_KMS_KEY_ID or its alias at it, then rotate without new_key", ring.Describe())
		}
		if rot.KeyID, err = adder.AddKey(); err != nil {
			return rot, err
		}
		rot.NewKey = true
		s.log.InfoContext(ctx, "keychain key added", "key_id", rot.KeyID)
	} else if rot.KeyID, err = ring.Current(ctx); err != nil {
		return rot, err
	}
	if limit <= 0 {
		limit = 100
	}
	rows, err := store.CredentialsNotUnder(ctx, s.st.Cluster(), rot.KeyID, limit)
	if err != nil {
		return rot, err
	}
	for _, row := range rows {
		sealed := keychain.Sealed{KeyID: row.KeyID, WrappedKey: row.WrappedKey, Nonce: row.Nonce, Ciphertext: row.Ciphertext}
		moved, did, err := keychain.Reseal(ctx, ring, aad(row.Name), sealed)
		if err != nil {
			return rot, fmt.Errorf("credential %q: %w", row.Name, err)
		}
		if !did {
			continue
		}
		ok, err := store.ResealCredential(ctx, s.st.Cluster(), row.CredentialID, row,
			store.Credential{KeyID: moved.KeyID, WrappedKey: moved.WrappedKey, Nonce: moved.Nonce, Ciphertext: moved.Ciphertext})
		if err != nil {
			return rot, err
		}
		if ok {
			rot.Resealed++
		}
	}
	if rot.Remaining, err = store.CountCredentialsNotUnder(ctx, s.st.Cluster(), rot.KeyID); err != nil {
		return rot, err
	}
	s.log.InfoContext(ctx, "keychain rotation", "key_id", rot.KeyID, "resealed", rot.Resealed, "remaining", rot.Remaining)
	return rot, nil
}
