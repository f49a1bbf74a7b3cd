package api_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/dev/devstack"
	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// example is the API the examples call: a real stack (databases on the
// tests' Postgres, an embedded NATS JetStream) with the test tokens. An
// example takes no *testing.T, so TestMain builds it (startExample) before
// the tests run.
var example *apitest.Stack

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
	s, stop, err := apitest.Start(ctx, pg, n, apitest.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		teardown()
		return nil, err
	}
	example = s
	return func() { stop(); teardown() }, nil
}

// Serve a request the way a Lambda function or the local server does: the
// API is transport-free, a Request in and a Response out. A route reads its
// body into its request type, and a field it refuses is a 422 naming it.
func ExampleAPI_Serve() {
	serve := func(method, path, body string) map[string]any {
		resp := example.API.Serve(context.Background(), &api.Request{Method: method, Path: path, Body: []byte(body),
			Header: http.Header{"Authorization": {"Bearer " + apitest.APIToken}, "Content-Type": {"application/json"}}})
		out, _ := jsonx.DecodeObject(resp.Body)
		fmt.Println(method, path, resp.Status)
		return out
	}
	reg := serve("POST", "/api/catalog/register", string(jsonx.MustMarshal(map[string]any{"content": `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: hello, path: examples/hello}
workflow:
  - step: start
    tool: {kind: noop}
`})))
	fmt.Println("path:", reg["path"], "version:", reg["version"])

	started := serve("POST", "/api/execute", `{"path": "examples/hello", "workload": {"who": "gophers"}}`)
	fmt.Println("status:", started["status"], "commands:", started["commands_generated"])

	refused := serve("POST", "/api/execute", `{"path": "examples/hello", "payload": "who=gophers"}`)
	fmt.Println(refused["error"])
	// Output:
	// POST /api/catalog/register 200
	// path: examples/hello version: 1
	// POST /api/execute 200
	// status: started commands: 1
	// POST /api/execute 422
	// payload: expected object, got string
}
