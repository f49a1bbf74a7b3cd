package engine_test

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
)

// fanOutReading is start with n inclusive arcs to n noop steps; even i
// reaches s<i>, odd i does not, by a test of `steps` in the arc's when, or
// (enter) in the when of s<i>. With ctx, start's set puts n keys in ctx, a
// transient arc set enters hub, and hub's n arcs read ctx instead: ctx is
// then the context merged with that arc set. With ctx enter, hub's arcs
// each bind an arc set of their own, read by the when of s<i>.
func fanOutReading(n int, reads string) string {
	var b strings.Builder
	b.WriteString("workflow:\n  - step: start\n    tool: {kind: noop}\n")
	if reads == "ctx" || reads == "ctx enter" {
		b.WriteString("    set: {")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "ctx.k%d: %d", i, i%2)
		}
		b.WriteString("}\n")
	}
	switch reads {
	case "ctx":
		b.WriteString("    next: [{step: hub, set: {via: start}}]\n  - step: hub\n    tool: {kind: noop}\n")
	case "ctx enter":
		b.WriteString("    next: hub\n  - step: hub\n    tool: {kind: noop}\n")
	}
	b.WriteString("    next:\n      spec: {mode: inclusive}\n      arcs:\n")
	status := func(i int) string { return map[bool]string{true: "pending", false: "x"}[i%2 == 0] }
	for i := range n {
		switch reads {
		case "steps":
			fmt.Fprintf(&b, "        - {step: s%d, when: \"{{ steps.s%d.status == '%s' }}\"}\n", i, i, status(i))
		case "ctx":
			fmt.Fprintf(&b, "        - {step: s%d, when: \"{{ ctx.k%d == 0 and via == 'start' }}\"}\n", i, i)
		case "ctx enter":
			fmt.Fprintf(&b, "        - {step: s%d, set: {via: s%d}}\n", i, i)
		default:
			fmt.Fprintf(&b, "        - {step: s%d}\n", i)
		}
	}
	for i := range n {
		fmt.Fprintf(&b, "  - step: s%d\n    tool: {kind: noop}\n", i)
		switch reads {
		case "enter":
			fmt.Fprintf(&b, "    when: \"{{ steps.s%d.status == '%s' }}\"\n", i, status(i))
		case "ctx enter":
			fmt.Fprintf(&b, "    when: \"{{ ctx.k%d == 0 and ctx.via == 's%d' }}\"\n", i, i)
		}
	}
	return b.String()
}

// fanOutDecision runs the playbook up to the completion of its fan-out step
// (start, or hub) and returns that decision's outcome and the bytes it
// allocated.
func fanOutDecision(t *testing.T, n int, reads string) (*engine.Outcome, uint64) {
	t.Helper()
	s := enginetest.New(parse(t, fanOutReading(n, reads)), 77)
	must(t, s.Start(nil))
	if strings.HasPrefix(reads, "ctx") {
		c := s.Pending()[0]
		must(t, s.Claim(c, "w"))
		must(t, s.Finish(c, s.Default(c)))
	}
	c := s.Pending()[0]
	must(t, s.Claim(c, "w"))
	p := newProbe(t, s, c)
	snap, err := engine.UnmarshalSnapshot(p.s.Stored)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out, err := p.s.Engine.Handle(p.s.PB, p.s.Run, snap, p.trigger, p.in)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	return out, after.TotalAlloc - before.TotalAlloc
}

