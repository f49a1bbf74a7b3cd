package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/toolresult"
)

// children is an in-memory Children: Start records the request and answers with the
// scripted outcome; Wait returns it, or blocks until ctx ends when block is set.
type children struct {
	mu       sync.Mutex
	started  []ChildRequest
	status   string
	result   any
	startErr error
	waitErr  error
	block    bool
}

func (c *children) Start(_ context.Context, req ChildRequest) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.startErr != nil {
		return "", c.startErr
	}
	c.started = append(c.started, req)
	return fmt.Sprintf("child-%d", len(c.started)), nil
}

func (c *children) Wait(ctx context.Context, id string) (string, any, error) {
	if c.block {
		<-ctx.Done()
		return "", nil, ctx.Err()
	}
	if c.waitErr != nil {
		return "", nil, c.waitErr
	}
	return c.status, c.result, nil
}

func (c *children) last(t *testing.T) ChildRequest {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.started) == 0 {
		t.Fatal("no child started")
	}
	return c.started[len(c.started)-1]
}

func TestPlaybookCompleted(t *testing.T) {
	t.Parallel()
	ch := &children{status: "COMPLETED", result: ChildView{
		Ctx:   map[string]any{"total": int64(3)},
		Steps: map[string]any{"load": map[string]any{"rows": int64(7), "status": "its own"}},
	}}
	r := New(Options{Children: ch})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx = WithCall(ctx, Call{ExecutionID: "100", Step: "call_child"})
	env := execCtx(ctx, r, map[string]any{"kind": "playbook", "path": "tests/child", "execution_pool": "gpu",
		"payload": map[string]any{"extra": true}}, map[string]any{"n": 1})
	mustSucceed(t, env)
	same(t, "data", env.Data, map[string]any{"execution_id": "child-1", "status": "COMPLETED", "result": map[string]any{"total": 3}})
	req := ch.last(t)
	if req.ParentExecutionID != "100" || req.ParentStep != "call_child" || req.Path != "tests/child" || req.ExecutionPool != "gpu" {
		t.Fatalf("request = %+v", req)
	}
	same(t, "payload", req.Payload, map[string]any{"n": 1, "extra": true})

	// return_step picks that step's latest result, whose fields are at the top too
	// (NoETL's playbooks read them there); ours keep their meaning.
	env = execCtx(ctx, r, map[string]any{"kind": "playbook", "catalog_id": "55", "return_step": "load"}, nil)
	mustSucceed(t, env)
	same(t, "return_step", env.Data, map[string]any{"execution_id": "child-2", "status": "COMPLETED", "rows": 7,
		"result": map[string]any{"rows": 7, "status": "its own"}})
	if req := ch.last(t); req.CatalogID != "55" || req.ReturnStep != "load" {
		t.Fatalf("request = %+v", req)
	}

	// A child that set nothing has result {}.
	ch2 := &children{status: "completed", result: nil}
	env = execTool(t, New(Options{Children: ch2}), map[string]any{"kind": "playbook", "path": "p", ConfigExecutionID: "9"}, nil)
	mustSucceed(t, env)
	same(t, "empty ctx", env.Data, map[string]any{"execution_id": "child-1", "status": "COMPLETED", "result": map[string]any{}})
	if ch2.last(t).ParentExecutionID != "9" {
		t.Fatalf("parent from _execution_id: %+v", ch2.last(t))
	}

	// A plain map from Wait is the final ctx; return_step then cannot be served.
	ch3 := &children{status: "COMPLETED", result: map[string]any{"k": "v"}}
	r3 := New(Options{Children: ch3})
	env = execTool(t, r3, map[string]any{"kind": "playbook", "path": "p"}, nil)
	mustSucceed(t, env)
	same(t, "plain ctx", dataMap(t, env)["result"], map[string]any{"k": "v"})
	env = execTool(t, r3, map[string]any{"kind": "playbook", "path": "p", "return_step": "x"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "return_step")
}

func TestPlaybookFailedChild(t *testing.T) {
	t.Parallel()
	for _, status := range []string{"FAILED", "CANCELLED"} {
		ch := &children{status: status, result: &ChildView{Ctx: map[string]any{"partial": true}, Error: map[string]any{"message": "step x broke"}}}
		env := execTool(t, New(Options{Children: ch}), map[string]any{"kind": "playbook", "path": "p"}, nil)
		mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "child execution child-1 (p) "+status)
		if status == "FAILED" && !strings.Contains(env.Error.Message, "step x broke") {
			t.Fatalf("message %q lacks the child's error", env.Error.Message)
		}
		same(t, "data kept", env.Data, map[string]any{"execution_id": "child-1", "status": status, "result": map[string]any{"partial": true}})
	}
}

func TestPlaybookNoWaitTimeoutAndErrors(t *testing.T) {
	t.Parallel()
	ch := &children{block: true}
	r := New(Options{Children: ch})
	env := execTool(t, r, map[string]any{"kind": "playbook", "path": "p", "wait": false}, nil)
	mustSucceed(t, env)
	same(t, "no wait", env.Data, map[string]any{"execution_id": "child-1", "status": "RUNNING"})

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	env = execCtx(ctx, r, map[string]any{"kind": "playbook", "path": "p"}, nil)
	mustFail(t, env, toolresult.StatusTimeout, toolresult.KindTimeout, "waiting for child execution child-2")
	same(t, "timeout data", env.Data, map[string]any{"execution_id": "child-2", "status": "RUNNING"})

	env = execTool(t, New(Options{}), map[string]any{"kind": "playbook", "path": "p"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "no Children configured")

	env = execTool(t, r, map[string]any{"kind": "playbook"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "path or catalog_id is required")

	env = execTool(t, New(Options{Children: &children{startErr: errors.New("catalog says no")}}), map[string]any{"kind": "playbook", "path": "p"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "catalog says no")

	env = execTool(t, New(Options{Children: &children{waitErr: errors.New("api down")}}), map[string]any{"kind": "playbook", "path": "p"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "api down")

	env = execTool(t, New(Options{Children: &children{status: "RUNNING"}}), map[string]any{"kind": "playbook", "path": "p"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "unexpected status")
}
