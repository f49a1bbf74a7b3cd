package schedule

import (
	"strings"
	"testing"
	"time"
)

func mustParse(t *testing.T, cron string, interval int64, tz string) *Spec {
	t.Helper()
	s, err := Parse(cron, interval, tz)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// walk lists the due times after from, n of them.
func walk(s *Spec, from time.Time, n int) []time.Time {
	var out []time.Time
	for d := s.Next(from); len(out) < n && !d.IsZero(); d = s.Next(d) {
		out = append(out, d)
	}
	return out
}

func local(t *testing.T, tz, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(tz)
	if err != nil {
		t.Fatal(err)
	}
	// s carries its offset, so a repeated wall time is unambiguous.
	at, err := time.Parse("2006-01-02 15:04 -0700", s)
	if err != nil {
		t.Fatal(err)
	}
	return at.In(loc)
}

// TestNextAcrossDST pins the daylight-saving rule: every local due time
// fires once: a repeated local time at its first occurrence only (no double
// run), a skipped one at the end of the gap (no skipped day).
func TestNextAcrossDST(t *testing.T) {
	const ny = "America/New_York"
	cases := []struct {
		name, cron, tz, from string
		want                 []string
	}{
		{"daily in the repeated hour (fall back) runs once", "30 1 * * *", ny, "2024-11-02 00:00 -0400",
			[]string{"2024-11-02 01:30 -0400", "2024-11-03 01:30 -0400", "2024-11-04 01:30 -0500"}},
		{"daily in the skipped hour (spring forward) runs at the gap's end", "30 2 * * *", ny, "2024-03-09 00:00 -0500",
			[]string{"2024-03-09 02:30 -0500", "2024-03-10 03:00 -0400", "2024-03-11 02:30 -0400"}},
		{"half-hourly through the repeated hour", "*/30 * * * *", ny, "2024-11-03 00:00 -0400",
			[]string{"2024-11-03 00:30 -0400", "2024-11-03 01:00 -0400", "2024-11-03 01:30 -0400", "2024-11-03 02:00 -0500", "2024-11-03 02:30 -0500"}},
		{"half-hourly through the skipped hour", "*/30 * * * *", ny, "2024-03-10 00:45 -0500",
			[]string{"2024-03-10 01:00 -0500", "2024-03-10 01:30 -0500", "2024-03-10 03:00 -0400", "2024-03-10 03:30 -0400"}},
		{"Berlin, seconds field, fall back", "0 15 2 * * *", "Europe/Berlin", "2024-10-26 12:00 +0200",
			[]string{"2024-10-27 02:15 +0200", "2024-10-28 02:15 +0100"}},
		{"UTC has no transitions", "0 0 * * *", "UTC", "2024-03-09 12:00 +0000",
			[]string{"2024-03-10 00:00 +0000", "2024-03-11 00:00 +0000"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustParse(t, c.cron, 0, c.tz)
			got := walk(s, local(t, c.tz, c.from), len(c.want))
			if len(got) != len(c.want) {
				t.Fatalf("got %d due times %v, want %d", len(got), got, len(c.want))
			}
			for i, w := range c.want {
				if want := local(t, c.tz, w); !got[i].Equal(want) {
					t.Errorf("due time %d = %s, want %s", i, got[i].In(want.Location()).Format(time.RFC3339), want.Format(time.RFC3339))
				}
			}
		})
	}
}

// TestNextFromInsideTheRepeatedHour: a restart during the second pass of a
// repeated hour does not run its times again.
func TestNextFromInsideTheRepeatedHour(t *testing.T) {
	s := mustParse(t, "*/15 * * * *", 0, "America/New_York")
	got := s.Next(local(t, "America/New_York", "2024-11-03 01:05 -0500"))
	if want := local(t, "America/New_York", "2024-11-03 02:00 -0500"); !got.Equal(want) {
		t.Fatalf("next = %s, want %s", got.In(want.Location()), want)
	}
}

func TestIntervalDueTimesAreEpochAligned(t *testing.T) {
	s := mustParse(t, "", 300, "Europe/Berlin")
	from := time.Date(2024, 5, 1, 10, 2, 3, 0, time.UTC)
	got := walk(s, from, 3)
	for i, w := range []string{"10:05:00", "10:10:00", "10:15:00"} {
		if got[i].Format("15:04:05") != w || got[i].Location() != time.UTC {
			t.Errorf("due %d = %s, want %s UTC", i, got[i], w)
		}
	}
	if n := s.Next(got[0]); !n.Equal(got[1]) {
		t.Errorf("Next(due) = %s, want %s: a due time is not due again", n, got[1])
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	cases := []struct {
		cron     string
		interval int64
		tz       string
		field    string
		contains string
	}{
		{"", 0, "", "cron", "exactly one"},
		{"* * * * *", 5, "", "cron", "not both"},
		{"", -1, "", "interval_seconds", "outside"},
		{"61 * * * *", 0, "", "cron", "5 fields"},
		{"* * * *", 0, "", "cron", "5 fields"},
		{"* * * * *", 0, "Mars/Olympus", "timezone", "IANA"},
		{"* * * * *", 0, "Local", "timezone", "IANA"},
		{"TZ=UTC * * * * *", 0, "", "cron", "timezone"},
		{"@every 5m", 0, "", "cron", "interval_seconds"},
		{"0 0 30 2 *", 0, "", "cron", "never matches"},
	}
	for _, c := range cases {
		_, err := Parse(c.cron, c.interval, c.tz)
		fe, ok := err.(*FieldError)
		if !ok || fe.Field != c.field || !strings.Contains(fe.Msg, c.contains) {
			t.Errorf("Parse(%q, %d, %q) = %v; want a %s error containing %q", c.cron, c.interval, c.tz, err, c.field, c.contains)
		}
	}
	for _, ok := range []string{"*/5 * * * *", "0 */2 * * * *", "@daily", "0 9 * * MON-FRI"} {
		if _, err := Parse(ok, 0, "Asia/Tokyo"); err != nil {
			t.Errorf("Parse(%q): %v", ok, err)
		}
	}
}

func TestDueTimesBounded(t *testing.T) {
	s := mustParse(t, "", 1, "")
	from := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	got, more := s.DueTimes(from, from.Add(4*time.Second), 10)
	if len(got) != 5 || more || !got[0].Equal(from) {
		t.Fatalf("DueTimes = %v more=%v, want the 5 due times from %s", got, more, from)
	}
	if got, more := s.DueTimes(from, from.Add(time.Hour), 10); len(got) != 10 || !more {
		t.Fatalf("DueTimes over the limit = %d more=%v", len(got), more)
	}
}
