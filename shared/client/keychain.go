package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/noetl-go/noetl/shared/wire"
)

// The keychain's routes (NoETL's credential API).

func credentialPath(identifier string) string {
	return "/api/credentials/" + url.PathEscape(identifier)
}

// PutCredential creates or replaces a credential.
func (c *Client) PutCredential(ctx context.Context, r wire.CredentialRequest) (*wire.Credential, error) {
	return call[wire.Credential](ctx, c, "POST", "/api/credentials", r, true)
}

// Credentials lists credentials (never their data), by type and a name or
// description substring when given.
func (c *Client) Credentials(ctx context.Context, typ, q string) (*wire.CredentialList, error) {
	v := url.Values{}
	if typ != "" {
		v.Set("type", typ)
	}
	if q != "" {
		v.Set("q", q)
	}
	path := withQuery("/api/credentials", v)
	return call[wire.CredentialList](ctx, c, "GET", path, nil, true)
}

// CredentialQuery is what a credential read asks for: its data for an
// execution (the worker scope, a running execution), and the claim it is
// read under (the command, its holder and attempt).
type CredentialQuery struct {
	IncludeData bool
	ExecutionID int64
	CommandID   string
	WorkerID    string
	Attempt     int
}

// Credential reads a credential by id or name. A 404 (an unknown one) is an
// *Error with Status 404.
func (c *Client) Credential(ctx context.Context, identifier string, q CredentialQuery) (*wire.Credential, error) {
	v := url.Values{}
	if q.IncludeData {
		v.Set("include_data", "true")
	}
	if q.ExecutionID != 0 {
		v.Set("execution_id", strconv.FormatInt(q.ExecutionID, 10))
	}
	if q.CommandID != "" {
		v.Set("command_id", q.CommandID)
	}
	if q.WorkerID != "" {
		v.Set("worker_id", q.WorkerID)
	}
	if q.Attempt > 0 {
		v.Set("attempt", strconv.Itoa(q.Attempt))
	}
	path := withQuery(credentialPath(identifier), v)
	return call[wire.Credential](ctx, c, "GET", path, nil, true)
}

// DeleteCredential deletes a credential by id or name.
func (c *Client) DeleteCredential(ctx context.Context, identifier string) (*wire.CredentialDeleted, error) {
	return call[wire.CredentialDeleted](ctx, c, "DELETE", credentialPath(identifier), nil, false)
}

// CredentialReads lists who read a credential, newest first.
func (c *Client) CredentialReads(ctx context.Context, identifier string, executionID int64, limit int) (*wire.CredentialReads, error) {
	v := url.Values{}
	if executionID != 0 {
		v.Set("execution_id", strconv.FormatInt(executionID, 10))
	}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	path := withQuery(credentialPath(identifier)+"/reads", v)
	return call[wire.CredentialReads](ctx, c, "GET", path, nil, true)
}

// RotateCredentials reseals up to r.Limit credentials under the keychain's
// current key (r.NewKey: a new key first).
func (c *Client) RotateCredentials(ctx context.Context, r wire.RotateRequest) (*wire.Rotation, error) {
	return call[wire.Rotation](ctx, c, "POST", "/api/credentials/rotate", r, false)
}
