// Package schedule is the pure part of schedules: when a schedule is due
// (a cron expression in an IANA time zone, or an interval), and what one
// firing does with the due times it finds (run, skip, buffer) under the
// schedule's catch-up window and overlap policy. It does no I/O and reads no
// clock: every function takes `now` or the instant to start from, so tests
// drive time, daylight-saving changes included. The control plane's
// schedule lifecycle (shared/controlplane/schedule.go) persists what it
// decides.
package schedule

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// MaxIntervalSeconds bounds interval_seconds: a year.
const MaxIntervalSeconds = 366 * 24 * 3600

// Spec says when a schedule is due: exactly one of a cron expression (5
// fields, or 6 with seconds first) read in a time zone, or an interval.
type Spec struct {
	Cron            string
	IntervalSeconds int64
	// Timezone is an IANA name; "" is UTC. Intervals ignore it.
	Timezone string

	sched cron.Schedule
	loc   *time.Location
}

// FieldError names the request field a spec error is about.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// parser reads 5 fields, or 6 with seconds first, and the @daily family.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse checks a spec and prepares it for Next. Errors are *FieldError.
func Parse(cronExpr string, intervalSeconds int64, timezone string) (*Spec, error) {
	s := &Spec{Cron: strings.TrimSpace(cronExpr), IntervalSeconds: intervalSeconds, Timezone: timezone}
	if s.Timezone == "" {
		s.Timezone = "UTC"
	}
	loc, err := time.LoadLocation(s.Timezone)
	if err != nil || strings.EqualFold(s.Timezone, "local") {
		return nil, fieldErr("timezone", "%q is not an IANA time zone name (such as UTC or Europe/Berlin)", timezone)
	}
	s.loc = loc
	switch {
	case s.Cron != "" && intervalSeconds != 0:
		return nil, fieldErr("cron", "give exactly one of cron and interval_seconds, not both")
	case s.Cron == "" && intervalSeconds == 0:
		return nil, fieldErr("cron", "give exactly one of cron (e.g. \"*/5 * * * *\") and interval_seconds")
	case s.Cron == "":
		if intervalSeconds < 1 || intervalSeconds > MaxIntervalSeconds {
			return nil, fieldErr("interval_seconds", "%d is outside 1..%d", intervalSeconds, MaxIntervalSeconds)
		}
		return s, nil
	}
	if strings.HasPrefix(s.Cron, "TZ=") || strings.HasPrefix(s.Cron, "CRON_TZ=") {
		return nil, fieldErr("cron", "give the time zone in timezone, not as a TZ= prefix of the expression")
	}
	if strings.HasPrefix(s.Cron, "@every") {
		return nil, fieldErr("cron", "@every is an interval: give interval_seconds instead")
	}
	sched, err := parser.Parse(s.Cron)
	if err != nil {
		return nil, fieldErr("cron", "%q: %v (5 fields: minute hour day-of-month month day-of-week, or 6 with seconds first)", s.Cron, err)
	}
	if spec, ok := sched.(*cron.SpecSchedule); ok {
		// Matched on a floating wall clock (see Next): never in a zone.
		spec.Location = time.UTC
	}
	s.sched = sched
	if s.sched.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, fieldErr("cron", "%q never matches a date", s.Cron)
	}
	return s, nil
}

// Next is the first due time strictly after t, in UTC; the zero time when
// there is none within five years (a cron that matches only rare dates past
// that).
//
// A cron expression matches the wall clock of the time zone, and every
// local due time fires once (no double run, no skipped day):
//   - a local time that occurs twice (the hour repeated when clocks go
//     back) is due at its first occurrence only;
//   - a local time that does not occur (the hour skipped when clocks go
//     forward) is due at the first instant after the gap, so a daily 02:30
//     runs at 03:00 on that day; several such times fold into that instant.
func (s *Spec) Next(t time.Time) time.Time {
	if s.sched == nil {
		n := s.IntervalSeconds
		// Due times are multiples of the interval since the Unix epoch, so
		// every instance and every restart agrees on them.
		k := floorDiv(t.Unix(), n) + 1
		return time.Unix(k*n, 0).UTC()
	}
	wall := floating(t.In(s.loc))
	for range maxFoldSteps {
		wall = s.sched.Next(wall)
		if wall.IsZero() {
			return time.Time{}
		}
		at := resolve(wall, s.loc)
		if at.After(t) {
			return at.UTC()
		}
		// The wall time's first occurrence was at or before t: it has run
		// (the hour now repeating), or it folded into a gap's end that has.
	}
	return time.Time{}
}

// maxFoldSteps bounds the wall times Next passes over before finding one
// after t: a repeated hour holds at most 3,600 of a per-second cron.
const maxFoldSteps = 4000

// floating is t's wall clock read as if it were UTC: a clock with no
// daylight saving, on which the cron library matches fields.
func floating(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	return time.Date(y, mo, d, h, mi, sec, 0, time.UTC)
}

// resolve maps a wall time (floating) to the instant it names in loc: the
// earlier instant of a repeated time, the gap's end for a skipped one.
func resolve(wall time.Time, loc *time.Location) time.Time {
	u := wall.Unix()
	var first time.Time
	// The offsets in force a day either side cover any transition near the
	// wall time (real zones change offset at most once in two days).
	for _, probe := range []int64{u - 86400, u + 86400} {
		_, off := time.Unix(probe, 0).In(loc).Zone()
		at := time.Unix(u-int64(off), 0).In(loc)
		if floating(at).Equal(wall) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	if !first.IsZero() {
		return first
	}
	// In a gap (the offset grew): read with the earlier offset, the wall
	// time lands in the zone that begins at the gap's end.
	_, offBefore := time.Unix(u-86400, 0).In(loc).Zone()
	start, _ := time.Unix(u-int64(offBefore), 0).In(loc).ZoneBounds()
	return start
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
