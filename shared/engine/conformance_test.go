package engine_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// The conformance playbooks run in the simulator with scripted tool results
// written the way the real tools answer: python data is what the code computes
// from its input, http data is {status_code, headers, body, data} (R-P6), SQL
// errors carry their SQLSTATE. Outcomes follow ../shared/conformance/README.md,
// matched as subsets (R-C2).

func conformanceSim(t *testing.T, file string) *enginetest.Sim {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(conformanceDir(t), "playbooks", file))
	if err != nil {
		t.Fatal(err)
	}
	pb, ds := parser.Parse(src)
	if ds.HasErrors() {
		t.Fatalf("%s: %v", file, ds.Errors())
	}
	return enginetest.New(pb, 9000)
}

func python(data any) enginetest.Reply { return enginetest.Reply{Data: data} }

func item(f func(in map[string]any) any) enginetest.ItemTool {
	return func(it pipeline.Item) toolresult.Envelope {
		return toolresult.Envelope{Status: "success", Data: f(it.Input)}
	}
}

func wantCompleted(t *testing.T, s *enginetest.Sim, steps ...string) {
	t.Helper()
	if s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("status %s (error %q)\nlog %v", s.Status(), s.Snapshot().Error, s.Types(""))
	}
	for _, st := range steps {
		if s.StepStatus(st) != "completed" {
			t.Errorf("step %s is %s", st, s.StepStatus(st))
		}
	}
}

func TestConformanceHelloWorld(t *testing.T) {
	s := conformanceSim(t, "hello_world.yaml")
	s.Tools = map[string]enginetest.Tool{
		"start": func(*enginetest.Cmd) enginetest.Reply { return python(map[string]any{"status": "initialized"}) },
		"test_step": func(c *enginetest.Cmd) enginetest.Reply {
			return python(map[string]any{"status": "ok", "data": map[string]any{"message": enginetest.Args(c)["message"]}})
		},
		"end": func(*enginetest.Cmd) enginetest.Reply { return python(map[string]any{"status": "complete"}) },
	}
	run(t, s, nil)
	wantCompleted(t, s, "start", "test_step", "end")
	if got := s.Result("test_step"); !conformance.Subset(map[string]any{"status": "ok", "data": map[string]any{"message": "Hello World"}}, got) {
		t.Fatalf("test_step result %v", got)
	}
	if !(s.Index("step.enter", "start", 0) < s.Index("step.enter", "test_step", 0) && s.Index("step.enter", "test_step", 0) < s.Index("step.enter", "end", 0)) {
		t.Fatal("steps out of order")
	}
}

func TestConformanceStartWithAction(t *testing.T) {
	s := conformanceSim(t, "test_start_with_action.yaml")
	s.Items = map[string]enginetest.ItemTool{
		"init_action": item(func(in map[string]any) any {
			return map[string]any{"status": "success", "message": "Start step executed with action type",
				"data": map[string]any{"executed": true, "input": in["input_data"]}}
		}),
		"process_action": item(func(in map[string]any) any {
			return map[string]any{"status": "success", "message": "Process step executed",
				"data": map[string]any{"from_start": in["from_start"], "processed": true}}
		}),
		"complete": item(func(map[string]any) any { return map[string]any{"status": "complete"} }),
	}
	run(t, s, nil)
	wantCompleted(t, s, "start", "process", "end")
	if got := s.Result("process"); !conformance.Subset(map[string]any{"data": map[string]any{"from_start": true}}, got) {
		t.Fatalf("process result %v", got)
	}
	if got := s.Result("start"); !conformance.Subset(map[string]any{"data": map[string]any{"input": map[string]any{"test_value": "hello"}}}, got) {
		t.Fatalf("start result %v: input_data must be the rendered workload", got)
	}
}

func TestConformanceComprehensive(t *testing.T) {
	// R-C2: run twice, forcing each branch through the threshold.
	for _, c := range []struct {
		threshold    int64
		ran, skipped string
		category     string
		final        int64
	}{
		{0, "process_high", "process_low", "high", 20},
		{21, "process_low", "process_high", "low", 110},
	} {
		t.Run(c.ran, func(t *testing.T) {
			s := conformanceSim(t, "comprehensive_test.yaml")
			s.Tools = map[string]enginetest.Tool{
				"start": func(c *enginetest.Cmd) enginetest.Reply {
					// random.randint(1, 20) scripted to 10.
					return python(map[string]any{"status": "initialized", "random_value": 10, "message": enginetest.Args(c)["initial_message"]})
				},
				"process_high": func(c *enginetest.Cmd) enginetest.Reply {
					v := enginetest.Args(c)["value"].(int64)
					return python(map[string]any{"status": "high_processed", "original": v, "processed": v * 2, "category": "high"})
				},
				"process_low": func(c *enginetest.Cmd) enginetest.Reply {
					v := enginetest.Args(c)["value"].(int64)
					return python(map[string]any{"status": "low_processed", "original": v, "processed": v + 100, "category": "low"})
				},
				"summarize": func(c *enginetest.Cmd) enginetest.Reply {
					a := enginetest.Args(c)
					return python(map[string]any{"workflow": "comprehensive_test", "original_value": a["start_value"],
						"processing_path": a["category"], "final_result": a["final_value"], "completed": true})
				},
				"end": func(*enginetest.Cmd) enginetest.Reply { return python(map[string]any{"status": "completed"}) },
			}
			run(t, s, map[string]any{"threshold": c.threshold})
			wantCompleted(t, s, c.ran, "summarize", "end")
			if s.StepStatus(c.skipped) != "skipped" || s.Count("step.enter", c.skipped) != 0 {
				t.Fatalf("%s is %s", c.skipped, s.StepStatus(c.skipped))
			}
			if s.Count("step.enter", "summarize") != 1 || s.Index("step.enter", "summarize", 0) < s.Index("step.exit", c.ran, 0) {
				t.Fatal("summarize must be entered once, after the branch")
			}
			want := map[string]any{"processing_path": c.category, "final_result": c.final, "original_value": int64(10)}
			if got := s.Result("summarize"); !conformance.Subset(want, got) {
				t.Fatalf("summarize %v, want %v", got, want)
			}
		})
	}
}

