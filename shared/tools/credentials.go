package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noetl-go/noetl/shared/credscope"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/toolkind"
)

// Credentials resolves `auth:` aliases (R-P4). An unknown alias is an error naming it
// that wraps ErrCredentialNotConfigured.
type Credentials interface {
	Lookup(ctx context.Context, alias string) (Credential, error)
}

// ErrCredentialNotConfigured is wrapped by lookups of an unknown alias.
var ErrCredentialNotConfigured = errors.New("credential not configured")

// Credential is one resolved credential. JSON entries (file or env) use the keys kind,
// host, port (number or numeric string), user (alias username), password, database
// (alias dbname), dsn (alias connection_string); every other key lands in Extra
// (e.g. `token` for bearer credentials, `headers` for http ones).
type Credential struct {
	Kind     string
	Host     string
	Port     int
	User     string
	Password string
	Database string
	DSN      string
	Extra    map[string]any
	// AllowedHosts are the hosts the credential may be sent to (its keychain
	// scope.hosts; empty: any). CheckCredentialHost applies them.
	AllowedHosts []string
}

// CredentialMap is an in-memory credential store: alias → credential.
type CredentialMap map[string]Credential

// Lookup implements Credentials.
func (m CredentialMap) Lookup(_ context.Context, alias string) (Credential, error) {
	if c, ok := m[alias]; ok {
		return c, nil
	}
	return Credential{}, fmt.Errorf("credential alias %q is not configured: %w", alias, ErrCredentialNotConfigured)
}

const credentialEnvPrefix = "NOETL_CREDENTIAL_"

// CredentialEnvName is the env var holding one credential for alias (R-P4): the alias
// upper-cased, every character other than A-Z and 0-9 replaced by '_'.
func CredentialEnvName(alias string) string {
	var b strings.Builder
	b.WriteString(credentialEnvPrefix)
	for _, r := range strings.ToUpper(alias) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

type envCredentials struct {
	env  map[string]string // NOETL_CREDENTIAL_* name → raw JSON
	file map[string]Credential
	path string
}

// CredentialsFromEnv builds the local credential store of R-P4 from environ
// (KEY=value entries; nil: os.Environ()). NOETL_CREDENTIALS_FILE names a JSON
// file {alias: {kind, host, port, user, password, database | dsn}};
// NOETL_CREDENTIAL_<ALIAS> holds one entry as JSON and wins over the file's
// entry for the same alias. Both are read here, once, so a worker can drop
// them from its environment afterwards (see shared/worker's Protect). A
// missing or malformed file is an error now; a malformed NOETL_CREDENTIAL_*
// entry is an error naming it at its alias's lookup.
func CredentialsFromEnv(environ []string) (Credentials, error) {
	if environ == nil {
		environ = os.Environ()
	}
	c := &envCredentials{env: map[string]string{}, file: map[string]Credential{}}
	for _, kv := range environ {
		name, v, _ := strings.Cut(kv, "=")
		switch {
		case name == "NOETL_CREDENTIALS_FILE":
			c.path = v
		case strings.HasPrefix(name, credentialEnvPrefix) && v != "":
			c.env[name] = v
		}
	}
	if c.path != "" {
		b, err := os.ReadFile(c.path)
		if err != nil {
			return nil, fmt.Errorf("NOETL_CREDENTIALS_FILE: %w", err)
		}
		all, err := jsonx.DecodeObject(b)
		if err != nil {
			return nil, fmt.Errorf("NOETL_CREDENTIALS_FILE %s: %w", c.path, err)
		}
		for alias, v := range all {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("NOETL_CREDENTIALS_FILE %s: credential %q: expected an object, got %s", c.path, alias, jsonx.TypeName(v))
			}
			cred, err := credentialFromMap(m)
			if err != nil {
				return nil, fmt.Errorf("NOETL_CREDENTIALS_FILE %s: credential %q: %w", c.path, alias, err)
			}
			c.file[alias] = cred
		}
	}
	return c, nil
}

func (c *envCredentials) Lookup(_ context.Context, alias string) (Credential, error) {
	name := CredentialEnvName(alias)
	if raw := c.env[name]; raw != "" {
		cred, err := credentialFromJSON(raw)
		if err != nil {
			return Credential{}, fmt.Errorf("credential alias %q: %s: %w", alias, name, err)
		}
		return cred, nil
	}
	if cred, ok := c.file[alias]; ok {
		return cred, nil
	}
	where := "set " + name
	if c.path != "" {
		where += " or add it to " + c.path
	} else {
		where += " or add it to the file named by NOETL_CREDENTIALS_FILE"
	}
	return Credential{}, fmt.Errorf("credential alias %q is not configured (%s): %w", alias, where, ErrCredentialNotConfigured)
}

