// Package credentials is the keychain's credential lifecycle: credentials
// stored sealed (shared/keychain) in the cluster database, NoETL's credential
// API over them, the log of every read, and key rotation. It owns the rule of
// who gets a credential's data: the worker scope, for an execution that is
// running.
//
// Only the keychain function (and noetl dev/serve) builds a Service: the API
// reaches it through an interface (api.Keychain), so the other functions'
// binaries link none of it.
package credentials

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/credscope"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/keychain"
	"github.com/noetl-go/noetl/shared/store"
)

// Service is the keychain.
type Service struct {
	st   *store.Store
	ring keychain.KeyRing
	log  *slog.Logger
}

// New returns the keychain over st. ring may be nil: credentials can then
// be listed and deleted, not stored or read with data.
func New(st *store.Store, ring keychain.KeyRing, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{st: st, ring: ring, log: log}
}

// Input is a credential to create or replace (NoETL's
// CredentialCreateRequest).
type Input struct {
	Name        string
	Type        string
	Data        map[string]any
	Meta        map[string]any
	Tags        []string
	Description string
	// Scope replaces the stored scope when set; nil keeps it (a client that
	// knows no scope never widens one).
	Scope *credscope.Scope
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
	Scope       credscope.Scope
	KeyID       string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	Data        map[string]any
}

// MaxCredentialDataBytes bounds a credential's data (its JSON).
const MaxCredentialDataBytes = 64 << 10

// aad is the associated data a credential's data is sealed with: its name,
// so a ciphertext moved onto another row does not open.
func aad(name string) string { return "credential:" + name }

func (s *Service) keyRing() (keychain.KeyRing, error) {
	if s.ring == nil {
		return nil, controlplane.Errorf(controlplane.ErrUnavailable, "this server has no keychain key: set NOETL_KEYCHAIN_KMS_KEY_ID (a KMS key, in AWS) or NOETL_KEYCHAIN_KEY_FILE (a key file, locally)")
	}
	return s.ring, nil
}

// Put creates or replaces a credential; its data is sealed before
// it reaches the database.
func (s *Service) Put(ctx context.Context, in Input) (Credential, bool, error) {
	ring, err := s.keyRing()
	if err != nil {
		return Credential{}, false, err
	}
	plain, err := jsonx.Marshal(in.Data)
	if err != nil {
		return Credential{}, false, err
	}
	defer clear(plain)
	if len(plain) > MaxCredentialDataBytes {
		return Credential{}, false, controlplane.Errorf(controlplane.ErrInvalid, "data: %d bytes of JSON; a credential holds at most %d (MaxCredentialDataBytes)", len(plain), MaxCredentialDataBytes)
	}
	sealed, err := keychain.Seal(ctx, ring, aad(in.Name), plain)
	if err != nil {
		return Credential{}, false, err
	}
	var scope map[string]any
	if in.Scope != nil {
		if scope, err = jsonx.DecodeObject(jsonx.MustMarshal(in.Scope)); err != nil {
			return Credential{}, false, err
		}
	}
	row, created, err := store.PutCredential(ctx, s.st.Cluster(), store.Credential{Name: in.Name, Type: in.Type, Meta: in.Meta,
		Tags: in.Tags, Description: in.Description, Scope: scope, KeyID: sealed.KeyID, WrappedKey: sealed.WrappedKey, Nonce: sealed.Nonce,
		Ciphertext: sealed.Ciphertext})
	if err != nil {
		return Credential{}, false, err
	}
	s.log.InfoContext(ctx, "credential stored", "credential", in.Name, "type", in.Type, "created", created, "key_id", sealed.KeyID)
	return credentialOf(row), created, nil
}

