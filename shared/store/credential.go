package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Credential is one keychain entry (cluster database). Its data is only ever
// here sealed (shared/keychain): KeyID, WrappedKey, Nonce and Ciphertext.
type Credential struct {
	CredentialID int64
	Name         string
	Type         string
	Meta         map[string]any
	Tags         []string
	Description  string
	// Scope is the credential's scope as JSON (shared/credscope reads it);
	// nil: none. PutCredential keeps the stored scope when it is nil.
	Scope      map[string]any
	KeyID      string
	WrappedKey []byte
	Nonce      []byte
	Ciphertext []byte
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

const credentialColumns = `credential_id, name, type, meta, tags, description, scope, key_id, wrapped_key, nonce, ciphertext, created_at, updated_at`

func scanCredential(row pgx.Row) (Credential, error) {
	var c Credential
	var meta, scope []byte
	var desc *string
	err := row.Scan(&c.CredentialID, &c.Name, &c.Type, &meta, &c.Tags, &desc, &scope, &c.KeyID, &c.WrappedKey, &c.Nonce, &c.Ciphertext,
		&c.CreatedAt, &c.UpdatedAt)
	if err != nil {
		return c, err
	}
	c.Description, c.CreatedAt, c.UpdatedAt = derefString(desc), c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	if c.Meta, err = decodeObject(meta, "credential.meta"); err != nil {
		return c, err
	}
	if c.Scope, err = decodeObject(scope, "credential.scope"); err != nil {
		return c, err
	}
	if c.Tags == nil {
		c.Tags = []string{}
	}
	return c, nil
}

// PutCredential creates the credential named c.Name, or replaces its type,
// meta, tags, description and sealed data (NoETL's create-or-update), and its
// scope when c.Scope is set: a client that knows no scope (NoETL's GUI
// editing a credential) never widens one. created says which.
func PutCredential(ctx context.Context, q Querier, c Credential) (Credential, bool, error) {
	meta, err := objectJSON(c.Meta)
	if err != nil {
		return Credential{}, false, err
	}
	scope, err := objectJSON(c.Scope)
	if err != nil {
		return Credential{}, false, err
	}
	var scopeText *string
	if scope != nil {
		s := string(scope)
		scopeText = &s
	}
	tags := c.Tags
	if tags == nil {
		tags = []string{}
	}
	var metaText *string
	if meta != nil {
		s := string(meta)
		metaText = &s
	}
	var created bool
	row := q.QueryRow(ctx, `
		INSERT INTO credential (name, type, meta, tags, description, key_id, wrapped_key, nonce, ciphertext, scope)
		VALUES ($1, $2, $3::jsonb, $4, $5, $6, $7, $8, $9, $10::jsonb)
		ON CONFLICT (name) DO UPDATE SET type = EXCLUDED.type, meta = EXCLUDED.meta, tags = EXCLUDED.tags,
			description = EXCLUDED.description, key_id = EXCLUDED.key_id, wrapped_key = EXCLUDED.wrapped_key,
			nonce = EXCLUDED.nonce, ciphertext = EXCLUDED.ciphertext, scope = COALESCE(EXCLUDED.scope, credential.scope),
			updated_at = now()
		RETURNING `+credentialColumns+`, (xmax = 0)`,
		c.Name, c.Type, metaText, tags, nullString(c.Description), c.KeyID, c.WrappedKey, c.Nonce, c.Ciphertext, scopeText)
	out, err := scanCredential(scanExtra{row, &created})
	if err != nil {
		return Credential{}, false, wrapWrite(fmt.Errorf("store: put credential %q: %w", c.Name, err))
	}
	return out, created, nil
}

// scanExtra scans a row whose last columns are extra destinations.
type scanExtra struct {
	row   pgx.Row
	extra *bool
}

func (s scanExtra) Scan(dest ...any) error { return s.row.Scan(append(dest, s.extra)...) }

// GetCredential reads a credential by identifier: a decimal id, else a name
// (NoETL's rule). A name that looks like an id is found by name when no
// credential has that id.
func GetCredential(ctx context.Context, q Querier, identifier string) (Credential, error) {
	if id, err := strconv.ParseInt(identifier, 10, 64); err == nil && id > 0 {
		c, err := scanCredential(q.QueryRow(ctx, `SELECT `+credentialColumns+` FROM credential WHERE credential_id = $1`, id))
		if err == nil || !errors.Is(err, pgx.ErrNoRows) {
			return c, wrapRead(err, "credential", identifier)
		}
	}
	c, err := scanCredential(q.QueryRow(ctx, `SELECT `+credentialColumns+` FROM credential WHERE name = $1`, identifier))
	return c, wrapRead(err, "credential", identifier)
}

func wrapRead(err error, what, key string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("store: %s %q: %w", what, key, ErrNotFound)
	}
	return fmt.Errorf("store: %s %q: %w", what, key, err)
}

// CredentialFilter selects credentials to list: Type exactly, Query a
// case-insensitive substring of the name or description.
type CredentialFilter struct {
	Type  string
	Query string
	Limit int
}

// ListCredentials lists credentials by name.
func ListCredentials(ctx context.Context, q Querier, f CredentialFilter) ([]Credential, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	like := ""
	if f.Query != "" {
		like = "%" + strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(f.Query) + "%"
	}
	return queryRows(ctx, q, "list credentials", scanCredential, `SELECT `+credentialColumns+` FROM credential
		WHERE ($1 = '' OR type = $1) AND ($2 = '' OR name ILIKE $2 OR description ILIKE $2)
		ORDER BY name LIMIT $3`, f.Type, like, f.Limit)
}

