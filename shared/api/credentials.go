package api

import (
	"cmp"
	"context"
	"net/http"
	"strconv"

	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
)

// The keychain's routes, in NoETL's shapes (its credential API): users
// create, list, read and delete credentials; workers read a credential's
// data for the execution they run. shared/credentials owns the rules.

// Keychain is what the keychain's routes serve (shared/credentials, which
// reads the requests' bodies and owns the rules). Only the keychain function,
// noetl dev and noetl serve have one (Options.Keychain): the other functions
// never route a credential request, and their binaries link none of its code.
type Keychain interface {
	PutJSON(ctx context.Context, r wire.CredentialRequest) (wire.Credential, error)
	GetJSON(ctx context.Context, identifier string, read store.CredentialRead, mayReadData bool, claim store.ClaimAsk) (wire.Credential, error)
	ListJSON(ctx context.Context, typ, query string) (wire.CredentialList, error)
	DeleteJSON(ctx context.Context, identifier string) (wire.CredentialDeleted, error)
	ReadsJSON(ctx context.Context, identifier string, executionID int64, limit int) (wire.CredentialReads, error)
	RotateJSON(ctx context.Context, newKey bool, limit int) (wire.Rotation, error)
}

// keychain is the API's keychain, or a 503 naming where credentials are served.
func (a *API) keychain() (Keychain, error) {
	if a.opts.Keychain == nil {
		return nil, errorf(http.StatusServiceUnavailable, "credentials are served by the keychain function")
	}
	return a.opts.Keychain, nil
}

// POST /api/credentials: create or replace (NoETL's upsert by name).
func (a *API) putCredential(ctx context.Context, c *call, r wire.CredentialRequest) (wire.Credential, error) {
	kc, err := a.keychain()
	if err != nil {
		return wire.Credential{}, err
	}
	return kc.PutJSON(ctx, r)
}

// GET /api/credentials?type=&q=: every credential, never its data.
func (a *API) listCredentials(ctx context.Context, c *call, q credentialsQuery) (wire.CredentialList, error) {
	kc, err := a.keychain()
	if err != nil {
		return wire.CredentialList{}, err
	}
	return kc.ListJSON(ctx, q.Type, q.Q)
}

// GET /api/credentials/{identifier}?include_data=&execution_id=&command_id=&worker_id=&attempt=:
// one credential by id or name; its data only to the worker scope, for a
// running execution, to the holder of a live claim whose step names the
// credential (shared/credentials, claim.go): command_id, worker_id and
// attempt name the claim. Every read is logged.
func (a *API) getCredential(ctx context.Context, c *call, q credentialQuery) (wire.Credential, error) {
	include := false
	if s := string(q.IncludeData); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return wire.Credential{}, invalid("include_data", "expected true or false, got %q", jsonx.Cut(s, 20))
		}
		include = b
	}
	kc, err := a.keychain()
	if err != nil {
		return wire.Credential{}, err
	}
	claim := store.ClaimAsk{CommandID: q.CommandID, WorkerID: q.WorkerID, Attempt: int(q.Attempt)}
	read := store.CredentialRead{IncludeData: include, ExecutionID: int64(q.ExecutionID), Scope: c.auth.scopeLabel(), Token: c.auth.token,
		RequestID: c.req.RequestID}
	return kc.GetJSON(ctx, q.Identifier, read, c.auth.scopes.Has(config.ScopeWorker) && !c.auth.tokenless, claim)
}

// DELETE /api/credentials/{identifier}.
func (a *API) deleteCredential(ctx context.Context, c *call, p credentialPath) (wire.CredentialDeleted, error) {
	kc, err := a.keychain()
	if err != nil {
		return wire.CredentialDeleted{}, err
	}
	return kc.DeleteJSON(ctx, p.Identifier)
}

// GET /api/credentials/{identifier}/reads?execution_id=&limit=: the read log
// of a credential name, newest first.
func (a *API) listCredentialReads(ctx context.Context, c *call, q readsQuery) (wire.CredentialReads, error) {
	limit := cmp.Or(q.Limit, DefaultListLimit)
	kc, err := a.keychain()
	if err != nil {
		return wire.CredentialReads{}, err
	}
	return kc.ReadsJSON(ctx, q.Identifier, int64(q.ExecutionID), int(limit))
}

// POST /api/credentials/rotate {new_key?, limit?}: reseal credentials under
// the keychain's current key (with new_key, a new one first: key files only).
func (a *API) rotateCredentials(ctx context.Context, c *call, r wire.RotateRequest) (wire.Rotation, error) {
	kc, err := a.keychain()
	if err != nil {
		return wire.Rotation{}, err
	}
	return kc.RotateJSON(ctx, r.NewKey, r.Limit)
}
