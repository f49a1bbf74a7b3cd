package controlplane_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
)

// storedChain is start → a1 … a6 → final, final's input reading a1 … a5.
func storedChain() string {
	var b strings.Builder
	b.WriteString("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: stored-chain, path: tests/stored-chain}\nworkflow:\n")
	b.WriteString("  - {step: start, tool: {kind: noop}, next: a1}\n")
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&b, "  - {step: a%d, tool: {kind: noop}, next: a%d}\n", i, i+1)
	}
	b.WriteString("  - {step: a6, tool: {kind: noop}, next: final}\n")
	b.WriteString(`  - step: final
    tool: {kind: noop, input: {v1: "{{ a1.v }}", v2: "{{ a2.v }}", v3: "{{ a3.v }}", v4: "{{ a4.v }}", v5: "{{ a5.v }}"}}
`)
	return b.String()
}

// TestDecisionReadsManyStoredResults: a decision that reads more stored
// results than a few rounds of loading used to allow (here five, each over
// the 64 KiB kept in the snapshot) completes: a6's completion renders
// final's input from all five. It failed with "engine: needs stored results
// result/a5#1[-1]", the worker got errors and the execution ended FAILED.
func TestDecisionReadsManyStoredResults(t *testing.T) {
	s := newStack(t)
	s.register(t, storedChain())
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/stored-chain"})
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 70_000)
	s.drive(t, st.ExecutionID, func(c store.Command) any {
		var n int
		if _, err := fmt.Sscanf(c.Step, "a%d", &n); err != nil {
			return echoInput(c)
		}
		return map[string]any{"v": n, "pad": pad}
	})
	v := s.execution(t, st.ExecutionID)
	if v.Row.Status != lifecycle.ExecutionCompleted {
		t.Fatalf("status %s (%s)", v.Row.Status, v.Row.Error)
	}
	want := map[string]any{"v1": int64(1), "v2": int64(2), "v3": int64(3), "v4": int64(4), "v5": int64(5)}
	if got := v.Steps["final"].Result; !reflect.DeepEqual(got, want) {
		t.Fatalf("final saw %v, want %v", got, want)
	}
}