// Secrets implements SecretLister: every entry's secrets, and each
// NOETL_CREDENTIAL_* value whole (a malformed one may still hold a password).
func (c *envCredentials) Secrets() []string {
	var out []string
	for _, raw := range c.env {
		out = append(out, raw)
		if cred, err := credentialFromJSON(raw); err == nil {
			out = append(out, cred.Secrets()...)
		}
	}
	for _, cred := range c.file {
		out = append(out, cred.Secrets()...)
	}
	return out
}

func credentialFromJSON(raw string) (Credential, error) {
	m, err := jsonx.DecodeObject([]byte(raw))
	if err != nil {
		return Credential{}, err
	}
	return credentialFromMap(m)
}

// SecretLister is a credential store that can list the secrets it holds, so
// a worker can mask them before any step looks them up.
type SecretLister interface {
	Secrets() []string
}

// Secrets are the credential's secret values: password (also as the http
// tool sends it in Basic auth), dsn, and every string under a secret-named
// key of Extra (token, client_secret, an Authorization or X-Api-Key header,
// …). Host, user, port and database are not secrets: masking "postgres"
// everywhere would destroy data.
func (c Credential) Secrets() []string {
	out := redact.Collect(map[string]any(c.Extra))
	if c.Password != "" {
		out = append(out, c.Password, base64.StdEncoding.EncodeToString([]byte(c.User+":"+c.Password)))
	}
	if c.DSN != "" {
		out = append(out, c.DSN)
	}
	return out
}

// Secrets implements SecretLister.
func (m CredentialMap) Secrets() []string {
	var out []string
	for _, c := range m {
		out = append(out, c.Secrets()...)
	}
	return out
}

// credentialFromMap reads one JSON entry.
func credentialFromMap(m map[string]any) (Credential, error) {
	var c Credential
	str := func(keys ...string) (string, error) { return stringField(m, keys...) }
	var err error
	if c.Kind, err = str("kind", "type"); err != nil {
		return c, err
	}
	if c.Host, err = str("host"); err != nil {
		return c, err
	}
	if c.User, err = str("user", "username"); err != nil {
		return c, err
	}
	if c.Password, err = str("password"); err != nil {
		return c, err
	}
	if c.Database, err = str("database", "dbname", "db"); err != nil {
		return c, err
	}
	if c.DSN, err = str("dsn", "connection_string", "connection"); err != nil {
		return c, err
	}
	port, err := str("port")
	if err != nil {
		return c, err
	}
	if port != "" {
		p, err := strconv.Atoi(port)
		if err != nil || p <= 0 || p > 65535 {
			return c, fmt.Errorf("port: expected a TCP port, got %q", port)
		}
		c.Port = p
	}
	known := map[string]bool{"kind": true, "type": true, "host": true, "user": true, "username": true,
		"password": true, "database": true, "dbname": true, "db": true, "dsn": true,
		"connection_string": true, "connection": true, "port": true}
	for k, v := range m {
		if !known[k] {
			if c.Extra == nil {
				c.Extra = map[string]any{}
			}
			c.Extra[k] = v
		}
	}
	return c, nil
}

// Chain tries credential stores in order: the first that knows an alias
// answers; one that fails other than ErrCredentialNotConfigured stops the
// lookup (a refusal must not be papered over by another store).
type Chain []Credentials

// Lookup implements Credentials.
func (c Chain) Lookup(ctx context.Context, alias string) (Credential, error) {
	var last error
	for _, s := range c {
		cred, err := s.Lookup(ctx, alias)
		if err == nil {
			return cred, nil
		}
		last = err
		if !errors.Is(err, ErrCredentialNotConfigured) {
			return cred, err
		}
	}
	if last == nil {
		last = fmt.Errorf("credential alias %q is not configured: %w", alias, ErrCredentialNotConfigured)
	}
	return Credential{}, last
}

// Secrets implements SecretLister for the members that do.
func (c Chain) Secrets() []string {
	var out []string
	for _, s := range c {
		if l, ok := s.(SecretLister); ok {
			out = append(out, l.Secrets()...)
		}
	}
	return out
}

