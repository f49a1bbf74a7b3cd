package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCredentialEnvName(t *testing.T) {
	t.Parallel()
	for alias, want := range map[string]string{
		"pg_local":  "NOETL_CREDENTIAL_PG_LOCAL",
		"my-api.v2": "NOETL_CREDENTIAL_MY_API_V2",
		"Db1":       "NOETL_CREDENTIAL_DB1",
	} {
		if got := CredentialEnvName(alias); got != want {
			t.Errorf("%q → %q, want %q", alias, got, want)
		}
	}
}

func TestCredentialsFromEnv(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "creds.json")
	if err := os.WriteFile(file, []byte(`{
		"pg_local": {"kind": "postgres", "host": "db", "port": 5433, "user": "noetl", "password": "pw", "database": "demo"},
		"by_dsn": {"kind": "postgres", "dsn": "postgres://x@y/z"},
		"api": {"kind": "bearer", "token": "t0k", "scopes": ["a"]},
		"overridden": {"kind": "postgres", "host": "from-file"}
	}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"NOETL_CREDENTIALS_FILE":        file,
		"NOETL_CREDENTIAL_MY_API":       `{"kind": "basic", "username": "u", "password": "p", "port": "8443"}`,
		"NOETL_CREDENTIAL_OVERRIDDEN":   `{"kind": "postgres", "host": "from-env", "dbname": "d"}`,
		"NOETL_CREDENTIAL_BROKEN":       `{not json`,
		"NOETL_SOMETHING_ELSE_ENTIRELY": "x",
	}
	creds, err := CredentialsFromEnv(environ(env))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	check := func(alias string, want Credential) {
		t.Helper()
		got, err := creds.Lookup(ctx, alias)
		if err != nil {
			t.Fatalf("%s: %v", alias, err)
		}
		if got.Kind != want.Kind || got.Host != want.Host || got.Port != want.Port || got.User != want.User ||
			got.Password != want.Password || got.Database != want.Database || got.DSN != want.DSN {
			t.Fatalf("%s = %+v, want %+v", alias, got, want)
		}
	}
	check("pg_local", Credential{Kind: "postgres", Host: "db", Port: 5433, User: "noetl", Password: "pw", Database: "demo"})
	check("by_dsn", Credential{Kind: "postgres", DSN: "postgres://x@y/z"})
	check("my-api", Credential{Kind: "basic", User: "u", Password: "p", Port: 8443})
	check("overridden", Credential{Kind: "postgres", Host: "from-env", Database: "d"})
	api, _ := creds.Lookup(ctx, "api")
	if api.Extra["token"] != "t0k" || api.Extra["scopes"] == nil {
		t.Fatalf("extra = %v", api.Extra)
	}

	_, err = creds.Lookup(ctx, "missing-one")
	if err == nil || !errors.Is(err, ErrCredentialNotConfigured) || !strings.Contains(err.Error(), `credential alias "missing-one" is not configured`) ||
		!strings.Contains(err.Error(), "NOETL_CREDENTIAL_MISSING_ONE") {
		t.Fatalf("unknown alias error = %v", err)
	}
	_, err = creds.Lookup(ctx, "broken")
	if err == nil || !strings.Contains(err.Error(), "NOETL_CREDENTIAL_BROKEN") {
		t.Fatalf("malformed entry error = %v", err)
	}
}

func TestCredentialsFromEnvFileErrors(t *testing.T) {
	t.Parallel()
	_, err := CredentialsFromEnv([]string{"NOETL_CREDENTIALS_FILE=" + filepath.Join(t.TempDir(), "absent.json")})
	if err == nil || !strings.Contains(err.Error(), "NOETL_CREDENTIALS_FILE") {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"a": {"port": "not-a-port"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = CredentialsFromEnv([]string{"NOETL_CREDENTIALS_FILE=" + bad})
	if err == nil || !strings.Contains(err.Error(), `credential "a": port`) {
		t.Fatalf("bad port: %v", err)
	}

	// No file, no env entries: every alias is unknown.
	creds, err := CredentialsFromEnv([]string{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := creds.Lookup(context.Background(), "x"); !errors.Is(err, ErrCredentialNotConfigured) {
		t.Fatalf("err = %v", err)
	}
}

func environ(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// TestCredentialSecrets: a store lists every secret it holds (so a worker can
// mask them before any lookup), and only secrets: host, user and database
// stay visible.
func TestCredentialSecrets(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "creds.json")
	if err := os.WriteFile(file, []byte(`{"pg": {"kind": "postgres", "host": "db-host", "user": "noetl", "password": "file-password", "database": "demo"},
		"api": {"kind": "http", "headers": {"X-Api-Key": "header-key-1", "Accept": "application/json"}, "client_secret": "cs-123456"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	creds, err := CredentialsFromEnv([]string{"NOETL_CREDENTIALS_FILE=" + file,
		`NOETL_CREDENTIAL_DSN={"kind": "postgres", "dsn": "postgres://u:env-password@h/db"}`,
		`NOETL_CREDENTIAL_BROKEN={"password": "broken-password",}`})
	if err != nil {
		t.Fatal(err)
	}
	got := creds.(SecretLister).Secrets()
	slices.Sort(got)
	want := []string{
		`{"kind": "postgres", "dsn": "postgres://u:env-password@h/db"}`,
		`{"password": "broken-password",}`,
		"bm9ldGw6ZmlsZS1wYXNzd29yZA==", // noetl:file-password, as Basic auth sends it
		"cs-123456", "file-password", "header-key-1", "postgres://u:env-password@h/db",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Secrets() =\n %q\nwant\n %q", got, want)
	}
}

// TestCredentialFromNoETL: NoETL's keychain types map as its workers map
// them.
func TestCredentialFromNoETL(t *testing.T) {
	pg, err := CredentialFromNoETL("postgres", map[string]any{"db_host": "db", "db_port": "6432", "db_user": "u", "db_password": "p", "db_name": "w"})
	if err != nil || pg.Kind != "postgres" || pg.Host != "db" || pg.Port != 6432 || pg.User != "u" || pg.Password != "p" || pg.Database != "w" {
		t.Fatalf("postgres: %+v %v", pg, err)
	}
	plain, err := CredentialFromNoETL("postgres", map[string]any{"host": "h", "port": int64(5432), "user": "u", "password": "p", "database": "d"})
	if err != nil || plain.Host != "h" || plain.Port != 5432 || plain.Database != "d" {
		t.Fatalf("postgres, plain names: %+v %v", plain, err)
	}
	b, err := CredentialFromNoETL("httpBearerAuth", map[string]any{"access_token": "tok-123456"})
	if err != nil || b.Kind != "bearer" || b.Extra["token"] != "tok-123456" {
		t.Fatalf("bearer: %+v %v", b, err)
	}
	basic, err := CredentialFromNoETL("basic", map[string]any{"username": "ann", "password": "pw-123456"})
	if err != nil || basic.Kind != "basic" || basic.User != "ann" || basic.Password != "pw-123456" {
		t.Fatalf("basic: %+v %v", basic, err)
	}
	key, err := CredentialFromNoETL("api_key", map[string]any{"api_key": "key-123456", "header": "X-Token"})
	if err != nil || key.Kind != "http" || key.Extra["headers"].(map[string]any)["X-Token"] != "key-123456" {
		t.Fatalf("api_key: %+v %v", key, err)
	}
	if _, err := CredentialFromNoETL("api_key", map[string]any{}); err == nil {
		t.Fatal("an api_key credential without a key")
	}
	if s := key.Secrets(); len(s) == 0 {
		t.Fatal("an api_key's header value is a secret to mask")
	}
}

// TestChain: the first store that knows an alias answers; a refusal stops.
func TestChain(t *testing.T) {
	ctx := context.Background()
	first := CredentialMap{"a": {Kind: "postgres", Host: "first"}}
	second := CredentialMap{"a": {Kind: "postgres", Host: "second"}, "b": {Kind: "postgres", Host: "b"}}
	c := Chain{first, second}
	if got, err := c.Lookup(ctx, "a"); err != nil || got.Host != "first" {
		t.Fatalf("a: %+v %v", got, err)
	}
	if got, err := c.Lookup(ctx, "b"); err != nil || got.Host != "b" {
		t.Fatalf("b: %+v %v", got, err)
	}
	if _, err := c.Lookup(ctx, "c"); !errors.Is(err, ErrCredentialNotConfigured) {
		t.Fatalf("c: %v", err)
	}
	refusing := credFunc(func(context.Context, string) (Credential, error) { return Credential{}, errors.New("403: refused") })
	if _, err := (Chain{refusing, second}).Lookup(ctx, "b"); err == nil || errors.Is(err, ErrCredentialNotConfigured) {
		t.Fatalf("a refusal was passed over: %v", err)
	}
}

type credFunc func(context.Context, string) (Credential, error)

func (f credFunc) Lookup(ctx context.Context, alias string) (Credential, error) { return f(ctx, alias) }
