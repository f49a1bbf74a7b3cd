package replay

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ParamError is a bad query parameter: the API answers 400 with Error() as
// the message.
type ParamError struct {
	Param string
	Msg   string
}

func (e *ParamError) Error() string { return e.Msg }

// MsgOneCutoff is replay.md's exact 400 message for more than one cutoff.
const MsgOneCutoff = "Use only one replay cutoff: as_of_event_id, as_of_position, or as_of_time"

// CutoffKind says which cutoff parameter was given.
type CutoffKind int

// Cutoff kinds.
const (
	CutoffNone     CutoffKind = iota // fold the whole log
	CutoffEventID                    // as_of_event_id, inclusive
	CutoffPosition                   // as_of_position: inclusive seq
	CutoffTime                       // as_of_time: inclusive created_at
)

// Cutoff ends the fold. Every kind cuts a prefix of the seq-ordered log: the
// fold stops at the first row beyond it. For as_of_event_id this equals
// NoETL's `event_id <= X` whenever ids grow with seq (they do within one
// execution), and when they do not it still yields a consistent prefix
// rather than a state with holes.
type Cutoff struct {
	Kind     CutoffKind
	EventID  int64
	Position int64
	Time     time.Time
}

// Admits reports whether row r lies within the cutoff.
func (c Cutoff) Admits(r Row) bool {
	switch c.Kind {
	case CutoffEventID:
		return r.EventID <= c.EventID
	case CutoffPosition:
		return r.Seq <= c.Position
	case CutoffTime:
		return !r.CreatedAt.After(c.Time)
	}
	return true
}

// String renders the cutoff in ParseCutoffValue's grammar ("" for none).
func (c Cutoff) String() string {
	switch c.Kind {
	case CutoffEventID:
		return "event_id:" + strconv.FormatInt(c.EventID, 10)
	case CutoffPosition:
		return "position:" + strconv.FormatInt(c.Position, 10)
	case CutoffTime:
		return "time:" + c.Time.Format(time.RFC3339Nano)
	}
	return ""
}

// ParseCutoff reads as_of_event_id, as_of_position and as_of_time from query
// parameters. An empty value counts as absent. Errors are *ParamError.
func ParseCutoff(q url.Values) (Cutoff, error) {
	var given []string
	for _, k := range [...]string{"as_of_event_id", "as_of_position", "as_of_time"} {
		if q.Get(k) != "" {
			given = append(given, k)
		}
	}
	if len(given) > 1 {
		return Cutoff{}, &ParamError{Param: strings.Join(given, ","), Msg: MsgOneCutoff}
	}
	if len(given) == 0 {
		return Cutoff{}, nil
	}
	k := given[0]
	v := q.Get(k)
	switch k {
	case "as_of_event_id":
		n, err := parsePositive(k, v)
		return Cutoff{Kind: CutoffEventID, EventID: n}, err
	case "as_of_position":
		n, err := parsePositive(k, v)
		return Cutoff{Kind: CutoffPosition, Position: n}, err
	default:
		t, err := parseTime(k, v)
		return Cutoff{Kind: CutoffTime, Time: t}, err
	}
}

// ParseCutoffValue reads a cutoff written as one value (the diff_from
// parameter): "event_id:<n>", "position:<n>", "time:<RFC 3339>", a bare
// integer (an event id, like as_of_event_id) or a bare RFC 3339 time.
func ParseCutoffValue(param, s string) (Cutoff, error) {
	s = strings.TrimSpace(s)
	kind, rest, found := strings.Cut(s, ":")
	if found {
		switch kind {
		case "event_id":
			n, err := parsePositive(param, rest)
			return Cutoff{Kind: CutoffEventID, EventID: n}, err
		case "position", "seq":
			n, err := parsePositive(param, rest)
			return Cutoff{Kind: CutoffPosition, Position: n}, err
		case "time":
			t, err := parseTime(param, rest)
			return Cutoff{Kind: CutoffTime, Time: t}, err
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return Cutoff{Kind: CutoffEventID, EventID: n}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, unplus(s)); err == nil {
		return Cutoff{Kind: CutoffTime, Time: t}, nil
	}
	return Cutoff{}, &ParamError{Param: param, Msg: fmt.Sprintf(
		"%s must be event_id:<id>, position:<seq>, time:<RFC 3339 timestamp> or an event id, got %q", param, s)}
}

// ParseLimit reads the limit parameter; "" gives DefaultLimit.
func ParseLimit(s string) (int, error) {
	if s == "" {
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n <= 0 {
		return 0, &ParamError{Param: "limit", Msg: fmt.Sprintf("limit must be a positive integer, got %q", s)}
	}
	if n > MaxLimit {
		return 0, &ParamError{Param: "limit", Msg: fmt.Sprintf(
			"limit %d is over the most events one replay folds, %d (replay.MaxLimit): give at most %d, or fold an earlier prefix with as_of_position", n, MaxLimit, MaxLimit)}
	}
	return n, nil
}

// Query is the parsed replay query string (replay.md "Parameters").
type Query struct {
	Projection Projection
	Cutoff     Cutoff
	Limit      int
	Verify     bool
	// DiffFrom is the earlier cutoff of diff_from; Kind CutoffNone when absent.
	DiffFrom Cutoff
}

// ParseQuery validates every replay parameter. Errors are *ParamError.
func ParseQuery(q url.Values) (Query, error) {
	var out Query
	var err error
	if out.Projection, err = ParseProjection(q.Get("projection")); err != nil {
		return Query{}, err
	}
	if out.Cutoff, err = ParseCutoff(q); err != nil {
		return Query{}, err
	}
	if out.Limit, err = ParseLimit(q.Get("limit")); err != nil {
		return Query{}, err
	}
	if v := q.Get("verify"); v != "" {
		if out.Verify, err = strconv.ParseBool(v); err != nil {
			return Query{}, &ParamError{Param: "verify", Msg: fmt.Sprintf("verify must be true or false, got %q", v)}
		}
	}
	if v := q.Get("diff_from"); v != "" {
		if out.DiffFrom, err = ParseCutoffValue("diff_from", v); err != nil {
			return Query{}, err
		}
	}
	return out, nil
}

func parsePositive(param, s string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return 0, &ParamError{Param: param, Msg: fmt.Sprintf("%s must be a positive integer, got %q", param, s)}
	}
	return n, nil
}

func parseTime(param, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, unplus(strings.TrimSpace(s)))
	if err != nil {
		return time.Time{}, &ParamError{Param: param, Msg: fmt.Sprintf(
			"%s must be an RFC 3339 timestamp such as 2024-05-01T12:00:00Z, got %q", param, s)}
	}
	return t, nil
}

// unplus restores the '+' of a UTC offset that an unencoded query string
// turned into a space ("…T12:00:00 02:00").
func unplus(s string) string {
	if i := strings.LastIndexByte(s, ' '); i > 0 && strings.Contains(s[:i], "T") {
		return s[:i] + "+" + s[i+1:]
	}
	return s
}
