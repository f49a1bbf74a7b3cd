// Package wire holds the JSON of the HTTP API (api.md) as Go types: what the
// server answers and the requests it reads, which the Go client sends.
// shared/api writes its answers
// through these types and shared/client reads them into the same types, so a
// renamed or retyped field fails a compile on both sides instead of a CLI at
// run time. The OpenAPI document's shapes are derived from them
// (shared/api/shapes.go reads the `json` and `doc` tags), so the document
// cannot drift either.
//
// The requests are declared here too (requests.go): the server reads a body
// into its type with jsonx.Read, whose messages name the field path
// (`events[3].event_type: required`), and the document's request shapes are
// derived from the same tags, NoETL's aliases and limits included.
//
// Values follow the API's conventions: ids are decimal strings (R-I2, ID),
// except in command bodies, which keep NoETL's integers (NumID); times are
// RFC 3339 in UTC; what is not set is null (OptID, OptString, OptObject,
// Time); JSON values decode by shared/jsonx's convention (integral numbers
// int64), so a workload's 3 stays 3 through the client.
package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/ids"
	"github.com/noetl-go/noetl/shared/jsonx"
)

var null = []byte("null")

// ID is a 64-bit id, written as a decimal string (R-I2: JavaScript cannot hold
// it as a number) and read from a string or a number.
type ID int64

func (id ID) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, ids.Format(int64(id))), nil
}

func (id *ID) UnmarshalJSON(b []byte) error {
	n, err := parseID(b)
	*id = ID(n)
	return err
}

// OptID is an ID that may be unset: 0 is written as null.
type OptID int64

func (id OptID) MarshalJSON() ([]byte, error) {
	if id == 0 {
		return null, nil
	}
	return ID(id).MarshalJSON()
}

func (id *OptID) UnmarshalJSON(b []byte) error {
	n, err := parseID(b)
	*id = OptID(n)
	return err
}

// NumID is an id written as a JSON integer: command bodies keep NoETL's
// integers, which its workers read as numbers (shared/api's package doc). It
// is read from a number or a string.
type NumID int64

func (id NumID) MarshalJSON() ([]byte, error) { return strconv.AppendInt(nil, int64(id), 10), nil }

func (id *NumID) UnmarshalJSON(b []byte) error {
	n, err := parseID(b)
	*id = NumID(n)
	return err
}

// parseID reads an id given as a JSON number or numeric string; null is 0.
// Commands carry two ids each and the worker reads many commands: the token
// goes to ids.Parse as it is, without decoding it into a value first.
func parseID(b []byte) (int64, error) {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, null):
		return 0, nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return 0, err
		}
		return ids.Parse(s)
	case len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9'):
		return ids.Parse(json.Number(b))
	}
	v, err := jsonx.Decode(b) // true, {…}, […]: ids.Parse names the type
	if err != nil {
		return 0, err
	}
	return ids.Parse(v)
}

// OptString is a string that may be unset: "" is written as null.
type OptString string

func (s OptString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return null, nil
	}
	return jsonx.AppendString(nil, string(s)), nil
}

func (s *OptString) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), null) {
		*s = ""
		return nil
	}
	var v string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = OptString(v)
	return nil
}

// Time is a moment, written in RFC 3339 in UTC; the zero time is null.
type Time struct{ time.Time }

// At wraps t.
func At(t time.Time) Time { return Time{t} }

// Text is the time as answers carry it, "" for the zero time.
func (t Time) Text() string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return null, nil
	}
	return strconv.AppendQuote(nil, t.Text()), nil
}

func (t *Time) UnmarshalJSON(b []byte) error {
	return readTime(b, &t.Time, func(s string) (time.Time, error) {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return v, fmt.Errorf("expected an RFC 3339 time: %w", err)
		}
		return v, nil
	})
}

// readTime reads a JSON time, null being the zero time, with parse.
func readTime(b []byte, dst *time.Time, parse func(string) (time.Time, error)) error {
	if bytes.Equal(bytes.TrimSpace(b), null) {
		*dst = time.Time{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := parse(s)
	if err != nil {
		return err
	}
	*dst = v
	return nil
}

// WallTime is a moment as NoETL's GUI shows one: UTC to the second,
// "2006-01-02 15:04:05" (time.DateTime); the zero time is null. The
// executions list prints start_time as it comes, where the execution's page
// formats it this way, so lists carry it already formatted (issue 30).
type WallTime struct{ time.Time }

// Wall wraps t.
func Wall(t time.Time) WallTime { return WallTime{t} }

func (t WallTime) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return null, nil
	}
	return strconv.AppendQuote(nil, t.UTC().Format(time.DateTime)), nil
}

func (t *WallTime) UnmarshalJSON(b []byte) error { return readTime(b, &t.Time, ParseTime) }

// ParseTime reads a producer's timestamp: RFC 3339, or the zone-less ISO form
// NoETL's Python workers and Postgres' timestamp columns write (UTC).
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	var err error
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999"} {
		var t time.Time
		if t, err = time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, err
}

// Object is a JSON object in jsonx's convention, never null: nil is written
// as {}. Convert it (map[string]any(o)) before passing it on as an any: code
// that walks jsonx values switches on map[string]any, not on this type.
type Object map[string]any

func (o Object) MarshalJSON() ([]byte, error) {
	if o == nil {
		return []byte("{}"), nil
	}
	return jsonx.Marshal(map[string]any(o))
}

func (o *Object) UnmarshalJSON(b []byte) error {
	m, err := decodeObject(b)
	*o = m
	return err
}

// OptObject is a JSON object that may be unset: nil is written as null.
type OptObject map[string]any

func (o OptObject) MarshalJSON() ([]byte, error) {
	if o == nil {
		return null, nil
	}
	return jsonx.Marshal(map[string]any(o))
}

func (o *OptObject) UnmarshalJSON(b []byte) error {
	m, err := decodeObject(b)
	*o = m
	return err
}

// decodeObject reads an object; null is nil.
func decodeObject(b []byte) (map[string]any, error) {
	if bytes.Equal(bytes.TrimSpace(b), null) {
		return nil, nil
	}
	return jsonx.DecodeObject(b)
}

// Value is any JSON value in jsonx's convention (a result, say).
type Value struct{ V any }

func (v Value) MarshalJSON() ([]byte, error) { return jsonx.Marshal(v.V) }

func (v *Value) UnmarshalJSON(b []byte) error {
	x, err := jsonx.Decode(b)
	v.V = x
	return err
}
