package api

import (
	"bytes"
	"errors"
	"maps"
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
// above 2^53 survive) into plain values, then read into the route's request
// type (shared/wire's requests.go) by jsonx.Read, so that every message names
// the field path the client got wrong.

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
func decodeBody(body []byte) (jsonx.Fields, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return jsonx.Fields{M: map[string]any{}}, nil
	}
	if !utf8.Valid(body) {
		return jsonx.Fields{}, errorf(http.StatusBadRequest, "malformed JSON: the body is not valid UTF-8 at byte %d; JSON text must be UTF-8 (encode binary data, e.g. as base64)",
			jsonx.InvalidUTF8At(string(body)))
	}
	v, err := jsonx.Decode(body)
	if err != nil {
		if strings.Contains(err.Error(), "exceeded max depth") {
			return jsonx.Fields{}, tooDeep("body")
		}
		return jsonx.Fields{}, errorf(http.StatusBadRequest, "malformed JSON: %s", jsonMessage(err))
	}
	m, ok := v.(map[string]any)
	if !ok {
		return jsonx.Fields{}, invalid("body", "expected object, got %s", jsonx.TypeName(v))
	}
	if deeper(m, MaxJSONDepth, nil) {
		return jsonx.Fields{}, tooDeep(deepPath(m))
	}
	if err := jsonx.CheckText("", m); err != nil {
		return jsonx.Fields{}, &Error{Status: http.StatusUnprocessableEntity, Message: err.Error()}
	}
	return jsonx.Fields{M: m}, nil
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

// decodeInto reads a request body into the request type dst points to:
// decodeBody's rules, then jsonx.Read's.
func decodeInto(body []byte, dst any) error {
	f, err := decodeBody(body)
	if err != nil {
		return err
	}
	return jsonx.Read(f, dst)
}

func parseID(field string, v any) (int64, error) {
	id, err := ids.Parse(v)
	if err != nil {
		return 0, invalid(field, "%s", err.Error())
	}
	return id, nil
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
