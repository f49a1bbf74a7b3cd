package enginetest_test

import (
	"fmt"

	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

// A playbook runs end to end in memory: the simulator plays the store and the
// workers, and each tool answers from a script. The fetch step's result sets
// ctx.total, and the exclusive arcs route on it.
func Example() {
	pb, diags := parser.Parse([]byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: orders, path: examples/orders}
workload:
  region: eu
workflow:
  - step: start
    tool: {kind: noop}
    next: fetch
  - step: fetch
    tool: {kind: noop, input: {region: "{{ workload.region }}"}}
    set:
      ctx.total: "{{ output.total }}"
    next:
      spec: {mode: exclusive}
      arcs:
        - step: big_day
          when: "{{ ctx.total > 100 }}"
        - step: quiet_day
  - step: big_day
    tool: {kind: noop}
  - step: quiet_day
    tool: {kind: noop}
`))
	if diags.HasErrors() {
		fmt.Println(diags)
		return
	}
	s := enginetest.New(pb, 1)
	s.Tools = map[string]enginetest.Tool{
		"fetch": func(c *enginetest.Cmd) enginetest.Reply {
			// The worker sees the rendered input.
			fmt.Println("fetch runs for region", enginetest.Args(c)["region"])
			return enginetest.Reply{Data: map[string]any{"total": int64(250)}}
		},
	}
	if err := s.Start(nil); err != nil {
		fmt.Println(err)
		return
	}
	if err := s.RunToEnd(20); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("execution:", s.Status())
	fmt.Println("ctx.total:", s.Snapshot().Ctx["total"])
	for _, step := range []string{"fetch", "big_day", "quiet_day"} {
		fmt.Printf("%s: %s\n", step, s.StepStatus(step))
	}
	fmt.Println("commands issued:", s.Count(eventtype.CommandIssued, ""))
	// Output:
	// fetch runs for region eu
	// execution: COMPLETED
	// ctx.total: 250
	// fetch: completed
	// big_day: completed
	// quiet_day: skipped
	// commands issued: 3
}
