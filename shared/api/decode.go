package api

import (
	"bytes"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/ids"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// Request bodies are decoded with jsonx (integral numbers stay int64, so ids
// above 2^53 survive) into plain values and validated by hand, so that every
// message names the field path the client got wrong.

// decodeBody parses a request body as a JSON object. An empty body is an
// empty object: the missing fields are then named by validation (422).
func decodeBody(body []byte) (obj, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return obj{m: map[string]any{}}, nil
	}
	v, err := jsonx.Decode(body)
	if err != nil {
		return obj{}, errorf(http.StatusBadRequest, "malformed JSON: %s", jsonMessage(err))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return obj{}, invalid("body", "expected object, got %s", jsonx.TypeName(v))
	}
	return obj{m: m}, nil
}

// jsonMessage strips encoding/json's package prefix.
func jsonMessage(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// obj reads the fields of one JSON object; prefix is its path in the request
// ("" for the body, "events[3]" for a batch element).
type obj struct {
	prefix string
	m      map[string]any
}

func (o obj) name(k string) string {
	if o.prefix == "" {
		return k
	}
	return o.prefix + "." + k
}

// get returns a field; JSON null counts as absent.
func (o obj) get(k string) (any, bool) {
	v, ok := o.m[k]
	if !ok || v == nil {
		return nil, false
	}
	return v, true
}

// alias returns the first present key of keys (NoETL's aliases); two present
// keys with different values are an error naming the second.
func (o obj) alias(keys ...string) (string, any, bool, error) {
	var (
		found string
		val   any
	)
	for _, k := range keys {
		v, ok := o.get(k)
		if !ok {
			continue
		}
		if found == "" {
			found, val = k, v
			continue
		}
		if string(jsonx.MustMarshal(v)) != string(jsonx.MustMarshal(val)) {
			return "", nil, false, invalid(o.name(k), "is an alias of %s; give one of them", o.name(found))
		}
	}
	return found, val, found != "", nil
}

func (o obj) str(k string, required bool) (string, error) {
	return o.strOf(k, required)
}

// strOf reads a string field under any of its alias keys (the first is the
// name used when it is missing).
func (o obj) strOf(k string, required bool, aliases ...string) (string, error) {
	key, v, ok, err := o.alias(append([]string{k}, aliases...)...)
	if err != nil {
		return "", err
	}
	if !ok {
		if required {
			return "", invalid(o.name(k), "required")
		}
		return "", nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", invalid(o.name(key), "expected string, got %s", jsonx.TypeName(v))
	}
	if required && s == "" {
		return "", invalid(o.name(key), "must not be empty")
	}
	return s, nil
}

// object reads an object field (nil when absent or null).
func (o obj) object(k string, aliases ...string) (map[string]any, error) {
	key, v, ok, err := o.alias(append([]string{k}, aliases...)...)
	if err != nil || !ok {
		return nil, err
	}
	m, isObj := v.(map[string]any)
	if !isObj {
		return nil, invalid(o.name(key), "expected object, got %s", jsonx.TypeName(v))
	}
	return m, nil
}

// array reads an array field.
func (o obj) array(k string, required bool) ([]any, bool, error) {
	v, ok := o.get(k)
	if !ok {
		if required {
			return nil, false, invalid(o.name(k), "required")
		}
		return nil, false, nil
	}
	a, isArr := v.([]any)
	if !isArr {
		return nil, false, invalid(o.name(k), "expected array, got %s", jsonx.TypeName(v))
	}
	return a, true, nil
}

// id reads an id: a number or a numeric string (R-I2).
func (o obj) id(k string, required bool) (int64, error) {
	v, ok := o.get(k)
	if !ok {
		if required {
			return 0, invalid(o.name(k), "required")
		}
		return 0, nil
	}
	return parseID(o.name(k), v)
}

func parseID(field string, v any) (int64, error) {
	id, err := ids.Parse(v)
	if err != nil {
		return 0, invalid(field, "%s", err.Error())
	}
	return id, nil
}

// integer reads an integral number (or a numeric string) within lo..hi.
func (o obj) integer(k string, lo, hi int64) (int64, bool, error) {
	v, ok := o.get(k)
	if !ok {
		return 0, false, nil
	}
	n, err := toInt(v)
	if err != nil {
		return 0, false, invalid(o.name(k), "%s", err.Error())
	}
	if n < lo || n > hi {
		return 0, false, rangeError(o.name(k), n, lo, hi)
	}
	return n, true, nil
}

func rangeError(field string, n, lo, hi int64) *Error {
	if n > hi {
		return invalid(field, "%d is over the maximum of %d", n, hi)
	}
	return invalid(field, "%d is below the minimum of %d", n, lo)
}

var errNotInteger = errors.New("not an integer")

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<62 {
			return int64(x), nil
		}
		return 0, &intError{got: "number " + strconv.FormatFloat(x, 'g', -1, 64)}
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64)
		if err != nil {
			return 0, &intError{got: strconv.Quote(truncate(x, 40))}
		}
		return n, nil
	}
	return 0, &intError{got: jsonx.TypeName(v)}
}

type intError struct{ got string }

func (e *intError) Error() string { return "expected integer, got " + e.got }
func (e *intError) Unwrap() error { return errNotInteger }

// boolean reads a boolean field.
func (o obj) boolean(k string) (bool, error) {
	v, ok := o.get(k)
	if !ok {
		return false, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, invalid(o.name(k), "expected boolean, got %s", jsonx.TypeName(v))
	}
	return b, nil
}

// number reads a number field (integral or not).
func (o obj) number(k string) (float64, bool, error) {
	v, ok := o.get(k)
	if !ok {
		return 0, false, nil
	}
	switch x := v.(type) {
	case int64:
		return float64(x), true, nil
	case float64:
		return x, true, nil
	}
	return 0, false, invalid(o.name(k), "expected number, got %s", jsonx.TypeName(v))
}

// scalarString reads a string or an integer as a string (client event ids,
// NoETL's numeric command ids).
func (o obj) scalarString(k string) (string, error) {
	v, ok := o.get(k)
	if !ok {
		return "", nil
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", invalid(o.name(k), "expected string or integer, got %s", jsonx.TypeName(v))
}

// Query parameters.

func queryInt(q url.Values, k string, lo, hi int64) (int64, bool, error) {
	s := q.Get(k)
	if s == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, false, invalid(k, "expected integer, got %q", truncate(s, 40))
	}
	if n < lo || n > hi {
		return 0, false, rangeError(k, n, lo, hi)
	}
	return n, true, nil
}

func queryID(q url.Values, k string) (int64, error) {
	s := q.Get(k)
	if s == "" {
		return 0, nil
	}
	return parseID(k, s)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
