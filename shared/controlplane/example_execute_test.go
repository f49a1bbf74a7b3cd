package controlplane_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/controlplane/cptest"
	"github.com/noetl-go/noetl/shared/dev/devstack"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/store"
)

// example is the service the examples run on: a real stack (databases on the
// tests' Postgres, an embedded NATS JetStream). An example takes no
// *testing.T, so TestMain builds it (startExample) before the tests run.
var example struct {
	ctx context.Context
	svc *controlplane.Service
}

// startExample is the examples' devstacktest.Setup.
func startExample(ctx context.Context, env *devstacktest.Env) (func(), error) {
	pg, err := env.Databases(ctx, 2)
	if err != nil {
		return nil, err
	}
	n, err := devstack.StartNATS(ctx, devstack.NATSOptions{})
	if err != nil {
		_ = pg.Stop()
		return nil, err
	}
	teardown := func() { n.Shutdown(); _ = pg.Stop() }
	s, stop, err := cptest.Start(ctx, pg, n)
	if err != nil {
		teardown()
		return nil, err
	}
	svc, err := controlplane.New(controlplane.Config{Store: s.Store, Publisher: s.Publisher, ServerURL: "http://example",
		Lease: time.Minute, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		stop()
		teardown()
		return nil, err
	}
	example.ctx, example.svc = ctx, svc
	return func() { stop(); teardown() }, nil
}

const greeting = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: greeting, path: examples/greeting}
workload: {name: world}
workflow:
  - step: start
    tool: {kind: noop}
    next: greet
  - step: greet
    tool: {kind: noop, result: {message: "hello {{ workload.name }}"}}
    set: {ctx.greeting: "{{ output.message }}"}
`

// Register a playbook and start it: playbook.started and the first command
// are written in one transaction on the execution's shard, and an
// idempotency key given again answers the first execution.
func ExampleService_Execute() {
	ctx, svc := example.ctx, example.svc
	if _, err := svc.Register(ctx, greeting); err != nil {
		fmt.Println(err)
		return
	}
	req := controlplane.ExecuteRequest{Path: "examples/greeting", Payload: map[string]any{"name": "gophers"},
		IdempotencyKey: "greet-gophers-once"}
	first, err := svc.Execute(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("commands issued:", first.CommandsGenerated)
	again, err := svc.Execute(ctx, req)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("the same execution:", again.ExecutionID == first.ExecutionID, "existing:", again.Existing)

	_, events, err := svc.ExecutionEvents(ctx, store.EventFilter{ExecutionID: first.ExecutionID})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range events {
		fmt.Printf("%d %s %q\n", e.Seq, e.EventType, e.NodeName)
	}
	// Output:
	// commands issued: 1
	// the same execution: true existing: true
	// 1 playbook.started ""
	// 2 step.enter "start"
	// 3 command.issued "start"
}

// Run an execution the way our worker does, one request per step: a report
// claims the first command, then reports each step's end and takes the
// command that end issued, claimed and started in the same transaction.
func ExampleService_Report() {
	ctx, svc := example.ctx, example.svc
	if _, err := svc.Register(ctx, greeting); err != nil {
		fmt.Println(err)
		return
	}
	st, err := svc.Execute(ctx, controlplane.ExecuteRequest{Path: "examples/greeting"})
	if err != nil {
		fmt.Println(err)
		return
	}
	// A worker learns of the first command from its announcement on NATS;
	// here, from the log: the command.issued event's id is what it claims.
	_, events, err := svc.ExecutionEvents(ctx, store.EventFilter{ExecutionID: st.ExecutionID, EventType: "command.issued"})
	if err != nil {
		fmt.Println(err)
		return
	}
	r := controlplane.Report{WorkerID: "example-worker", Take: 1, Claims: []int64{events[0].EventID}}
	for {
		out, err := svc.Report(ctx, r)
		if err != nil {
			fmt.Println(err)
			return
		}
		if len(out.Commands) == 0 {
			break
		}
		// Run the command (a noop: its result is its config's) and report
		// its end, taking what it issues next.
		cmd := out.Commands[0]
		fmt.Println("running", cmd.Step)
		result, _ := cmd.Context["tool_config"].(map[string]any)["result"].(map[string]any)
		r = controlplane.Report{WorkerID: "example-worker", Take: 1, Events: []controlplane.EventInput{{
			ExecutionID: cmd.ExecutionID, Step: cmd.Step, Type: "command.completed", Status: "success", WorkerID: "example-worker",
			Meta:    map[string]any{"command_id": cmd.CommandID, "attempt": int64(cmd.Attempt)},
			Payload: map[string]any{"command_id": cmd.CommandID, "result": map[string]any{"status": "success", "data": result}},
		}}}
	}
	v, err := svc.Execution(ctx, st.ExecutionID)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(v.Row.Status, v.Result)
	// Output:
	// running start
	// running greet
	// COMPLETED map[greeting:hello world]
}