func TestConformanceFanoutReduce(t *testing.T) {
	s := conformanceSim(t, "fanout_reduce_phase6.yaml")
	s.Tools = map[string]enginetest.Tool{
		"start":              func(*enginetest.Cmd) enginetest.Reply { return python(map[string]any{"status": "ok"}) },
		"normalize_customer": func(*enginetest.Cmd) enginetest.Reply { return python(map[string]any{"normalized": true}) },
		"enrich_customer":    func(*enginetest.Cmd) enginetest.Reply { return python(map[string]any{"enriched": true}) },
		"reduce_customer":    func(*enginetest.Cmd) enginetest.Reply { return python(map[string]any{"reduced": true}) },
	}
	run(t, s, nil)
	wantCompleted(t, s, "normalize_customer", "enrich_customer", "reduce_customer")
	if !reflect.DeepEqual(s.Result("normalize_customer"), map[string]any{"normalized": true}) {
		t.Fatalf("normalize_customer %v (R-C2)", s.Result("normalize_customer"))
	}
	if s.Count("step.enter", "reduce_customer") != 1 {
		t.Fatalf("reduce_customer entered %d times", s.Count("step.enter", "reduce_customer"))
	}
	issued := s.Index("command.issued", "reduce_customer", 0)
	if issued < s.Index("command.completed", "normalize_customer", 0) || issued < s.Index("command.completed", "enrich_customer", 0) {
		t.Fatal("reduce_customer issued before both branches completed")
	}
}

func TestConformanceSimpleLoop(t *testing.T) {
	s := conformanceSim(t, "test_simple_loop.yaml")
	s.Tools = map[string]enginetest.Tool{
		"loop_test": func(c *enginetest.Cmd) enginetest.Reply {
			n := enginetest.Args(c)["num"].(map[string]any)
			return python(map[string]any{"value": n["value"], "name": n["name"], "doubled": n["value"].(int64) * 2})
		},
	}
	run(t, s, nil)
	wantCompleted(t, s, "start", "loop_test", "end")
	got, _ := s.Result("loop_test").([]any)
	if len(got) != 3 {
		t.Fatalf("loop result %v", s.Result("loop_test"))
	}
	for i, d := range []int64{20, 40, 60} {
		if !conformance.Subset(map[string]any{"doubled": d}, got[i]) {
			t.Errorf("iteration %d = %v, want doubled %d", i, got[i], d)
		}
	}
	for i := 1; i < 3; i++ {
		if s.Index("command.issued", "loop_test", i) < s.Index("command.completed", "loop_test", i-1) {
			t.Errorf("iteration %d started before %d finished", i, i-1)
		}
	}
}

func TestConformanceVarsTemplateAccess(t *testing.T) {
	s := conformanceSim(t, "test_vars_template_access.yaml")
	s.Items = map[string]enginetest.ItemTool{
		"start_task": item(func(map[string]any) any { return map[string]any{"status": "initialized"} }),
		"set_vars_task": item(func(map[string]any) any {
			return map[string]any{"counter": 42, "message": "Template access works!", "config": map[string]any{"timeout": 30, "retries": 3}}
		}),
		"use_vars_task": item(func(in map[string]any) any {
			return map[string]any{"status": "success", "received_counter": in["counter"], "received_message": in["message"],
				"received_timeout": in["timeout"], "full_greeting": in["full_greeting"]}
		}),
		// verify_task reads context.get('use_vars_in_template'): the python
		// context global is {execution_id, step, input} (R-P3), so it finds nothing.
		"verify_task": item(func(map[string]any) any { return map[string]any{"status": "failed"} }),
		"end_task":    item(func(map[string]any) any { return map[string]any{"status": "complete"} }),
	}
	run(t, s, nil)
	wantCompleted(t, s, "set_variables", "use_vars_in_template", "verify_results", "end")
	want := map[string]any{"received_counter": int64(42), "received_message": "Template access works!",
		"received_timeout": int64(30), "full_greeting": "Hello, Template access works!"}
	if got := s.Result("use_vars_in_template"); !conformance.Subset(want, got) {
		t.Fatalf("use_vars_in_template %v", got)
	}
	if ctx := s.Snapshot().Ctx; ctx["counter"] != int64(42) {
		t.Fatalf("ctx %v: policy set ctx.* must become durable (R-W1, R-R5)", ctx)
	}
}

