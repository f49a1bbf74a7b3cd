package jsonx

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The storable-text rule. Postgres keeps no NUL character, in text columns
// or in jsonb (even written as the escape \u0000), and a value refused inside
// a transaction fails the whole transaction. So every value that can reach
// the store from outside the server or from a template is checked here
// first, keys included, and refused with an error naming where the NUL sits:
// request bodies and parameters (a 422), template output (a render error: the
// step fails), playbook literals (a problem at register), results read back
// by reference. Values built from checked ones need no second look. The rule
// refuses instead of escaping: escaping would hand tools a different string
// than they produced, and binary data has a lossless way in already (base64).
//
// Bytes that are not UTF-8 matter only where a string is bound as a text
// parameter as it is (CheckString: query strings, path parameters): values
// reach the store as JSON written by encoding/json, which replaces such bytes.

// TextError is a string the store cannot keep.
type TextError struct {
	// Path is where the string sits, e.g. events[0].payload.result.data.stdout;
	// for a key, the path ends with that key.
	Path string
	// Key reports that the string is an object key.
	Key bool
	// Offset is the byte offset of the first bad byte in the string.
	Offset int
	// NUL reports a NUL character; false: the string is not UTF-8.
	NUL bool
}

func (e *TextError) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	if e.Key {
		b.WriteString("the key ")
	}
	if e.NUL {
		fmt.Fprintf(&b, "contains a NUL character (\\u0000) at byte %d, which cannot be stored; remove it, or encode binary data (e.g. base64)", e.Offset)
	} else {
		fmt.Fprintf(&b, "is not valid UTF-8 at byte %d, which cannot be stored; send text as UTF-8, or encode binary data (e.g. base64)", e.Offset)
	}
	return b.String()
}

// CheckText returns a *TextError for the first string in v, key or value at
// any depth, that holds a NUL; path names v itself ("" for none). When several
// do, the first in sorted key order is named, so the answer does not depend on
// map order.
func CheckText(path string, v any) error {
	if nulFree(v) {
		return nil // the common case walks once, building no paths
	}
	if e := findNUL(path, v); e != nil {
		return e
	}
	return nil
}

// CheckString returns a *TextError when s holds a NUL or is not UTF-8: the
// rule for a string bound as a text parameter as it is.
func CheckString(path, s string) error {
	if off, nul, bad := badText(s); bad {
		return &TextError{Path: path, Offset: off, NUL: nul}
	}
	return nil
}

// EscapeNUL writes each NUL of s as the four characters \x00, for messages
// that quote text they do not control.
func EscapeNUL(s string) string {
	if strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(s, "\x00", `\x00`)
}

func nulFree(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.IndexByte(x, 0) < 0
	case map[string]any:
		for k, e := range x {
			if strings.IndexByte(k, 0) >= 0 || !nulFree(e) {
				return false
			}
		}
	case []any:
		for _, e := range x {
			if !nulFree(e) {
				return false
			}
		}
	}
	return true
}

func findNUL(path string, v any) *TextError {
	switch x := v.(type) {
	case string:
		if off := strings.IndexByte(x, 0); off >= 0 {
			return &TextError{Path: path, Offset: off, NUL: true}
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			p := PathKey(path, k)
			if off := strings.IndexByte(k, 0); off >= 0 {
				return &TextError{Path: p, Key: true, Offset: off, NUL: true}
			}
			if e := findNUL(p, x[k]); e != nil {
				return e
			}
		}
	case []any:
		for i, e := range x {
			if e := findNUL(path+"["+strconv.Itoa(i)+"]", e); e != nil {
				return e
			}
		}
	}
	return nil
}

// badText finds the first NUL or non-UTF-8 byte of s.
func badText(s string) (off int, nul, bad bool) {
	n := strings.IndexByte(s, 0)
	if n < 0 {
		n = len(s)
	}
	if at := InvalidUTF8At(s[:n]); at >= 0 {
		return at, false, true // bad UTF-8 before the first NUL is the first problem
	}
	return n, n < len(s), n < len(s)
}

// InvalidUTF8At is the offset of the first byte of s that is not UTF-8, or
// -1 when s is UTF-8.
func InvalidUTF8At(s string) int {
	if utf8.ValidString(s) {
		return -1
	}
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// PathKey appends an object key to a field path: a.key, or a["odd key"] when
// the key would not read as one segment (dots, brackets, quotes, spaces,
// control characters, bytes that are not UTF-8), so a path never carries the
// characters it reports.
func PathKey(path, key string) string {
	plain := key != "" && utf8.ValidString(key) && !strings.ContainsFunc(key, func(r rune) bool {
		return r == '.' || r == '[' || r == ']' || r == '"' || !unicode.IsPrint(r) || unicode.IsSpace(r)
	})
	switch {
	case !plain:
		return path + "[" + strconv.Quote(key) + "]"
	case path == "":
		return key
	}
	return path + "." + key
}