// TestViewsBuiltOncePerDecision: n templates reading `steps` (or `ctx`
// while a transient arc set is bound) in one decision do not each build it:
// what the decision allocates grows in proportion to n, not n² (a playbook
// of a few thousand arcs held the execution's row lock for seconds and
// gigabytes). Arcs reading it see one state; steps entered one after another
// see each other's entries change. Every template still sees the same
// values: the even steps are issued, the odd ones not.
func TestViewsBuiltOncePerDecision(t *testing.T) {
	for _, reads := range []string{"steps", "ctx", "enter", "ctx enter"} {
		t.Run(reads, func(t *testing.T) {
			engine.CheckViews(false)
			defer engine.CheckViews(true)
			const n = 300
			small, smallBytes := fanOutDecision(t, n, reads)
			_, bigBytes := fanOutDecision(t, 4*n, reads)
			var fired []string
			for _, cmd := range small.Commands {
				fired = append(fired, cmd.Step)
			}
			slices.Sort(fired)
			var want []string
			for i := 0; i < n; i += 2 {
				want = append(want, fmt.Sprintf("s%d", i))
			}
			slices.Sort(want)
			if !slices.Equal(fired, want) {
				t.Fatalf("fired %v, want the even arcs %v", fired, want)
			}
			ratio := float64(bigBytes) / float64(smallBytes)
			t.Logf("n=%d: %d bytes; n=%d: %d bytes; ratio %.1f (linear 4, quadratic 16)", n, smallBytes, 4*n, bigBytes, ratio)
			if ratio > 8 {
				t.Errorf("a decision over %d arcs allocated %.1f times what %d arcs did: a view is rebuilt per template", 4*n, ratio, n)
			}
		})
	}
}

// TestViewsFollowTheState: a view read again after the state it shows
// changed within the decision shows the change, and a view a command's
// payload kept shows the state it was rendered at. a is entered after
// reading `steps` in its when and its input, so b's when sees a running,
// and c's sees b running while a's input still shows b pending; d and e are
// entered with arc sets of their own, so d's input shows its own in ctx and
// e's when its own; hub's set changes ctx, so its arcs, reading ctx under
// the same arc set, see the new value.
func TestViewsFollowTheState(t *testing.T) {
	s := enginetest.New(parse(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next:
      spec: {mode: inclusive}
      arcs: [{step: a}, {step: b}, {step: c}]
  - step: a
    when: "{{ steps.b.status == 'pending' }}"
    tool: {kind: noop, input: {snap: "{{ steps }}"}}
  - step: b
    when: "{{ steps.a.status == 'running' }}"
    tool: {kind: noop}
    next: [{step: hub, set: {via: b}}]
  - step: c
    when: "{{ steps.b.status == 'running' }}"
    tool: {kind: noop}
    next:
      spec: {mode: inclusive}
      arcs: [{step: d, set: {via: d}}, {step: e, set: {via: e}}]
  - step: d
    tool: {kind: noop, input: {ctx: "{{ ctx }}"}}
  - step: e
    when: "{{ ctx.via == 'e' }}"
    tool: {kind: noop}
  - step: hub
    tool: {kind: noop}
    set: {ctx.k: 5, ctx.from: "{{ ctx.via }}"}
    next:
      spec: {mode: inclusive}
      arcs:
        - {step: seen, when: "{{ ctx.k == 5 and ctx.via == 'b' and ctx.from == 'b' }}"}
        - {step: stale, when: "{{ ctx.k is not defined }}"}
  - step: seen
    tool: {kind: noop}
  - step: stale
    tool: {kind: noop}
`), 77)
	must(t, s.Start(nil))
	must(t, s.RunToEnd(100))
	for step, want := range map[string]int{"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "hub": 1, "seen": 1, "stale": 0} {
		if got := s.Count("command.issued", step); got != want {
			t.Errorf("%s: %d commands issued, want %d", step, got, want)
		}
	}
	input := func(step, name string) map[string]any {
		for _, ev := range s.Log {
			if ev.Type == "command.issued" && ev.Step == step {
				args, _ := ev.Context["args"].(map[string]any)
				m, _ := args[name].(map[string]any)
				return m
			}
		}
		t.Fatalf("no command for %s", step)
		return nil
	}
	if b, _ := input("a", "snap")["b"].(map[string]any); b["status"] != "pending" {
		t.Errorf("a's input shows b as %v, want pending (as when a was issued)", b["status"])
	}
	if via := input("d", "ctx")["via"]; via != "d" {
		t.Errorf("d's input shows ctx.via %v, want d (its arc set's)", via)
	}
}
