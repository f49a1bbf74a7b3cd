package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/wire"
	"github.com/noetl-go/noetl/shared/worker"
)

// server is the URL of the control plane TestMain starts for the examples:
// a real stack (throwaway Postgres, embedded NATS JetStream) with one worker
// on the pool "examples", so the examples' output is what a user sees.
var server string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	srv, err := devserver.Start(ctx, devserver.Options{Getenv: func(k string) string {
		switch k {
		case "NOETL_DATABASE_URL", "NOETL_SHARD_URLS", "NOETL_NATS_URL", "NOETL_SERVER_URL":
			return "" // always the throwaway parts
		}
		return os.Getenv(k)
	}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "client examples: start the stack: %v\n", err)
		return 1
	}
	defer srv.Close()
	w, err := (&worker.Standard{Server: srv.URL, JS: srv.JS, Pool: "examples", ID: "examples-0", Concurrency: 2,
		Python: "python3", Results: srv.Results, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}).Build(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "client examples: build the worker: %v\n", err)
		return 1
	}
	wctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(wctx) }()
	defer wg.Wait()
	defer stop()
	server = srv.URL
	return m.Run()
}

// Register a playbook, start it on a worker pool, and wait for it to end.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New(server, "") // a token when the server asks for one (NOETL_API_TOKEN)

	reg, err := c.Register(ctx, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: hello, path: examples/hello}
workload:
  name: world
workflow:
  - step: start
    tool: {kind: noop}
    next: greet
  - step: greet
    tool: {kind: noop, result: {message: "hello {{ workload.name }}"}}
    set:
      ctx.greeting: "{{ output.message }}"
`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("registered", reg.Path)

	id, err := c.Execute(ctx, wire.ExecuteRequest{Path: reg.Path, Pool: "examples",
		Payload: map[string]any{"name": "gophers"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The worker on the pool runs the steps; Wait polls the status until the
	// execution ends, then reads it.
	ex, err := c.Wait(ctx, id, 100*time.Millisecond)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("status:", ex.Status)
	fmt.Println("result:", ex.Result.V)
	for _, name := range []string{"start", "greet"} {
		fmt.Printf("%s: %v\n", name, ex.Steps[name].Status)
	}

	// The log: every event the execution wrote, in order.
	events, _, err := c.Events(ctx, id, 0, 100)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first event:", events[0].EventType, "last event:", events[len(events)-1].EventType)
	// Output:
	// registered examples/hello
	// status: COMPLETED
	// result: map[greeting:hello gophers]
	// start: completed
	// greet: completed
	// first event: playbook.started last event: playbook.completed
}

// A refused request is an *Error with the HTTP status and the server's
// message, which says what to do.
func ExampleStatusOf() {
	c := client.New(server, "")
	_, err := c.Execute(context.Background(), wire.ExecuteRequest{Path: "examples/never-registered"})
	fmt.Println(client.StatusOf(err))
	fmt.Println(err)
	// Output:
	// 404
	// 404: playbook examples/never-registered not found; register it first
}
