package tools

import (
	"context"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolresult"
)

func TestNoop(t *testing.T) {
	r := New(Options{})
	env := execTool(t, r, map[string]any{"kind": "noop", "result": map[string]any{"a": 1, "b": []any{"x"}}}, nil)
	mustSucceed(t, env)
	same(t, "result", env.Data, map[string]any{"a": 1, "b": []any{"x"}})

	env = execTool(t, r, map[string]any{"kind": "noop", "message": "hello"}, nil)
	mustSucceed(t, env)
	same(t, "message", env.Data, map[string]any{"status": "ok", "message": "hello"})

	env = execTool(t, r, map[string]any{"kind": "noop", "result": nil}, nil)
	mustSucceed(t, env)
	if env.Data != nil {
		t.Fatalf("result: null given → data %v, want null", env.Data)
	}
}

func TestUnknownKind(t *testing.T) {
	r := New(Options{})
	env := execTool(t, r, map[string]any{"kind": "snowflake", "query": "select 1"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "tool kind snowflake is not supported by this worker")

	// A kind this project runs whose engine the worker binary lacks says so.
	env = execTool(t, r, map[string]any{"kind": "duckdb", "query": "select 1"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "this worker has no DuckDB engine")

	env = r.Exec(context.Background(), pipeline.Item{Config: map[string]any{}})
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "tool kind is missing")
}

func TestExecKindFromConfigAndCancelledCtx(t *testing.T) {
	r := New(Options{})
	// Kind missing on the item: taken from the config.
	env := r.Exec(context.Background(), pipeline.Item{Config: map[string]any{"kind": "noop", "result": "x"}})
	mustSucceed(t, env)
	if env.Data != "x" {
		t.Fatalf("data = %v", env.Data)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env = r.Exec(ctx, pipeline.Item{Kind: "noop", Config: map[string]any{}})
	mustFail(t, env, toolresult.StatusTimeout, toolresult.KindTimeout, "did not start")
	if !strings.Contains(env.Error.Message, "cancelled") {
		t.Fatalf("message %q should say cancelled", env.Error.Message)
	}
}
