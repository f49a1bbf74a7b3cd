package schedule

import (
	"testing"
	"time"
)

var t0 = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

func sec(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }

func everySecond(t *testing.T, overlap string) State {
	return State{ID: 7, Spec: mustParse(t, "", 1, ""), Enabled: true, NextRunAt: sec(1), Overlap: overlap, Catchup: 60 * time.Second}
}

func runs(p Plan) []time.Time {
	var out []time.Time
	for _, a := range p.Actions {
		if a.Run {
			out = append(out, a.At)
		}
	}
	return out
}

func TestFireRunsEachDueTimeOnce(t *testing.T) {
	st := everySecond(t, OverlapAllow)
	p := Fire(st, sec(3))
	if got := runs(p); len(got) != 3 || !got[0].Equal(sec(1)) || !got[2].Equal(sec(3)) {
		t.Fatalf("runs = %v, want 1..3 s", got)
	}
	if !p.NextRunAt.Equal(sec(4)) {
		t.Fatalf("next = %s, want %s", p.NextRunAt, sec(4))
	}
	st.NextRunAt = p.NextRunAt
	if again := Fire(st, sec(3)); len(again.Actions) != 0 {
		t.Fatalf("a second firing at the same instant did %v", again.Actions)
	}
}

func TestFireSkipsOutsideTheCatchupWindow(t *testing.T) {
	st := everySecond(t, OverlapAllow)
	st.Catchup = 3 * time.Second
	p := Fire(st, sec(11)) // stopped from 1 s to 11 s
	if len(p.Actions) == 0 || p.Actions[0].Run {
		t.Fatalf("actions = %+v, want a skipped range first", p.Actions)
	}
	skip := p.Actions[0]
	if !skip.At.Equal(sec(1)) || !skip.Through.Equal(sec(7)) || skip.Count != 7 || skip.Reason != ReasonCatchup {
		t.Fatalf("skipped %+v, want 1..7 s (7 due times) for the catch-up window", skip)
	}
	if got := runs(p); len(got) != 4 || !got[0].Equal(sec(8)) || !got[3].Equal(sec(11)) {
		t.Fatalf("runs = %v, want 8..11 s", got)
	}
}

func TestFireCatchupOfAYearIsOneStep(t *testing.T) {
	st := everySecond(t, OverlapSkip)
	now := sec(365 * 24 * 3600)
	p := Fire(st, now)
	// 61 due times are inside the 60 s window: the first runs, the rest overlap it.
	if p.More || len(p.Actions) != 3 || p.Actions[0].Count != 365*24*3600-61 || !runs(p)[0].Equal(now.Add(-60*time.Second)) {
		t.Fatalf("plan = %+v", p)
	}
}

func TestFireOverlapPolicies(t *testing.T) {
	for _, c := range []struct {
		overlap  string
		runs     int
		buffered bool
		skipped  int
	}{
		{OverlapSkip, 0, false, 3},
		{OverlapBufferOne, 0, true, 2},
		{OverlapAllow, 3, false, 0},
	} {
		st := everySecond(t, c.overlap)
		st.Running = true
		p := Fire(st, sec(3))
		skipped := 0
		for _, a := range p.Actions {
			if !a.Run {
				skipped += a.Count
			}
		}
		if len(runs(p)) != c.runs || p.Buffered.IsZero() == c.buffered || skipped != c.skipped {
			t.Errorf("%s: runs %d buffered %s skipped %d; want %d %v %d", c.overlap, len(runs(p)), p.Buffered, skipped, c.runs, c.buffered, c.skipped)
		}
	}
	// Not running: skip starts the first due time and skips the others.
	p := Fire(everySecond(t, OverlapSkip), sec(3))
	if got := runs(p); len(got) != 1 || !got[0].Equal(sec(1)) || p.Actions[1].Count != 2 || p.Actions[1].Reason != ReasonOverlap {
		t.Fatalf("skip: %+v", p.Actions)
	}
}

