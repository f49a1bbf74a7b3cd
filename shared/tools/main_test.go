package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolresult"
)

func TestMain(m *testing.M) { devstacktest.Main(m) }

// Compile-time check: Exec is a pipeline.Exec.
var _ pipeline.Exec = (*Registry)(nil).Exec

// exec runs one tool through the registry with a generous safety deadline.
func execTool(t *testing.T, r *Registry, cfg, input map[string]any) toolresult.Envelope {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return execCtx(ctx, r, cfg, input)
}

func execCtx(ctx context.Context, r *Registry, cfg, input map[string]any) toolresult.Envelope {
	kind, _ := cfg["kind"].(string)
	if input == nil {
		input = map[string]any{}
	}
	// Round-trip through jsonx so test literals follow the value convention (int64).
	cfg = norm(cfg).(map[string]any)
	input = norm(input).(map[string]any)
	return r.Exec(ctx, pipeline.Item{Label: "step_under_test", Kind: kind, Config: cfg, Input: input, Attempt: 1})
}

func norm(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	d, err := jsonx.Decode(b)
	if err != nil {
		panic(err)
	}
	return d
}

func mustSucceed(t *testing.T, env toolresult.Envelope) {
	t.Helper()
	if env.Status != toolresult.StatusSuccess {
		t.Fatalf("status = %s, want success; error = %+v\nstdout: %s\nstderr: %s", env.Status, env.Error, env.Stdout, env.Stderr)
	}
	if env.Error != nil {
		t.Fatalf("success with an error: %+v", env.Error)
	}
}

func mustFail(t *testing.T, env toolresult.Envelope, status, kind, msgPart string) {
	t.Helper()
	if env.Status != status {
		t.Fatalf("status = %s, want %s; error = %+v; data = %v\nstderr: %s", env.Status, status, env.Error, env.Data, env.Stderr)
	}
	if env.Error == nil {
		t.Fatalf("no error info on a %s envelope", status)
	}
	if kind != "" && env.Error.Kind != kind {
		t.Fatalf("error kind = %q, want %q (message %q)", env.Error.Kind, kind, env.Error.Message)
	}
	if !strings.Contains(env.Error.Message, msgPart) {
		t.Fatalf("error message %q does not contain %q", env.Error.Message, msgPart)
	}
	if env.Error.Retryable != retryable(env.Error.Kind) {
		t.Fatalf("retryable = %v for kind %s", env.Error.Retryable, env.Error.Kind)
	}
}

// same compares convention values by their canonical JSON.
func same(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := jsonx.Marshal(got)
	if err != nil {
		t.Fatalf("%s: marshal got: %v", what, err)
	}
	w, err := jsonx.Marshal(norm(want))
	if err != nil {
		t.Fatalf("%s: marshal want: %v", what, err)
	}
	if string(g) != string(w) {
		t.Fatalf("%s:\n got  %s\n want %s", what, g, w)
	}
}

func dataMap(t *testing.T, env toolresult.Envelope) map[string]any {
	t.Helper()
	m, ok := env.Data.(map[string]any)
	if !ok {
		t.Fatalf("data is %T (%v), want an object", env.Data, env.Data)
	}
	return m
}
