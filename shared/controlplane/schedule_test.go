package controlplane_test

import (
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/schedule"
	"github.com/noetl-go/noetl/shared/store"
)

// clock is a time source tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }
func ptr[T any](v T) *T          { return &v }
func wall(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse("2006-01-02 15:04 -0700", s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

const schedPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: tick, path: tests/tick}
workflow:
  - step: start
    tool: {kind: noop}
`

// TestScheduleDSTFiresOncePerLocalDueTime drives the firing with a clock
// through both daylight-saving changes of America/New_York: a half-hourly
// cron through the repeated hour runs each local time once (no double run),
// a daily 02:30 runs on the day without a 02:30, at the gap's end (no
// skipped day). Each run is an execution carrying its schedule and due time.
func TestScheduleDSTFiresOncePerLocalDueTime(t *testing.T) {
	clk := &clock{}
	s := newStack(t, func(c *controlplane.Config) { c.Clock = clk.now })
	s.register(t, schedPlaybook)
	cases := []struct {
		name, cron string
		from, to   string
		step       time.Duration
		want       []string
	}{
		{"fall back", "*/30 0-3 * * *", "2024-11-03 00:10 -0400", "2024-11-03 03:50 -0500", 10 * time.Minute,
			[]string{"2024-11-03 00:30 -0400", "2024-11-03 01:00 -0400", "2024-11-03 01:30 -0400",
				"2024-11-03 02:00 -0500", "2024-11-03 02:30 -0500", "2024-11-03 03:00 -0500", "2024-11-03 03:30 -0500"}},
		{"spring forward", "30 2 * * *", "2024-03-09 00:00 -0500", "2024-03-11 12:00 -0400", time.Hour,
			[]string{"2024-03-09 02:30 -0500", "2024-03-10 03:00 -0400", "2024-03-11 02:30 -0400"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk.set(wall(t, c.from))
			sc, err := s.svc.CreateSchedule(s.ctx, controlplane.SchedulePatch{PlaybookPath: ptr("tests/tick"), Cron: ptr(c.cron),
				Timezone: ptr("America/New_York"), Overlap: ptr(schedule.OverlapAllow), CatchupSeconds: ptr(int64(7200))})
			if err != nil {
				t.Fatal(err)
			}
			defer s.svc.DeleteSchedule(s.ctx, sc.ScheduleID)
			for at := wall(t, c.from); !at.After(wall(t, c.to)); at = at.Add(c.step) {
				clk.set(at)
				if _, err := s.svc.FireSchedules(s.ctx); err != nil {
					t.Fatal(err)
				}
			}
			runs, err := s.svc.ScheduleRuns(s.ctx, sc.ScheduleID, time.Time{}, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != len(c.want) {
				t.Fatalf("%d runs, want %d: %+v", len(runs), len(c.want), runs)
			}
			for i, w := range c.want {
				r := runs[len(runs)-1-i] // newest first
				if !r.ScheduledAt.Equal(wall(t, w)) || r.Outcome != store.RunStarted {
					t.Errorf("run %d: %s %s, want started for %s", i, r.Outcome, r.ScheduledAt, w)
				}
				sh, _ := s.st.ShardFor(r.ExecutionID)
				e, err := store.GetExecution(s.ctx, sh.Pool(), r.ExecutionID)
				if err != nil {
					t.Fatal(err)
				}
				if e.ScheduleID != sc.ScheduleID || !e.ScheduledAt.Equal(r.ScheduledAt) || e.IdempotencyKey != controlplane.ScheduleKey(sc.ScheduleID, r.ScheduledAt) {
					t.Errorf("execution %d: schedule %d at %s key %q", e.ExecutionID, e.ScheduleID, e.ScheduledAt, e.IdempotencyKey)
				}
			}
		})
	}
}