// DeleteCredential deletes a credential by id.
func DeleteCredential(ctx context.Context, q Querier, id int64) error {
	return deleteOne(ctx, q, "credential", id, `DELETE FROM credential WHERE credential_id = $1`)
}

// CredentialsNotUnder lists up to limit credentials sealed under another key
// than keyID (key rotation), by id.
func CredentialsNotUnder(ctx context.Context, q Querier, keyID string, limit int) ([]Credential, error) {
	return queryRows(ctx, q, "credentials to reseal", scanCredential,
		`SELECT `+credentialColumns+` FROM credential WHERE key_id <> $1 ORDER BY credential_id LIMIT $2`, keyID, limit)
}

// CountCredentialsNotUnder counts the credentials sealed under another key than keyID.
func CountCredentialsNotUnder(ctx context.Context, q Querier, keyID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM credential WHERE key_id <> $1`, keyID).Scan(&n)
	return n, err
}

// ResealCredential replaces a credential's sealed data if it is still sealed
// as old says (a concurrent update wins: the row is then left alone and
// false returned).
func ResealCredential(ctx context.Context, q Querier, id int64, old Credential, sealed Credential) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE credential SET key_id = $3, wrapped_key = $4, nonce = $5, ciphertext = $6
		WHERE credential_id = $1 AND key_id = $2 AND ciphertext = $7`,
		id, old.KeyID, sealed.KeyID, sealed.WrappedKey, sealed.Nonce, sealed.Ciphertext, old.Ciphertext)
	if err != nil {
		return false, fmt.Errorf("store: reseal credential %d: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// CredentialRead is one logged read of a credential (never its data).
type CredentialRead struct {
	ReadID       int64
	ReadAt       time.Time
	Name         string
	CredentialID int64
	ExecutionID  int64
	IncludeData  bool
	Outcome      string // ReadServed, ReadRefused, ReadNotFound
	Reason       string
	Scope        string
	Token        string // a fingerprint of the bearer token, never the token
	// WorkerID and CommandID are the claim a read was answered for: the
	// holder and the command whose step names the credential.
	WorkerID  string
	CommandID string
	RequestID string
}

// Outcomes of a credential read.
const (
	ReadServed   = "served"
	ReadRefused  = "refused"
	ReadNotFound = "not_found"
)

// CredentialReadRetention is how long the read log is kept.
const CredentialReadRetention = 90 * 24 * time.Hour

// RecordCredentialRead appends a read to the log.
func RecordCredentialRead(ctx context.Context, q Querier, r CredentialRead) error {
	_, err := q.Exec(ctx, `INSERT INTO credential_read (name, credential_id, execution_id, include_data, outcome, reason, scope, token, worker_id, request_id, command_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		r.Name, nullInt64(r.CredentialID), nullInt64(r.ExecutionID), r.IncludeData, r.Outcome, nullString(r.Reason), r.Scope,
		nullString(r.Token), nullString(r.WorkerID), nullString(r.RequestID), nullString(r.CommandID))
	if err != nil {
		return fmt.Errorf("store: record a read of credential %q: %w", r.Name, err)
	}
	return nil
}

// CredentialReadFilter selects logged reads, newest first: of a name, of an
// execution, or both.
type CredentialReadFilter struct {
	Name        string
	ExecutionID int64
	Limit       int // 1..1000; 0 means 100 (pageLimit)
}

// ListCredentialReads lists logged reads, newest first.
func ListCredentialReads(ctx context.Context, q Querier, f CredentialReadFilter) ([]CredentialRead, error) {
	limit, err := pageLimit(f.Limit)
	if err != nil {
		return nil, fmt.Errorf("store: credential reads: %w", err)
	}
	return queryRows(ctx, q, "credential reads", scanCredentialRead, `SELECT read_id, read_at, name, credential_id, execution_id, include_data, outcome, reason, scope, token, worker_id, request_id, command_id
		FROM credential_read WHERE ($1 = '' OR name = $1) AND ($2 = 0 OR execution_id = $2)
		ORDER BY read_id DESC LIMIT $3`, f.Name, f.ExecutionID, limit)
}

func scanCredentialRead(row pgx.Row) (CredentialRead, error) {
	var r CredentialRead
	var cid, eid *int64
	var reason, token, worker, req, command *string
	if err := row.Scan(&r.ReadID, &r.ReadAt, &r.Name, &cid, &eid, &r.IncludeData, &r.Outcome, &reason, &r.Scope, &token, &worker, &req, &command); err != nil {
		return r, err
	}
	r.ReadAt, r.CredentialID, r.ExecutionID = r.ReadAt.UTC(), derefInt64(cid), derefInt64(eid)
	r.Reason, r.Token, r.WorkerID, r.RequestID = derefString(reason), derefString(token), derefString(worker), derefString(req)
	r.CommandID = derefString(command)
	return r, nil
}

// DeleteOldCredentialReads deletes up to limit reads older than age.
func DeleteOldCredentialReads(ctx context.Context, q Querier, age time.Duration, limit int) (int64, error) {
	tag, err := q.Exec(ctx, `DELETE FROM credential_read WHERE read_id IN (
		SELECT read_id FROM credential_read WHERE read_at < now() - make_interval(secs => $1) ORDER BY read_at LIMIT $2)`,
		age.Seconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete old credential reads: %w", err)
	}
	return tag.RowsAffected(), nil
}