func TestFireStartsTheBufferedRunWhenThePreviousEnded(t *testing.T) {
	st := everySecond(t, OverlapBufferOne)
	st.Buffered, st.NextRunAt = sec(2), sec(5)
	p := Fire(st, sec(4))
	if got := runs(p); len(got) != 1 || !got[0].Equal(sec(2)) || p.Actions[0].Origin != OriginBuffered || !p.Buffered.IsZero() {
		t.Fatalf("plan = %+v", p)
	}
}

func TestFirePausedRunsNoDueTime(t *testing.T) {
	st := everySecond(t, OverlapAllow)
	st.Enabled = false
	if p := Fire(st, sec(10)); len(p.Actions) != 0 || !p.NextRunAt.Equal(sec(1)) {
		t.Fatalf("paused plan = %+v", p)
	}
}

func TestBackfillRunsInOrderOneAtATime(t *testing.T) {
	st := everySecond(t, OverlapSkip)
	st.Enabled = false
	st.BackfillNext, st.BackfillTo = sec(-10), sec(-8)
	var got []time.Time
	for range 10 {
		p := Fire(st, sec(0))
		got = append(got, runs(p)...)
		if len(runs(p)) > 1 {
			t.Fatalf("skip policy started %d backfill runs at once", len(runs(p)))
		}
		st.BackfillNext = p.BackfillNext
		st.Running = false // the run ended
		if st.BackfillNext.IsZero() {
			break
		}
	}
	if len(got) != 3 || !got[0].Equal(sec(-10)) || !got[2].Equal(sec(-8)) {
		t.Fatalf("backfill ran %v, want -10, -9, -8 s in order", got)
	}
	// While a run is going, the backfill waits (and says nothing is lost).
	st.BackfillNext, st.Running = sec(-10), true
	if p := Fire(st, sec(0)); len(p.Actions) != 0 || !p.BackfillNext.Equal(sec(-10)) {
		t.Fatalf("waiting backfill = %+v", p)
	}
	// allow: all at once, in order.
	st = everySecond(t, OverlapAllow)
	st.Enabled, st.BackfillNext, st.BackfillTo = false, sec(-10), sec(-8)
	if p := Fire(st, sec(0)); len(runs(p)) != 3 || !p.BackfillNext.IsZero() {
		t.Fatalf("allow backfill = %+v", p)
	}
}

func TestJitterIsDeterministicAndBounded(t *testing.T) {
	seen := map[time.Duration]bool{}
	for i := range 50 {
		due := sec(i * 60)
		a, b := FireAt(3, due, 10*time.Second), FireAt(3, due, 10*time.Second)
		if !a.Equal(b) || a.Before(due) || a.Sub(due) > 10*time.Second {
			t.Fatalf("FireAt(%s) = %s, %s", due, a, b)
		}
		seen[a.Sub(due)] = true
	}
	if len(seen) < 10 {
		t.Fatalf("jitter took only %d values over 50 due times", len(seen))
	}
	if !FireAt(3, sec(0), 0).Equal(sec(0)) {
		t.Fatal("no jitter must fire at the due time")
	}
}

func TestTriggerFollowsTheOverlapPolicy(t *testing.T) {
	st := everySecond(t, OverlapSkip)
	if p := Trigger(st, sec(0)); len(runs(p)) != 1 || p.Actions[0].Origin != OriginTrigger {
		t.Fatalf("idle trigger = %+v", p)
	}
	st.Running = true
	if p := Trigger(st, sec(0)); len(runs(p)) != 0 || p.Actions[0].Reason != ReasonOverlap {
		t.Fatalf("skip trigger while running = %+v", p)
	}
	st.Overlap = OverlapBufferOne
	if p := Trigger(st, sec(0)); !p.Buffered.Equal(sec(0)) {
		t.Fatalf("buffer_one trigger while running = %+v", p)
	}
}
