package playbook_test

import (
	"reflect"
	"testing"

	"github.com/noetl-go/noetl/shared/playbook"
)

// TestOutline: the dashboard's graph comes from the parsed playbook, so every
// `next` spelling, loop and retry reaches it as the engine reads them.
func TestOutline(t *testing.T) {
	pb := parse(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: each
          when: "{{ workload.n > 0 }}"
        - step: done
  - step: each
    loop: {in: "{{ [1, 2] }}", iterator: x, spec: {mode: parallel}}
    tool: {kind: noop}
    retry: {max_attempts: 3}
    next: done
  - step: done
    tool: {kind: noop}
`)
	got := pb.Outline()
	want := playbook.Outline{Steps: []playbook.OutlineStep{
		{Name: "start", Path: "workflow[0]", Tool: "noop", MaxAttempts: 1, Mode: "exclusive",
			Next: []playbook.OutlineArc{{To: "each", When: "{{ workload.n > 0 }}"}, {To: "done"}}},
		{Name: "each", Path: "workflow[1]", Tool: "noop", Loop: "parallel", Iterator: "x", MaxAttempts: 3, Mode: "inclusive",
			Next: []playbook.OutlineArc{{To: "done"}}},
		{Name: "done", Path: "workflow[2]", Tool: "noop", MaxAttempts: 1, Next: []playbook.OutlineArc{}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("outline:\n got %+v\nwant %+v", got, want)
	}
}
