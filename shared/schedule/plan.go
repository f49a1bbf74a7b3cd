package schedule

import (
	"hash/fnv"
	"strconv"
	"time"
)

// Overlap policies: what a due time does while a run the schedule started
// is still going.
const (
	// OverlapSkip skips the due time (recorded as skipped): never two runs
	// at once. The default.
	OverlapSkip = "skip"
	// OverlapBufferOne keeps one due time waiting and starts it when the
	// running one ends; further due times meanwhile are skipped.
	OverlapBufferOne = "buffer_one"
	// OverlapAllow starts every due time, whatever is running.
	OverlapAllow = "allow"
)

// Overlaps lists the policies.
func Overlaps() []string { return []string{OverlapSkip, OverlapBufferOne, OverlapAllow} }

// Origins of a run: what made it due.
const (
	OriginSchedule = "schedule" // a due time of the spec
	OriginBuffered = "buffered" // a due time that waited for the previous run (buffer_one)
	OriginBackfill = "backfill" // a due time of a backfill range
	OriginTrigger  = "trigger"  // run now, asked by a user
)

// Reasons a due time is skipped.
const (
	ReasonCatchup = "missed: older than the catch-up window (catchup_seconds) when the schedule could fire"
	ReasonOverlap = "overlap: the previous run was still going (overlap skip)"
	ReasonBuffer  = "overlap: one run was already waiting for the previous one (overlap buffer_one)"
)

// MaxDuePerFiring bounds the due times one Fire call walks (and so its
// time and the actions it returns); a caller loops while Plan.More.
const MaxDuePerFiring = 1000

// State is what a firing knows of a schedule.
type State struct {
	ID      int64
	Spec    *Spec
	Enabled bool
	// NextRunAt is the first due time not handled yet.
	NextRunAt time.Time
	Overlap   string
	Catchup   time.Duration
	Jitter    time.Duration
	// Running: a run the schedule started is still going (only read by
	// skip and buffer_one).
	Running bool
	// Buffered is the due time waiting for the running one (buffer_one);
	// zero: none.
	Buffered time.Time
	// BackfillNext..BackfillTo is what is left of a backfill; zero: none.
	BackfillNext, BackfillTo time.Time
}

// Action is one thing a firing does.
type Action struct {
	// Run: start a run for At. Otherwise the due times At..Through (Count
	// of them) are skipped for Reason.
	Run    bool
	Origin string
	At     time.Time
	// Through and Count describe a skipped range (one due time: Through ==
	// At, Count 1); consecutive skips for the same reason fold into one.
	Through time.Time
	Count   int
	Reason  string
}

// Plan is what Fire decided, and the state to store.
type Plan struct {
	Actions      []Action
	NextRunAt    time.Time
	Buffered     time.Time
	BackfillNext time.Time
	// More: due times are left past MaxDuePerFiring; fire again.
	More bool
}

// FireAt is when a due time fires: the due time plus the schedule's jitter,
// a delay in [0, jitter) that is the same on every instance (a hash of the
// schedule and the due time), so two instances agree and runs of many
// schedules due at one instant spread out.
func FireAt(id int64, due time.Time, jitter time.Duration) time.Time {
	if jitter <= 0 {
		return due
	}
	h := fnv.New64a()
	_, _ = h.Write(strconv.AppendInt(nil, id, 10))
	_, _ = h.Write(strconv.AppendInt([]byte{'@'}, due.UnixMilli(), 10))
	return due.Add(time.Duration(h.Sum64()%uint64(jitter.Milliseconds()+1)) * time.Millisecond)
}