// credentialOf is a stored credential as served. A stored scope that no
// longer reads (it was checked when stored) fails closed: every playbook,
// pool and host is refused, naming the problem.
func credentialOf(r store.Credential) Credential {
	c := Credential{ID: r.CredentialID, Name: r.Name, Type: r.Type, Meta: r.Meta, Tags: r.Tags, Description: r.Description,
		KeyID: r.KeyID, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.Scope != nil {
		scope, err := credscope.Read(r.Scope)
		if err != nil {
			none := []string{"(unreadable stored scope: " + err.Error() + ")"}
			scope = credscope.Scope{Playbooks: none, Pools: none, Hosts: []string{"invalid.invalid"}}
		}
		c.Scope = scope
	}
	return c
}

// Get reads a credential by id or name: read is the read as it is logged
// (who asks: scope, token fingerprint, request; for which execution; whether
// with the data), mayReadData whether the reader holds the worker scope (or
// the API runs without tokens), ask the claim it presents. The
// data is given only when asked for, to the worker scope (or an API without
// tokens), for a running execution named by read.ExecutionID that the
// credential's scope allows, to the holder of a live claim whose step names
// the credential (claim.go); otherwise the request is refused (ErrForbidden,
// naming why). Every read, served or not, is logged without the data, a
// served one with the claim's worker and command (never what the request
// said); a read that cannot be logged is not served.
func (s *Service) Get(ctx context.Context, identifier string, read store.CredentialRead, mayReadData bool, ask store.ClaimAsk) (Credential, error) {
	read.Name, read.CredentialID, read.Outcome, read.Reason = identifier, 0, "", ""
	read.WorkerID, read.CommandID = "", ""
	row, err := store.GetCredential(ctx, s.st.Cluster(), identifier)
	if errors.Is(err, store.ErrNotFound) {
		read.Outcome = store.ReadNotFound
		if lerr := s.logRead(ctx, read); lerr != nil {
			return Credential{}, lerr
		}
		return Credential{}, controlplane.Errorf(controlplane.ErrNotFound, "credential %q not found", identifier)
	}
	if err != nil {
		return Credential{}, err
	}
	read.Name, read.CredentialID = row.Name, row.CredentialID
	c := credentialOf(row)
	if !read.IncludeData {
		read.Outcome = store.ReadServed
		return c, s.logRead(ctx, read)
	}
	claim, why := s.dataRefusal(ctx, c, read, mayReadData, ask)
	if why != "" {
		read.Outcome, read.Reason = store.ReadRefused, why
		if lerr := s.logRead(ctx, read); lerr != nil {
			return Credential{}, lerr
		}
		s.log.WarnContext(ctx, "credential data refused", "credential", row.Name, "execution_id", read.ExecutionID, "scope", read.Scope, "reason", why)
		return Credential{}, controlplane.Errorf(controlplane.ErrForbidden, "credential %q: %s", row.Name, why)
	}
	ring, err := s.keyRing()
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
	read.Outcome, read.WorkerID, read.CommandID = store.ReadServed, claim.WorkerID, claim.CommandID
	if err := s.logRead(ctx, read); err != nil {
		return Credential{}, err
	}
	s.log.InfoContext(ctx, "credential data served", "credential", row.Name, "execution_id", read.ExecutionID, "scope", read.Scope,
		"worker_id", read.WorkerID, "command_id", read.CommandID)
	c.Data = data
	return c, nil
}

// dataRefusal finds the claim a read of c's data is answered for, or says
// why there is none.
func (s *Service) dataRefusal(ctx context.Context, c Credential, r store.CredentialRead, mayReadData bool, ask store.ClaimAsk) (store.ClaimHeld, string) {
	if !mayReadData {
		return store.ClaimHeld{}, fmt.Sprintf("include_data=true is answered only to the worker scope; this token has the %s scope", r.Scope)
	}
	if r.ExecutionID == 0 {
		return store.ClaimHeld{}, "include_data=true needs execution_id, the running execution the credential is for"
	}
	return s.claimFor(ctx, c.Name, c.Scope, r.ExecutionID, ask)
}

func (s *Service) logRead(ctx context.Context, r store.CredentialRead) error {
	if err := store.RecordCredentialRead(ctx, s.st.Cluster(), r); err != nil {
		return fmt.Errorf("the read of credential %q was not served: logging it failed: %w", r.Name, err)
	}
	return nil
}

// List lists credentials (never their data): of a type when typ
// is set, whose name or description contains query when it is.
func (s *Service) List(ctx context.Context, typ, query string) ([]Credential, error) {
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

// Delete deletes a credential by id or name and returns its id.
func (s *Service) Delete(ctx context.Context, identifier string) (int64, error) {
	row, err := store.GetCredential(ctx, s.st.Cluster(), identifier)
	if errors.Is(err, store.ErrNotFound) {
		return 0, controlplane.Errorf(controlplane.ErrNotFound, "credential %q not found", identifier)
	}
	if err != nil {
		return 0, err
	}
	if err := store.DeleteCredential(ctx, s.st.Cluster(), row.CredentialID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return 0, controlplane.Errorf(controlplane.ErrNotFound, "credential %q not found", identifier)
		}
		return 0, err
	}
	s.log.InfoContext(ctx, "credential deleted", "credential", row.Name)
	return row.CredentialID, nil
}

// Reads lists the logged reads of a credential, newest first (of
// one execution when executionID is set). The log is kept by name, which
// outlives a deleted credential; an identifier of digits that is a
// credential's id stands for its name.
func (s *Service) Reads(ctx context.Context, identifier string, executionID int64, limit int) ([]store.CredentialRead, error) {
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

// Rotate reseals up to limit credentials under the key ring's
// current key; with newKey it first makes a new current key (a key file's:
// with KMS, point the key id at a new key, or let KMS rotate the key's
// material, which needs no resealing). Call it until Remaining is 0.
func (s *Service) Rotate(ctx context.Context, newKey bool, limit int) (Rotation, error) {
	ring, err := s.keyRing()
	if err != nil {
		return Rotation{}, err
	}
	var rot Rotation
	if newKey {
		adder, ok := ring.(KeyAdder)
		if !ok {
			return rot, controlplane.Errorf(controlplane.ErrInvalid, "new_key: %s cannot make a key here; create a new KMS key (or let KMS rotate this one's material yearly, which needs no resealing), point NOETL_KEYCHAIN_KMS_KEY_ID or its alias at it, then rotate without new_key", ring.Describe())
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