// CredentialFromNoETL reads a credential of NoETL's keychain (its type and
// data, GET /api/credentials/{alias}?include_data=true) as NoETL's workers
// map it: postgres from db_host/db_port/db_user/db_password/db_name or the
// plain names; bearer (also bearer_token, httpBearerAuth) from token,
// access_token or bearer_token; basic from username/user and password;
// api_key as a header (data.header, default X-API-Key) carrying api_key, key
// or token; any other type read as our own entries are (credentialFromMap).
func CredentialFromNoETL(typ string, data map[string]any) (Credential, error) {
	m := make(map[string]any, len(data)+2)
	for k, v := range data {
		m[k] = v
	}
	delete(m, "type")
	kind := strings.ToLower(strings.TrimSpace(typ))
	pick := func(dst string, keys ...string) {
		if _, has := m[dst]; has {
			return
		}
		for _, k := range keys {
			if v, ok := m[k]; ok && v != nil {
				m[dst] = v
				delete(m, k)
				return
			}
		}
	}
	switch kind {
	case "postgres", "postgresql":
		kind = "postgres"
		pick("host", "db_host")
		pick("port", "db_port")
		pick("user", "db_user")
		pick("password", "db_password")
		pick("database", "db_name")
	case "bearer", "bearer_token", "httpbearerauth":
		kind = "bearer"
		pick("token", "access_token", "bearer_token")
	case "basic":
		pick("password", "db_password")
	case "api_key":
		kind = "http"
		key := ""
		for _, k := range []string{"api_key", "key", "token"} {
			if s, ok := m[k].(string); ok && s != "" {
				key = s
				break
			}
		}
		header, _ := m["header"].(string)
		if header == "" {
			header = "X-API-Key"
		}
		if key == "" {
			return Credential{}, errors.New("an api_key credential needs api_key (or key, token)")
		}
		m = map[string]any{"headers": map[string]any{header: key}}
	}
	m["kind"] = kind
	return credentialFromMap(m)
}

// lookupCredential resolves an alias through the registry's store.
func (r *Registry) lookupCredential(ctx context.Context, alias string) (Credential, error) {
	if r.creds == nil {
		return Credential{}, fmt.Errorf("credential alias %q is not configured (this worker has no credential store): %w", alias, ErrCredentialNotConfigured)
	}
	return r.creds.Lookup(ctx, alias)
}

// authAlias reads `auth` (alias `credential`): a string alias, or an object naming it
// under `credential`, `alias` or `key` (NoETL's object form). Empty when not given.
func authAlias(cfg map[string]any) (string, error) {
	k, v, ok := first(cfg, toolkind.CommonNames("auth")...)
	if !ok {
		return "", nil
	}
	switch x := v.(type) {
	case string:
		return strings.TrimSpace(x), nil
	case map[string]any:
		for _, name := range []string{"credential", "alias", "key"} {
			if s, ok := x[name].(string); ok && s != "" {
				return s, nil
			}
		}
		return "", fmt.Errorf("%s: an object must name the credential alias under \"credential\"", k)
	default:
		return "", fmt.Errorf("%s: expected a credential alias, got %s", k, jsonx.TypeName(v))
	}
}

// Where a credential may be sent (issue 33, docs/security.md "Credential
// scope"): the keychain delivers a credential's scope.hosts with its data,
// and each tool checks them where it applies the credential, before
// anything is sent.

// CheckCredentialHost says why the credential alias may not be sent to
// host:port (its scope.hosts; none: anywhere), or nil.
func CheckCredentialHost(alias string, c Credential, host string, port int) error {
	return credscope.Host(alias, c.AllowedHosts, host, port)
}

// checkPostgresHosts says why a postgres connection may not carry the
// credential alias: each host it dials must be the credential's own (its
// host, or its DSN's hosts) or one its scope.hosts lists. A step's host:
// cannot move a credential to another server unless the credential allows
// that server. A credential naming no host is judged by its scope.hosts
// alone.
func checkPostgresHosts(alias string, c Credential, pc *pgconn.Config) error {
	own := map[string]bool{}
	if c.Host != "" {
		own[strings.ToLower(c.Host)] = true
	}
	if c.DSN != "" {
		if cpc, err := pgconn.ParseConfig(c.DSN); err == nil {
			own[strings.ToLower(cpc.Host)] = true
			for _, f := range cpc.Fallbacks {
				own[strings.ToLower(f.Host)] = true
			}
		}
	}
	dial := []*pgconn.FallbackConfig{{Host: pc.Host, Port: pc.Port}}
	dial = append(dial, pc.Fallbacks...)
	for _, d := range dial {
		switch {
		case own[strings.ToLower(d.Host)]:
		case len(own) == 0:
			if err := CheckCredentialHost(alias, c, d.Host, int(d.Port)); err != nil {
				return err
			}
		case !credscope.AllowsHost(c.AllowedHosts, d.Host, int(d.Port)):
			return fmt.Errorf("credential %q is for host %s; this step sends it to %s, which its scope.hosts does not list (add the host to the credential's scope to allow it)",
				alias, strings.Join(slices.Sorted(maps.Keys(own)), ", "), d.Host)
		}
	}
	return nil
}

// urlPort is u's port, else its scheme's default (http 80, https 443,
// nats and tls 4222).
func urlPort(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https", "wss":
		return 443
	case "nats", "tls":
		return 4222
	}
	return 80
}