// Fire decides what is due at now: a buffered run whose predecessor ended,
// then every due time up to now (older than the catch-up window: skipped;
// otherwise under the overlap policy), then the next due times of a
// backfill (all of them under allow; one at a time otherwise, each after the
// previous run ended, so a backfill never skips).
func Fire(st State, now time.Time) Plan {
	p := Plan{NextRunAt: st.NextRunAt, Buffered: st.Buffered, BackfillNext: st.BackfillNext}
	running := st.Running && st.Overlap != OverlapAllow
	run := func(at time.Time, origin string) {
		p.Actions = append(p.Actions, Action{Run: true, Origin: origin, At: at})
		running = running || st.Overlap != OverlapAllow
	}
	if !p.Buffered.IsZero() && !running {
		run(p.Buffered, OriginBuffered)
		p.Buffered = time.Time{}
	}
	walked := 0
	if st.Enabled {
		d := p.NextRunAt
		for !d.IsZero() && !FireAt(st.ID, d, st.Jitter).After(now) {
			if walked == MaxDuePerFiring {
				p.More = true
				break
			}
			walked++
			switch {
			case now.Sub(FireAt(st.ID, d, st.Jitter)) > st.Catchup:
				if st.Spec.IntervalSeconds > 0 {
					// Intervals jump to the first due time inside the
					// window: an outage of a year is one step.
					last := st.Spec.lastBefore(now.Add(-st.Catchup - st.Jitter - time.Millisecond))
					if last.After(d) {
						p.skip(d, last, int((last.Unix()-d.Unix())/st.Spec.IntervalSeconds)+1, ReasonCatchup)
						d = st.Spec.Next(last)
						continue
					}
				}
				p.skip(d, d, 1, ReasonCatchup)
			case !running:
				run(d, OriginSchedule)
			case st.Overlap == OverlapBufferOne && p.Buffered.IsZero():
				p.Buffered = d
			case st.Overlap == OverlapBufferOne:
				p.skip(d, d, 1, ReasonBuffer)
			default:
				p.skip(d, d, 1, ReasonOverlap)
			}
			d = st.Spec.Next(d)
		}
		p.NextRunAt = d
	}
	for b := p.BackfillNext; !b.IsZero(); b = p.BackfillNext {
		if b.After(st.BackfillTo) {
			p.BackfillNext = time.Time{}
			break
		}
		if running || walked == MaxDuePerFiring {
			p.More = p.More || !running
			break
		}
		walked++
		run(b, OriginBackfill)
		p.BackfillNext = st.Spec.Next(b)
	}
	return p
}

// skip records skipped due times, folded into the previous action when it
// skipped the due times just before for the same reason.
func (p *Plan) skip(from, through time.Time, n int, reason string) {
	if k := len(p.Actions) - 1; k >= 0 && !p.Actions[k].Run && p.Actions[k].Reason == reason {
		p.Actions[k].Through = through
		p.Actions[k].Count += n
		return
	}
	p.Actions = append(p.Actions, Action{Origin: OriginSchedule, At: from, Through: through, Count: n, Reason: reason})
}

// lastBefore is an interval's last due time at or before t.
func (s *Spec) lastBefore(t time.Time) time.Time {
	n := s.IntervalSeconds
	return time.Unix(floorDiv(t.Unix(), n)*n, 0).UTC()
}

// Trigger decides a run asked for now (POST …/trigger) under the overlap
// policy: it starts, waits as the buffered run, or is skipped.
func Trigger(st State, now time.Time) Plan {
	p := Plan{NextRunAt: st.NextRunAt, Buffered: st.Buffered, BackfillNext: st.BackfillNext}
	at := now.Truncate(time.Millisecond).UTC()
	switch {
	case !st.Running || st.Overlap == OverlapAllow:
		p.Actions = append(p.Actions, Action{Run: true, Origin: OriginTrigger, At: at})
	case st.Overlap == OverlapBufferOne && p.Buffered.IsZero():
		p.Buffered = at
	case st.Overlap == OverlapBufferOne:
		p.Actions = append(p.Actions, Action{Origin: OriginTrigger, At: at, Through: at, Count: 1, Reason: ReasonBuffer})
	default:
		p.Actions = append(p.Actions, Action{Origin: OriginTrigger, At: at, Through: at, Count: 1, Reason: ReasonOverlap})
	}
	return p
}

// DueTimes lists the due times in [from, to], at most limit of them; more
// reports that the range holds more.
func (s *Spec) DueTimes(from, to time.Time, limit int) (out []time.Time, more bool) {
	for d := s.Next(from.Add(-time.Second)); !d.IsZero() && !d.After(to); d = s.Next(d) {
		if d.Before(from) {
			continue
		}
		if len(out) == limit {
			return out, true
		}
		out = append(out, d)
	}
	return out, false
}