// paginatedAPI answers like the test server of R-C3: 35 users, has_more while
// offset + limit < 35.
func paginatedAPI(it pipeline.Item) toolresult.Envelope {
	params, _ := it.Config["params"].(map[string]any)
	offset, limit := params["offset"].(int64), params["limit"].(int64)
	var users []any
	for id := offset + 1; id <= min(offset+limit, 35); id++ {
		users = append(users, map[string]any{"id": id, "username": "user" + string(rune('0'+id%10)), "email": "u@example.com"})
	}
	if !strings.HasPrefix(it.Config["url"].(string), "http://127.0.0.1:5555/") {
		return toolresult.Envelope{Status: "error", Error: &toolresult.ErrorInfo{Message: "connection refused", Kind: "connection", Retryable: true}}
	}
	body := map[string]any{"users": users, "has_more": offset+limit < 35, "offset": offset, "limit": limit, "total": 35}
	return toolresult.Envelope{Status: "success", Data: map[string]any{"status_code": 200, "headers": map[string]any{"Content-Type": "application/json"}, "body": body, "data": body}}
}

func TestConformancePagination(t *testing.T) {
	s := conformanceSim(t, "test_pagination_offset.yaml")
	// fetch_page is a single http tool with spec.policy: a one-item pipeline.
	s.Items = map[string]enginetest.ItemTool{"fetch_page": paginatedAPI}
	s.Tools = map[string]enginetest.Tool{
		"start": func(*enginetest.Cmd) enginetest.Reply { return python(map[string]any{"status": "initialized"}) },
		"check_pagination": func(c *enginetest.Cmd) enginetest.Reply {
			a := enginetest.Args(c)
			data, _ := a["response"].(map[string]any)["body"].(map[string]any)
			collected, _ := a["collected"].([]any)
			users, _ := data["users"].([]any)
			all := append(append([]any{}, collected...), users...)
			return python(map[string]any{"collected_users": all, "has_more": data["has_more"],
				"next_offset": a["current_offset"].(int64) + a["limit"].(int64), "total_collected": len(all)})
		},
		"validate_results": func(c *enginetest.Cmd) enginetest.Reply {
			users := enginetest.Args(c)["users"].([]any)
			first, last := users[0].(map[string]any)["id"], users[len(users)-1].(map[string]any)["id"]
			status := "failed"
			if len(users) == 35 {
				status = "success"
			}
			return python(map[string]any{"status": status, "total_users": len(users), "first_id": first, "last_id": last})
		},
		"end": func(*enginetest.Cmd) enginetest.Reply { return python(map[string]any{"status": "complete"}) },
	}
	run(t, s, map[string]any{"api_url": "http://127.0.0.1:5555"})
	wantCompleted(t, s, "fetch_page", "check_pagination", "validate_results", "end")
	if n := s.Count("step.enter", "fetch_page"); n != 4 {
		t.Fatalf("fetch_page visited %d times, want 4", n)
	}
	if got := s.Result("validate_results"); !conformance.Subset(map[string]any{"total_users": int64(35), "first_id": int64(1), "last_id": int64(35)}, got) {
		t.Fatalf("validate_results %v", got)
	}
}

func TestConformanceBrokenSQL(t *testing.T) {
	s := conformanceSim(t, "broken_sql.yaml")
	var auth any
	s.Tools = map[string]enginetest.Tool{
		"start": func(*enginetest.Cmd) enginetest.Reply { return python(map[string]any{"status": "initialized"}) },
		"verify_pg_data": func(c *enginetest.Cmd) enginetest.Reply {
			auth = c.Payload["tool_config"].(map[string]any)["auth"]
			return enginetest.Reply{Status: "error", Error: `ERROR: syntax error at or near "FROM" (SQLSTATE 42601)`}
		},
	}
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed {
		t.Fatalf("status %s", s.Status())
	}
	last := s.Log[len(s.Log)-1]
	if last.Type != "playbook.failed" || !strings.Contains(last.Context["error"].(string), "42601") ||
		!reflect.DeepEqual(last.Context["failed_steps"], []any{"verify_pg_data"}) {
		t.Fatalf("last event %s %v", last.Type, last.Context)
	}
	if s.Count("step.enter", "end") != 0 {
		t.Fatal("end must never be entered")
	}
	if auth != "pg_local" {
		t.Fatalf("auth rendered to %v, want the credential alias pg_local", auth)
	}
}
