package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/wire"
)

// nulPlaybook fans out to a shell step printing a NUL, a python step
// returning one and a clean step, so the worker may report them together.
const nulPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: nul, path: e2e/nul}
workflow:
  - step: start
    tool: {kind: noop}
    next: [shell_nul, python_nul, clean]
  - step: shell_nul
    tool: {kind: shell, command: "printf 'a\\000b'"}
  - step: python_nul
    tool:
      kind: python
      code: |
        result = {"rows": ["fine", "x\x00"]}
  - step: clean
    tool: {kind: shell, command: "printf fine"}
`

// TestToolOutputWithNUL is issue 10's done-when for a NUL in a tool's output,
// through the real stack and worker: each such step gets a 422 naming the
// field, which the worker reports as command.failed naming the cause, so the
// steps fail on their first attempt with no lease expiry and the execution
// ends FAILED; the clean step beside them completes. Before, the report got a
// 500, the result was dropped, and the execution ended 70 s later on "lease
// expired and no attempt is left", the cause only in the server log. The
// product's default lease (defaultLease): on the shared stack's 3 s lease
// "no expiry" would depend on the machine's load.
func TestToolOutputWithNUL(t *testing.T) {
	path := registerYAML(t, nulPlaybook)
	st := shared.defaultLease(t)
	st.startWorkers(t, "e2e-nul", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	id, err := st.cl.Execute(ctx, wire.ExecuteRequest{Path: path, Pool: "e2e-nul"})
	if err != nil {
		t.Fatal(err)
	}
	view, err := st.cl.Wait(ctx, id, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if view.Status != "FAILED" {
		t.Fatalf("status %v, want FAILED: %v", view.Status, view)
	}
	for name, field := range map[string]string{
		"shell_nul":  `payload.result.data.stdout: contains a NUL character (\u0000) at byte 1, which cannot be stored`,
		"python_nul": `payload.result.data.rows[1]: contains a NUL character (\u0000) at byte 1, which cannot be stored`,
	} {
		s := step(view, name)
		errText := string(s.Error)
		if s.Status != "failed" || s.Attempts != 1 || !strings.Contains(errText, "the server refused the step's result") ||
			!strings.Contains(errText, field) {
			t.Errorf("%s: %v, want failed on attempt 1 with an error naming %q", name, s, field)
		}
	}
	if s := step(view, "clean"); s.Status != "completed" {
		t.Errorf("clean: %v, want completed", s)
	}
	evs := shared.events(t, id)
	if n := count(evs, "command.expired", ""); n != 0 {
		t.Errorf("%d lease expiries; the refusal must end the steps", n)
	}
	shared.verify(t, id)
}
