package api

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/noetl-go/noetl/shared/ids"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// Request bodies are decoded with jsonx (integral numbers stay int64, so ids
// above 2^53 survive) into plain values and validated by hand, so that every
// message names the field path the client got wrong.

// MaxJSONDepth bounds how deeply a request body's arrays and objects nest.
// Postgres stores deeper values, but the server wraps what it is given (an
// event's result sits inside its envelope, a workload inside playbook.started
// inside the events answer), and Go clients, ours included, decode with
// encoding/json, which stops at 10,000 levels: a 9,998-deep workload made the
// execution's events unreadable. The margin keeps every stored value readable.
// Real data nests a few dozen levels; Python's json stops near 1,000 too.
const MaxJSONDepth = 1000

// decodeBody parses a request body as a JSON object. An empty body is an
// empty object: the missing fields are then named by validation (422). It owns
// the rules every body follows, so no route can forget one: UTF-8 (400, as
// decoding would silently replace bad bytes), at most MaxJSONDepth levels
// (422), and strings the store can keep: no NUL in any key or value (422
// naming the field, jsonx.CheckText).
func decodeBody(body []byte) (obj, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return obj{jsonx.Fields{M: map[string]any{}}}, nil
	}
	if !utf8.Valid(body) {
		return obj{}, errorf(http.StatusBadRequest, "malformed JSON: the body is not valid UTF-8 at byte %d; JSON text must be UTF-8 (encode binary data, e.g. as base64)",
			jsonx.InvalidUTF8At(string(body)))
	}
	v, err := jsonx.Decode(body)
	if err != nil {
		if strings.Contains(err.Error(), "exceeded max depth") {
			return obj{}, tooDeep("body")
		}
		return obj{}, errorf(http.StatusBadRequest, "malformed JSON: %s", jsonMessage(err))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return obj{}, invalid("body", "expected object, got %s", jsonx.TypeName(v))
	}
	if deeper(m, MaxJSONDepth, nil) {
		return obj{}, tooDeep(deepPath(m))
	}
	if err := jsonx.CheckText("", m); err != nil {
		return obj{}, &Error{Status: http.StatusUnprocessableEntity, Message: err.Error()}
	}
	return obj{jsonx.Fields{M: m}}, nil
}

func tooDeep(path string) *Error {
	return invalid(path, "nests arrays and objects more than %d levels deep (limit MaxJSONDepth); flatten the value or send it as a string", MaxJSONDepth)
}

// deeper reports whether v nests arrays and objects more than left levels
// deep; segs, when not nil, receives the path there, innermost segment first.
func deeper(v any, left int, segs *[]any) bool {
	if left < 0 {
		return true
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if deeper(e, left-1, segs) {
				if segs != nil {
					*segs = append(*segs, k)
				}
				return true
			}
		}
	case []any:
		for i, e := range x {
			if deeper(e, left-1, segs) {
				if segs != nil {
					*segs = append(*segs, i)
				}
				return true
			}
		}
	}
	return false
}

// deepPath names where v passes MaxJSONDepth, cut short once it points the way.
func deepPath(v any) string {
	var segs []any
	deeper(v, MaxJSONDepth, &segs)
	path := ""
	for i, s := range slices.Backward(segs) {
		if len(segs)-i > 8 {
			return path + "…"
		}
		switch s := s.(type) {
		case int:
			path += "[" + strconv.Itoa(s) + "]"
		case string:
			path = jsonx.PathKey(path, s)
		}
	}
	return path
}

// jsonMessage strips encoding/json's package prefix.
func jsonMessage(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// obj reads the fields of one JSON object (jsonx.Fields, which NoETL's
// workers' events are read with too) and the API's own kinds of field.
type obj struct{ jsonx.Fields }

// id reads an id: a number or a numeric string (R-I2).
func (o obj) id(k string, required bool) (int64, error) {
	v, ok := o.Get(k)
	if !ok {
		if required {
			return 0, invalid(o.Name(k), "required")
		}
		return 0, nil
	}
	return parseID(o.Name(k), v)
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
	v, ok := o.Get(k)
	if !ok {
		return 0, false, nil
	}
	n, err := toInt(v)
	if err != nil {
		return 0, false, invalid(o.Name(k), "%s", err.Error())
	}
	if n < lo || n > hi {
		return 0, false, rangeError(o.Name(k), n, lo, hi)
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
	v, ok := o.Get(k)
	if !ok {
		return false, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, invalid(o.Name(k), "expected boolean, got %s", jsonx.TypeName(v))
	}
	return b, nil
}

// number reads a number field (integral or not): a JSON number only, never a
// string. The tools' numberField (shared/tools/config.go) also takes a numeric
// string, because a tool config value is a rendered template and `{{ x }}` renders
// to text; a request body holds no templates. Two inputs, two rules: not a copy.
func (o obj) number(k string) (float64, bool, error) {
	v, ok := o.Get(k)
	if !ok {
		return 0, false, nil
	}
	switch x := v.(type) {
	case int64:
		return float64(x), true, nil
	case float64:
		return x, true, nil
	}
	return 0, false, invalid(o.Name(k), "expected number, got %s", jsonx.TypeName(v))
}

// scalarString reads a string or an integer as a string (client event ids,
// NoETL's numeric command ids).
func (o obj) scalarString(k string) (string, error) {
	v, ok := o.Get(k)
	if !ok {
		return "", nil
	}
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	}
	return "", invalid(o.Name(k), "expected string or integer, got %s", jsonx.TypeName(v))
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

// checkParams applies the storable-text rule (see decodeBody) to the query
// string and the path parameters, which reach the database as they are.
func checkParams(q url.Values, params map[string]string) *Error {
	for _, k := range slices.Sorted(maps.Keys(q)) {
		name := jsonx.PathKey("", k)
		if err := textParam(name, k, true); err != nil {
			return err
		}
		for _, v := range q[k] {
			if err := textParam(name, v, false); err != nil {
				return err
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if err := textParam(k, params[k], false); err != nil {
			return err
		}
	}
	return nil
}

func textParam(name, s string, key bool) *Error {
	var te *jsonx.TextError
	if !errors.As(jsonx.CheckString(name, s), &te) {
		return nil
	}
	te.Key = key
	return &Error{Status: http.StatusUnprocessableEntity, Message: te.Error()}
}
