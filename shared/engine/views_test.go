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

// fanOutReading is start with n inclusive arcs to n noop steps, arc i's when
// reading `steps` (even i: true, odd i: false). With readsCtx, start's set puts
// n keys in ctx, a transient arc set enters hub, and hub's n arcs read ctx
// instead: ctx is then the context merged with that arc set.
func fanOutReading(n int, readsCtx bool) string {
	var b strings.Builder
	b.WriteString("workflow:\n  - step: start\n    tool: {kind: noop}\n")
	if readsCtx {
		b.WriteString("    set: {")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "ctx.k%d: %d", i, i%2)
		}
		b.WriteString("}\n    next: [{step: hub, set: {via: start}}]\n  - step: hub\n    tool: {kind: noop}\n")
	}
	b.WriteString("    next:\n      spec: {mode: inclusive}\n      arcs:\n")
	for i := range n {
		when := fmt.Sprintf("{{ steps.s%d.status == '%s' }}", i, map[bool]string{true: "pending", false: "x"}[i%2 == 0])
		if readsCtx {
			when = fmt.Sprintf("{{ ctx.k%d == 0 and via == 'start' }}", i)
		}
		fmt.Fprintf(&b, "        - {step: s%d, when: \"%s\"}\n", i, when)
	}
	for i := range n {
		fmt.Fprintf(&b, "  - step: s%d\n    tool: {kind: noop}\n", i)
	}
	return b.String()
}

// fanOutDecision runs the playbook up to the completion of its fan-out step
// (start, or hub) and returns that decision's outcome and the bytes it
// allocated.
func fanOutDecision(t *testing.T, n int, readsCtx bool) (*engine.Outcome, uint64) {
	t.Helper()
	s := enginetest.New(parse(t, fanOutReading(n, readsCtx)), 77)
	must(t, s.Start(nil))
	if readsCtx {
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

// TestViewsBuiltOncePerDecision: a step whose n arcs read `steps` (or `ctx`
// while a transient arc set is bound) builds that view once for the
// decision, not once per arc, so what the decision allocates grows in
// proportion to n, not n² (a playbook of a few thousand arcs held the
// execution's row lock for seconds and gigabytes). Every arc still sees the
// same values: the even arcs fire, the odd ones do not.
func TestViewsBuiltOncePerDecision(t *testing.T) {
	for _, c := range []struct {
		name     string
		readsCtx bool
	}{{"steps", false}, {"ctx with an arc set", true}} {
		t.Run(c.name, func(t *testing.T) {
			const n = 300
			small, smallBytes := fanOutDecision(t, n, c.readsCtx)
			_, bigBytes := fanOutDecision(t, 4*n, c.readsCtx)
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
				t.Errorf("a decision over %d arcs allocated %.1f times what %d arcs did: a view is rebuilt per arc", 4*n, ratio, n)
			}
		})
	}
}

// TestViewsFollowTheState: a view is built again once the state it shows
// changed within the decision: a is entered after reading `steps`, so b's
// when sees a running; hub's set changes ctx, so its arcs, reading ctx
// under the same arc set, see the new value.
func TestViewsFollowTheState(t *testing.T) {
	s := enginetest.New(parse(t, `
workflow:
  - step: start
    tool: {kind: noop}
    next:
      spec: {mode: inclusive}
      arcs: [{step: a}, {step: b}]
  - step: a
    when: "{{ steps.b.status == 'pending' }}"
    tool: {kind: noop}
  - step: b
    when: "{{ steps.a.status == 'running' }}"
    tool: {kind: noop}
    next: [{step: hub, set: {via: b}}]
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
	for step, want := range map[string]int{"a": 1, "b": 1, "hub": 1, "seen": 1, "stale": 0} {
		if got := s.Count("command.issued", step); got != want {
			t.Errorf("%s: %d commands issued, want %d", step, got, want)
		}
	}
}
