package worker

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/toolresult"
	"github.com/noetl-go/noetl/shared/tools"
	"github.com/noetl-go/noetl/shared/wire"
)

// TestMask: what a tool run returned is posted with the worker's secrets and
// the command's secret-named values masked, in data, outputs and the error,
// inside larger strings too; everything else survives.
func TestMask(t *testing.T) {
	secrets := &redact.Secrets{}
	secrets.Add("worker-token-1", "cred-password")
	w := &Worker{cfg: Config{Secrets: secrets}}
	cmd := &wire.Command{Context: map[string]any{"tool_config": map[string]any{
		"password": "templated-pw", "user": "postgres", "args": map[string]any{"api_key": "key-from-args"}}}}
	code := 1
	env := toolresult.Envelope{Status: toolresult.StatusError,
		Data: map[string]any{"environ": "NOETL_WORKER_TOKEN=worker-token-1\x00PATH=/bin", "pw": "templated-pw",
			"cred-password": "as a key", "user": "postgres", "n": int64(3), "list": []any{"key-from-args"}},
		Stdout: "dsn postgres://u:cred-password@h/db", Stderr: "templated-pw\n",
		Error: &toolresult.ErrorInfo{Message: "login failed: cred-password", Kind: toolresult.KindTool}, ExitCode: &code}
	orig := env.Error
	got := w.mask(cmd, env)
	want := toolresult.Envelope{Status: toolresult.StatusError,
		Data: map[string]any{"environ": "NOETL_WORKER_TOKEN=[REDACTED]\x00PATH=/bin", "pw": redact.Mask,
			redact.Mask: "as a key", "user": "postgres", "n": int64(3), "list": []any{redact.Mask}},
		Stdout: "dsn postgres://u:[REDACTED]@h/db", Stderr: "[REDACTED]\n",
		Error: &toolresult.ErrorInfo{Message: "login failed: [REDACTED]", Kind: toolresult.KindTool}, ExitCode: &code}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("masked:\n got  %#v\n want %#v", got, want)
	}
	if orig.Message != "login failed: cred-password" {
		t.Fatal("the tool's error was modified in place")
	}

	// Nothing to mask: the envelope comes back as it was.
	plain := toolresult.Envelope{Status: toolresult.StatusSuccess, Data: map[string]any{"k": "v"}}
	if got := (&Worker{}).mask(&wire.Command{}, plain); !reflect.DeepEqual(got, plain) {
		t.Fatalf("changed: %#v", got)
	}
}

// TestMaskingCredentials: a credential looked up for a step is registered
// before the tool returns, so the step's result is masked with it.
func TestMaskingCredentials(t *testing.T) {
	secrets := &redact.Secrets{}
	creds := maskingCredentials{tools.CredentialMap{"db": {Kind: "postgres", User: "noetl", Password: "looked-up-pw"}}, secrets}
	if secrets.Masker().String("looked-up-pw") != "looked-up-pw" {
		t.Fatal("registered before any lookup")
	}
	if _, err := creds.Lookup(context.Background(), "db"); err != nil {
		t.Fatal(err)
	}
	if got := secrets.Masker().String("pw=looked-up-pw user=noetl"); got != "pw=[REDACTED] user=noetl" {
		t.Fatalf("after the lookup: %q", got)
	}
	if _, err := creds.Lookup(context.Background(), "other"); err == nil || !strings.Contains(err.Error(), "other") {
		t.Fatalf("unknown alias: %v", err)
	}
}

func TestSecretEnv(t *testing.T) {
	for name, want := range map[string]bool{
		"NOETL_WORKER_TOKEN": true, "NOETL_API_TOKEN": true, "NOETL_INTERNAL_TOKEN": true, "NOETL_INTERNAL_API_TOKEN": true, "NOETL_CREDENTIAL_PG": true,
		"NOETL_CREDENTIALS_FILE": false, "PATH": false, "NOETL_API_TOKENS_SECRET_ARN": false, "NOETL_POOL": false,
	} {
		if SecretEnv(name) != want {
			t.Errorf("SecretEnv(%s) = %v, want %v", name, !want, want)
		}
	}
}
