package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
	creds, err := CredentialsFromEnv(func(k string) string { return env[k] })
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
	_, err := CredentialsFromEnv(func(k string) string {
		if k == "NOETL_CREDENTIALS_FILE" {
			return filepath.Join(t.TempDir(), "absent.json")
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), "NOETL_CREDENTIALS_FILE") {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"a": {"port": "not-a-port"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = CredentialsFromEnv(func(k string) string {
		if k == "NOETL_CREDENTIALS_FILE" {
			return bad
		}
		return ""
	})
	if err == nil || !strings.Contains(err.Error(), `credential "a": port`) {
		t.Fatalf("bad port: %v", err)
	}

	// No file, no env entries: every alias is unknown.
	creds, err := CredentialsFromEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := creds.Lookup(context.Background(), "x"); !errors.Is(err, ErrCredentialNotConfigured) {
		t.Fatalf("err = %v", err)
	}
}
