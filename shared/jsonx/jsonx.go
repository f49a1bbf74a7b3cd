// Package jsonx holds the project's one JSON value convention, shared by the
// engine, templates, store and replay: objects are map[string]any, arrays []any,
// integral numbers int64 (ids above 2^53 survive, R-T10), other numbers float64.
// Requests are read in it too: Fields and Read (fields.go, read.go) read a
// decoded object into a request's Go type, refusing a field with a FieldError
// that names its path.
package jsonx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
)

// Decode parses JSON into the convention's values.
func Decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("unexpected data after the JSON value at offset %d", dec.InputOffset())
	}
	return Normalize(v), nil
}

// DecodeObject parses a JSON object; null decodes to an empty map.
func DecodeObject(data []byte) (map[string]any, error) {
	v, err := Decode(data)
	if err != nil {
		return nil, err
	}
	switch m := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	default:
		return nil, fmt.Errorf("expected a JSON object, got %s", TypeName(v))
	}
}

// Normalize converts values produced by encoding/json (with UseNumber), yaml.v3 or Go
// code into the convention, recursively. map[string]any and []any are normalised in place.
func Normalize(v any) any {
	switch x := v.(type) {
	case nil, string, bool, int64, float64:
		return x
	case json.Number:
		return Number(x)
	case map[string]any:
		for k, e := range x {
			x[k] = Normalize(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = Normalize(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = Normalize(e)
		}
		return x
	case []string:
		return each(x, func(s string) any { return s })
	case []map[string]any:
		return each(x, func(m map[string]any) any { return Normalize(m) })
	case json.RawMessage:
		d, err := Decode(x)
		if err != nil {
			return string(x)
		}
		return d
	default:
		if n, ok := GoNumber(x); ok {
			return n
		}
		// Anything else (structs, typed maps) goes through a JSON round trip.
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		d, err := Decode(b)
		if err != nil {
			return fmt.Sprint(x)
		}
		return d
	}
}

// GoNumber converts a value of one of Go's integer and float types to the
// convention: int64, or float64 (for a float, and an unsigned integer past
// MaxInt64). ok false: v is no number, or of a named type (time.Duration,
// slog.Level: its own JSON form, if any, decides).
func GoNumber(v any) (any, bool) {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() || rv.Type().PkgPath() != "" {
		return nil, false
	}
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return uintValue(rv.Uint()), true
	case reflect.Float32, reflect.Float64:
		return rv.Float(), true
	}
	return nil, false
}

func uintValue(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return float64(u)
}

// Number converts a JSON number literal: int64 when integral and in range, else float64.
func Number(n json.Number) any {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return string(n)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<63 && !bytes.ContainsAny([]byte(n), ".eE") {
		return int64(f)
	}
	return f
}

// Marshal encodes compactly without HTML escaping, map keys sorted, so equal
// values always give equal bytes (the canonical form replay hashes); see
// AppendValue.
func Marshal(v any) ([]byte, error) {
	return AppendValue(nil, v)
}

func MustMarshal(v any) []byte {
	b, err := Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("jsonx: marshal %T: %v", v, err))
	}
	return b
}

// Clone deep-copies a convention value, so a snapshot never shares maps with its caller.
func Clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = Clone(e)
		}
		return m
	case []any:
		return each(x, Clone)
	default:
		return x
	}
}

// each is a new list of f of each element of l.
func each[E any](l []E, f func(E) any) []any {
	out := make([]any, len(l))
	for i, e := range l {
		out[i] = f(e)
	}
	return out
}

// Int is the integer a number value holds (a float64 truncated), 0 for
// anything else: for counters read from events and commands (attempt, visit,
// timeout_seconds), where a missing or malformed value means none.
func Int(v any) int {
	switch x := v.(type) {
	case int64:
		return int(x)
	case int:
		return x
	case float64:
		return int(x)
	}
	return 0
}

// TypeName names a value's JSON type for error messages ("expected array, got string").
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case int64, int, float64, json.Number:
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// Describe names a value's kind for a message: a mapping, a list, null, else
// its Go type and value.
func Describe(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T %v", v, v)
	}
}
