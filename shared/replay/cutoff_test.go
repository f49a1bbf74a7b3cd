package replay

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseCutoff(t *testing.T) {
	q := func(s string) url.Values {
		v, err := url.ParseQuery(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	ok := []struct {
		query string
		want  Cutoff
	}{
		{"", Cutoff{}},
		{"as_of_event_id=", Cutoff{}},
		{"as_of_event_id=112", Cutoff{Kind: CutoffEventID, EventID: 112}},
		{"as_of_event_id=9223372036854775807", Cutoff{Kind: CutoffEventID, EventID: 9223372036854775807}},
		{"as_of_position=7", Cutoff{Kind: CutoffPosition, Position: 7}},
		{"as_of_time=2026-01-02T03:04:05Z", Cutoff{Kind: CutoffTime, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
		{"as_of_time=2026-01-02T05:04:05.5%2B02:00", Cutoff{Kind: CutoffTime, Time: time.Date(2026, 1, 2, 3, 4, 5, 5e8, time.UTC)}},
		// An unencoded '+' arrives as a space; the offset is restored.
		{"as_of_time=2026-01-02T05:04:05+02:00", Cutoff{Kind: CutoffTime, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
	}
	for _, c := range ok {
		got, err := ParseCutoff(q(c.query))
		if err != nil {
			t.Errorf("%q: %v", c.query, err)
			continue
		}
		if got.Kind != c.want.Kind || got.EventID != c.want.EventID || got.Position != c.want.Position || !got.Time.Equal(c.want.Time) {
			t.Errorf("%q: got %+v, want %+v", c.query, got, c.want)
		}
	}

	bad := []struct {
		query, param, msg string
	}{
		{"as_of_event_id=1&as_of_position=2", "", MsgOneCutoff},
		{"as_of_event_id=1&as_of_time=2026-01-02T03:04:05Z", "", MsgOneCutoff},
		{"as_of_position=1&as_of_time=x&as_of_event_id=3", "", MsgOneCutoff},
		{"as_of_event_id=abc", "as_of_event_id", `as_of_event_id must be a positive integer, got "abc"`},
		{"as_of_position=-3", "as_of_position", `as_of_position must be a positive integer, got "-3"`},
		{"as_of_time=2026-01-02", "as_of_time", `as_of_time must be an RFC 3339 timestamp such as 2024-05-01T12:00:00Z, got "2026-01-02"`},
		{"as_of_time=yesterday", "as_of_time", `as_of_time must be an RFC 3339 timestamp such as 2024-05-01T12:00:00Z, got "yesterday"`},
	}
	for _, c := range bad {
		_, err := ParseCutoff(q(c.query))
		var pe *ParamError
		if !errors.As(err, &pe) {
			t.Errorf("%q: err %v, want a *ParamError", c.query, err)
			continue
		}
		if pe.Error() != c.msg {
			t.Errorf("%q: message %q, want %q", c.query, pe.Error(), c.msg)
		}
		if c.param != "" && pe.Param != c.param {
			t.Errorf("%q: param %q, want %q", c.query, pe.Param, c.param)
		}
	}
	if MsgOneCutoff != "Use only one replay cutoff: as_of_event_id, as_of_position, or as_of_time" {
		t.Fatal("the 400 message must be replay.md's, verbatim")
	}
}

func TestParseProjectionAndLimit(t *testing.T) {
	for _, s := range []string{"", "all", "execution", "stage", "frame", "command", "business_object", "loop", "step"} {
		if _, err := ParseProjection(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	_, err := ParseProjection("stages")
	var pe *ParamError
	if !errors.As(err, &pe) || pe.Param != "projection" {
		t.Fatalf("unknown projection: %v", err)
	}
	for _, name := range []string{`"stages"`, "execution", "stage", "frame", "command", "business_object", "loop", "step", "all"} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}

	if n, err := ParseLimit(""); err != nil || n != 100000 {
		t.Errorf("default limit %d %v", n, err)
	}
	if n, err := ParseLimit("25"); err != nil || n != 25 {
		t.Errorf("limit 25: %d %v", n, err)
	}
	for _, s := range []string{"0", "-1", "ten", "1.5"} {
		if _, err := ParseLimit(s); !errors.As(err, &pe) || pe.Param != "limit" {
			t.Errorf("limit %q: %v", s, err)
		}
	}
}

func TestParseQuery(t *testing.T) {
	v, _ := url.ParseQuery("projection=loop&as_of_position=9&limit=50&verify=true&diff_from=position:3")
	q, err := ParseQuery(v)
	if err != nil {
		t.Fatal(err)
	}
	if q.Projection != ProjectionLoop || q.Cutoff.Position != 9 || q.Limit != 50 || !q.Verify ||
		q.DiffFrom.Kind != CutoffPosition || q.DiffFrom.Position != 3 {
		t.Fatalf("%+v", q)
	}
	diffFrom := map[string]Cutoff{
		"104":                       {Kind: CutoffEventID, EventID: 104},
		"event_id:104":              {Kind: CutoffEventID, EventID: 104},
		"seq:4":                     {Kind: CutoffPosition, Position: 4},
		"time:2026-01-02T03:04:05Z": {Kind: CutoffTime, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		"2026-01-02T03:04:05Z":      {Kind: CutoffTime, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
	}
	for s, want := range diffFrom {
		got, err := ParseCutoffValue("diff_from", s)
		if err != nil || got.Kind != want.Kind || got.EventID != want.EventID || got.Position != want.Position || !got.Time.Equal(want.Time) {
			t.Errorf("diff_from=%s: %+v %v", s, got, err)
		}
		// String round-trips through the same grammar.
		back, err := ParseCutoffValue("diff_from", got.String())
		if err != nil || back.String() != got.String() {
			t.Errorf("round trip of %q: %q %v", got.String(), back.String(), err)
		}
	}
	for _, s := range []string{"projection=x", "verify=maybe", "diff_from=position:0", "diff_from=later", "limit=0"} {
		v, _ := url.ParseQuery(s)
		var pe *ParamError
		if _, err := ParseQuery(v); !errors.As(err, &pe) {
			t.Errorf("%s: err %v, want *ParamError", s, err)
		}
	}
}
