package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// multiplying is the template: three replaces, each ten times longer.
const multiplying = `"{{ ('a' * 100000)|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa') }}"`

// budgetFailure checks the execution failed on a render budget, naming the
// limit, without issuing the step's command.
func budgetFailure(t *testing.T, s *enginetest.Sim, step, limit string) {
	t.Helper()
	if s.Status() != lifecycle.ExecutionFailed {
		t.Fatalf("status %s, want FAILED", s.Status())
	}
	if e := s.Snapshot().Error; !strings.Contains(e, "render budget exceeded") || !strings.Contains(e, "limit "+limit) {
		t.Fatalf("error %q does not name the budget %s", e, limit)
	}
	if n := s.Count("command.issued", step); n != 0 {
		t.Fatalf("%d commands issued for %s", n, step)
	}
}

// TestMultiplyingTemplateFailsTheStep: a template that multiplies its text fails
// at dispatch with the budget and its size named, and is not retried (R-L6); with
// on_error continue the step completes with that error and routing goes on.
func TestMultiplyingTemplateFailsTheStep(t *testing.T) {
	s := sim(t, `
workflow:
  - step: start
    retry: {max_attempts: 5}
    tool: {kind: noop, message: `+multiplying+`}
`)
	run(t, s, nil)
	budgetFailure(t, s, "start", "MaxRenderBytes")
	if !strings.Contains(s.Snapshot().Error, "16 MiB") {
		t.Fatalf("error %q lacks the size", s.Snapshot().Error)
	}

	s = sim(t, `
workflow:
  - step: start
    spec: {on_error: continue}
    tool: {kind: noop, message: `+multiplying+`}
    next: after
  - step: after
    tool: {kind: noop}
`)
	run(t, s, nil)
	res, _ := s.Result("start").(map[string]any)
	if e, _ := res["error"].(string); s.Status() != lifecycle.ExecutionCompleted || s.StepStatus("after") != "completed" || !strings.Contains(e, "limit MaxRenderBytes") {
		t.Fatalf("on_error continue: status %s, after %s, start result %v", s.Status(), s.StepStatus("after"), s.Result("start"))
	}
}

// TestRenderBudgetIsPerDecision: the templates of one decision share a budget,
// so writing many of them does not multiply it: twenty set values of 1 MB fail
// where one succeeds, as do twenty steps dispatched by one event.
func TestRenderBudgetIsPerDecision(t *testing.T) {
	var set strings.Builder
	for i := range 20 {
		fmt.Fprintf(&set, "      v%d: \"{{ 'x' * 1000000 }}\"\n", i)
	}
	s := sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    set:
`+set.String())
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed || !strings.Contains(s.Snapshot().Error, "set: ") || !strings.Contains(s.Snapshot().Error, "limit MaxRenderBytes") {
		t.Fatalf("status %s error %q", s.Status(), s.Snapshot().Error)
	}

	var steps, next strings.Builder
	for i := range 20 {
		fmt.Fprintf(&next, "s%d, ", i)
		fmt.Fprintf(&steps, "  - step: s%d\n    tool: {kind: noop, message: \"{{ 'x' * 1000000 }}\"}\n", i)
	}
	s = sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next: [`+strings.TrimSuffix(next.String(), ", ")+`]
`+steps.String())
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionFailed || !strings.Contains(s.Snapshot().Error, "limit MaxRenderBytes") {
		t.Fatalf("status %s error %q", s.Status(), s.Snapshot().Error)
	}
	if issued := s.Count("command.issued", ""); issued < 2 || issued > 17 {
		t.Fatalf("%d commands issued; the budget allows 16 of the 20 fan-out steps", issued)
	}

	// One such value is fine, and so is the same template in the next decision.
	s = sim(t, `
workflow:
  - step: start
    tool: {kind: noop}
    set: {v: "{{ 'x' * 1000000 }}"}
    next: again
  - step: again
    tool: {kind: noop}
    set: {w: "{{ 'x' * 1000000 }}"}
`)
	run(t, s, nil)
	if s.Status() != lifecycle.ExecutionCompleted {
		t.Fatalf("status %s error %q", s.Status(), s.Snapshot().Error)
	}
}

// TestWorkloadTemplatesShareABudget: the workload's templates render once at start
// (R-W5) from one budget; past it, the execution does not start.
func TestWorkloadTemplatesShareABudget(t *testing.T) {
	workload := func(n int) string {
		var b strings.Builder
		b.WriteString("workload:\n")
		for i := range n {
			fmt.Fprintf(&b, "  k%02d: \"{{ 'x' * 1000000 }}\"\n", i)
		}
		return b.String() + "workflow:\n  - step: start\n    tool: {kind: noop}\n"
	}
	if _, err := parse(t, workload(10)).PrepareWorkload(1, 1, nil, time.Time{}); err != nil {
		t.Fatalf("10 MB of workload templates: %v", err)
	}
	_, err := parse(t, workload(20)).PrepareWorkload(1, 1, nil, time.Time{})
	if err == nil || !strings.Contains(err.Error(), "workload.k16: ") || !strings.Contains(err.Error(), "limit MaxRenderBytes") {
		t.Fatalf("20 MB of workload templates: %v", err)
	}
}
