package whatif_test

import (
	"context"
	"fmt"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/whatif"
)

// A recorded run of v1 failed at fetch; v2 handles that error. The what-if
// answers fetch from the record (no tool runs) and says the run would now
// complete, diverging at fetch.
func Example() {
	v1, _ := parser.Parse([]byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: orders, path: examples/orders}
workflow:
  - step: start
    tool: {kind: http, url: "http://svc/orders"}
`))
	v2, _ := parser.Parse([]byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: orders, path: examples/orders}
workflow:
  - step: start
    tool: {kind: http, url: "http://svc/orders"}
    spec: {on_error: continue}
`))
	// The record: v1 run once, its http call answered 503.
	s := enginetest.New(v1, 1024)
	s.Default = func(*enginetest.Cmd) enginetest.Reply { return enginetest.Reply{Status: "error", Error: "HTTP 503"} }
	_ = s.Start(nil)
	_ = s.RunToEnd(10)
	rec := whatif.Record{ExecutionID: 1024, Path: "examples/orders", Version: 1, Status: s.Status(), Events: s.Log}

	r := &whatif.Runner{Engine: engine.New(engine.Config{})}
	e, err := r.Execution(context.Background(), whatif.Version{PB: v2, Version: 2}, rec)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rec.Status, "→", e.Outcome, "at", e.DivergesAt)
	for _, st := range e.Steps {
		fmt.Println(st.Step, st.Verdict, st.Diff)
	}
	// Output:
	// FAILED → would_complete at start
	// start changed status: recorded failed, now completed (HTTP 503)
}
