package playbook_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
)

func members(pb *playbook.Playbook, b playbook.Bitset) []string {
	var out []string
	for _, s := range pb.Steps {
		if b.Has(s.Index) {
			out = append(out, s.Name)
		}
	}
	return out
}

// TestAnalyse pins R-J1: anc(S) = steps with a path to a predecessor of S not
// passing through S (never S itself); back-edge predecessors do not count toward
// joins; preorder ranks follow arcs from start; unreachable steps are marked.
func TestAnalyse(t *testing.T) {
	pb, ds := parser.Parse([]byte(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: g, path: g}
workflow:
  - step: start
    tool: {kind: noop}
    next: [fetch, side]
  - step: fetch
    tool: {kind: noop}
    next: check
  - step: check
    tool: {kind: noop}
    next: [fetch, done, check]
  - step: side
    tool: {kind: noop}
    next: done
  - step: done
    tool: {kind: noop}
  - step: island
    tool: {kind: noop}
    next: done
`))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	g := pb.Graph()
	anc := func(name string) []string { return members(pb, g.Anc[pb.Step(name).Index]) }
	cases := map[string][]string{
		"start": nil,
		"fetch": {"start", "check"}, // check reaches fetch's predecessor check
		"check": {"start", "fetch"}, // the self-arc never puts check in its own set
		"done":  {"start", "fetch", "check", "side"},
		"side":  {"start"},
	}
	for name, want := range cases {
		if got := anc(name); !reflect.DeepEqual(got, want) {
			t.Errorf("anc(%s) = %v, want %v", name, got, want)
		}
	}
	fwd := func(name string) []string {
		var out []string
		for _, p := range g.FwdPreds[pb.Step(name).Index] {
			out = append(out, pb.Steps[p].Name)
		}
		return out
	}
	if got := fwd("fetch"); !reflect.DeepEqual(got, []string{"start"}) {
		t.Errorf("forward preds of fetch = %v: check→fetch is a back edge", got)
	}
	if got := fwd("check"); !reflect.DeepEqual(got, []string{"fetch"}) {
		t.Errorf("forward preds of check = %v: the self-arc is a back edge", got)
	}
	if got := fwd("done"); !reflect.DeepEqual(got, []string{"check", "side"}) {
		t.Errorf("forward preds of done = %v: unreachable island excluded (R-W4)", got)
	}
	rank := func(n string) int { return g.Rank[pb.Step(n).Index] }
	if !(rank("start") < rank("fetch") && rank("fetch") < rank("check") && rank("check") < rank("done") && rank("done") < rank("side") && rank("side") < rank("island")) {
		t.Errorf("preorder ranks %v", g.Rank)
	}
	if g.Reachable[pb.Step("island").Index] || !g.Reachable[pb.Step("done").Index] {
		t.Errorf("reachability %v", g.Reachable)
	}
}

// chain is a workflow of n steps, each leading to the next, one line each.
func chain(n int) string {
	var b strings.Builder
	b.WriteString("workflow:\n")
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		if i == 0 {
			name = "start"
		}
		if i+1 < n {
			fmt.Fprintf(&b, "- {step: %s, tool: {kind: noop}, next: s%d}\n", name, i+1)
		} else {
			fmt.Fprintf(&b, "- {step: %s, tool: {kind: noop}}\n", name)
		}
	}
	return b.String()
}

// TestMaxSteps: the analysis costs the square of the step count, so a workflow
// past playbook.MaxSteps is refused before it runs, naming the limit; one at
// the limit parses, and its Weight counts the n²/8 bytes of sets it keeps.
func TestMaxSteps(t *testing.T) {
	n := playbook.MaxSteps
	pb := parse(t, chain(n))
	if w := pb.Weight(); w < n*n/8 {
		t.Fatalf("%d steps weigh %d bytes; their graph alone keeps %d", n, w, n*n/8)
	}
	_, ds := parser.Parse([]byte("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: t, path: tests/t}\n" + chain(n+1)))
	errs := ds.Errors()
	want := fmt.Sprintf("workflow has %d steps, more than %d (limit playbook.MaxSteps)", n+1, n)
	if len(errs) != 1 || errs[0].Path != "workflow" || !strings.Contains(errs[0].Message, want) || !strings.Contains(errs[0].Message, "split the workflow") {
		t.Fatalf("errors %v", errs)
	}
}
