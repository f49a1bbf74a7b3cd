package controlplane_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

// longCycle revisits one step until ctx.i reaches the limit; about 8 events per
// visit.
const longCycle = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: cycle, path: tests/cycle}
workflow:
  - step: start
    tool: {kind: noop}
    set: {ctx.i: 0}
    next: tick
  - step: tick
    spec: {max_visits: 100000}
    tool: {kind: noop, input: {i: "{{ ctx.i }}"}}
    set: {ctx.i: "{{ ctx.i + 1 }}"}
    next: [{step: tick, when: "{{ ctx.i < 100000 }}"}]
`

// cycleRun is an execution (of longCycle, most often) driven through the
// service.
type cycleRun struct {
	s  *stack
	id int64
	sh *store.Shard
}

func startCycle(t testing.TB, s *stack) *cycleRun { return startRun(t, s, longCycle) }

// startRun registers playbook and starts an execution of it.
func startRun(t testing.TB, s *stack, playbook string) *cycleRun {
	r, err := s.svc.Register(s.ctx, playbook)
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{CatalogID: r.Entry.CatalogID})
	if err != nil {
		t.Fatal(err)
	}
	sh, _ := s.st.ShardFor(st.ExecutionID)
	return &cycleRun{s: s, id: st.ExecutionID, sh: sh}
}

// lastSeq is the execution's event count.
func (c *cycleRun) lastSeq(t testing.TB) int64 {
	row, err := store.GetExecution(c.s.ctx, c.sh.Pool(), c.id)
	if err != nil {
		t.Fatal(err)
	}
	return row.LastSeq
}

// visit runs one command to its completion and returns the completion's ingest
// time (the orchestrating event).
func (c *cycleRun) visit(t testing.TB) time.Duration {
	cmds, err := storetest.ActiveCommands(c.s.ctx, c.sh.Pool(), c.id)
	if err != nil || len(cmds) != 1 {
		t.Fatalf("active commands %v %v", cmds, err)
	}
	body, err := c.s.svc.Claim(c.s.ctx, cmds[0].IssuedEventID, "w", false)
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]any{"command_id": body.CommandID, "attempt": int64(body.Attempt)}
	var took time.Duration
	for _, ev := range []controlplane.EventInput{
		{Type: "command.started"},
		{Type: "call.done", Payload: map[string]any{"result": map[string]any{"status": "success", "data": map[string]any{"ok": true}}}},
		{Type: "command.completed", Status: "success"},
	} {
		ev.ExecutionID, ev.Step, ev.WorkerID, ev.Meta = c.id, body.Step, "w", meta
		t0 := time.Now()
		if _, err := c.s.svc.Ingest(c.s.ctx, ev); err != nil {
			t.Fatal(err)
		}
		took = time.Since(t0)
	}
	return took
}

// advanceTo drives the cycle until it has at least n events.
func (c *cycleRun) advanceTo(t testing.TB, n int64) {
	for c.lastSeq(t) < n {
		c.visit(t)
	}
}

// bytesPerEvent measures what one visit writes, per event: the new event rows and
// the execution row (its snapshot) as Postgres stores them.
func (c *cycleRun) bytesPerEvent(t testing.TB) float64 {
	before := c.lastSeq(t)
	c.visit(t)
	after := c.lastSeq(t)
	var eventBytes, rowBytes int64
	err := c.sh.Pool().QueryRow(c.s.ctx, `
		SELECT (SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM event e WHERE execution_id = $1 AND seq > $2 AND seq <= $3),
		       (SELECT pg_column_size(x.*) FROM execution x WHERE execution_id = $1)`, c.id, before, after).Scan(&eventBytes, &rowBytes)
	if err != nil {
		t.Fatal(err)
	}
	// The execution row is rewritten by every ingest of the visit (4 of them).
	return float64(eventBytes+4*rowBytes) / float64(after-before)
}

// TestIngestBytesPerEventDoNotGrow extends the engine's O(1) proof to storage:
// the bytes an ingest writes per event, event rows plus the execution row with
// its snapshot, are the same at 10 and at 10,000 prior events.
func TestIngestBytesPerEventDoNotGrow(t *testing.T) {
	if testing.Short() {
		t.Skip("drives 10,000 events")
	}
	s := newStack(t, func(c *controlplane.Config) { c.Publisher = nil })
	c := startCycle(t, s)
	c.advanceTo(t, 10)
	small := c.bytesPerEvent(t)
	c.advanceTo(t, 10000)
	large := c.bytesPerEvent(t)
	t.Logf("bytes written per event: %.0f at ~10 prior events, %.0f at ~10,000", small, large)
	// Counters get a few more digits; anything proportional to the log would be
	// orders of magnitude.
	if large > small*1.1+16 {
		t.Fatalf("bytes per event grew from %.0f to %.0f", small, large)
	}
}

// BenchmarkIngest reports ingest-with-orchestration latency (the completion that
// decides the next visit) at 10 and 10,000 prior events, as p50/p99.
func BenchmarkIngest(b *testing.B) {
	for _, prior := range []int64{10, 10000} {
		b.Run(fmt.Sprintf("prior=%d", prior), func(b *testing.B) {
			s := newStack(b, func(c *controlplane.Config) { c.Publisher = nil })
			b.Logf("postgres settings: %v", s.pg.Settings())
			c := startCycle(b, s)
			c.advanceTo(b, prior)
			var lat []time.Duration
			for b.Loop() {
				lat = append(lat, c.visit(b))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// TestStateEncodesOnlyWhatChanged: down a chain, each transaction encodes the
// execution's state against the one the process cached, writing only the
// steps that changed: by the 30th step, at most the two a step changes (the
// step that completed, the one it entered) are written afresh.
func TestStateEncodesOnlyWhatChanged(t *testing.T) {
	s := newStack(t)
	var body strings.Builder
	body.WriteString("apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: chain, path: tests/chain30}\nworkflow:\n")
	for i := range 30 {
		fmt.Fprintf(&body, "  - step: s%02d\n    tool: {kind: noop}\n", i)
		if i < 29 {
			fmt.Fprintf(&body, "    next: s%02d\n", i+1)
		}
	}
	c := startRun(t, s, body.String())
	for range 29 {
		c.visit(t)
	}
	copied, ok := s.svc.StepsCopied(c.id)
	if !ok || copied < 28 {
		t.Fatalf("the 30th step's state copied %d steps (cached %v), want at least 28 of 30", copied, ok)
	}
}
