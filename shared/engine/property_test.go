package engine_test

import (
	"math/rand/v2"
	"testing"

	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

// scheduleBodies are playbooks whose outcome must not depend on which worker
// finishes first: joins, parallel loops, cycles, skips and retries together.
var scheduleBodies = map[string]string{
	"fanout join": `
workflow:
  - step: start
    tool: {kind: noop}
    next: {spec: {mode: inclusive}, arcs: [{step: a}, {step: b}, {step: c, when: "{{ false }}"}]}
  - step: a
    retry: {max_attempts: 3, delay: 1}
    loop: {in: "{{ 6 }}", iterator: i, spec: {mode: parallel, max_in_flight: 2}}
    tool: {kind: noop, input: {i: "{{ i }}"}}
    next: j
  - step: b
    tool: {kind: noop}
    next: b2
  - step: b2
    tool: {kind: noop}
    next: j
  - step: c
    tool: {kind: noop}
    next: j
  - step: j
    tool: {kind: noop}
`,
	"cycle with side branch": `
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.n: 0}
    next: {spec: {mode: inclusive}, arcs: [{step: body}, {step: side}]}
  - step: side
    retry: {max_attempts: 2, delay: 0}
    tool: {kind: noop}
    next: done
  - step: body
    retry: {max_attempts: 3, delay: 0}
    tool: {kind: noop}
    set: {ctx.n: "{{ ctx.n + 1 }}"}
    next: [{step: body, when: "{{ ctx.n < 5 }}"}, {step: done, when: "{{ ctx.n >= 5 }}"}]
  - step: done
    tool: {kind: noop}
`,
}

// TestRandomSchedules drives each playbook with random interleavings, random
// transient failures and lease expiries. Every run must end, keep seqs contiguous,
// keep the live snapshot equal to the fold of its log, enter joins exactly once,
// and reach the same final context. The seed is logged so a failure replays.
func TestRandomSchedules(t *testing.T) {
	seeds := 200
	if testing.Short() {
		seeds = 30
	}
	for name, body := range scheduleBodies {
		t.Run(name, func(t *testing.T) {
			pb := parse(t, body)
			var wantCtx string
			for seed := range seeds {
				rng := rand.New(rand.NewPCG(uint64(seed), 7))
				s := enginetest.New(pb, 100+int64(seed))
				s.Rand = rng
				s.Default = enginetest.RandomFaults(rng, pb, 6)
				if err := s.Start(nil); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if err := s.RunToEnd(10000); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if err := s.Seqs(); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if err := enginetest.SameState(s.Snapshot(), s.Replay()); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if s.Status() != lifecycle.ExecutionCompleted {
					t.Fatalf("seed %d: status %s error %q", seed, s.Status(), s.Snapshot().Error)
				}
				for _, join := range []string{"j", "done"} {
					if pb.Step(join) != nil && s.Count("step.enter", join) != 1 {
						t.Fatalf("seed %d: %s entered %d times", seed, join, s.Count("step.enter", join))
					}
				}
				ctx := fmtValue(s.Snapshot().Ctx)
				if seed == 0 {
					wantCtx = ctx
				} else if ctx != wantCtx {
					t.Fatalf("seed %d: final ctx %s differs from %s", seed, ctx, wantCtx)
				}
			}
		})
	}
}

func fmtValue(v any) string {
	b, _ := jsonx.Marshal(v)
	return string(b)
}
