package jsonx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

// DecodeWithin is Decode for text whose decoded value may hold at most max
// bytes of memory (estimated). The text is first walked without building
// anything, adding up what each value will cost; past max it stops there
// with a BuildError, so 60 MB of `[{},{},…]` (1.4 GB once built) is refused
// after reading a few MB, while 60 MB of one string costs 60 MB and decodes.
// Decode stays the one decoder: within max, it is called as it is.
//
// The walk checks no syntax, so text it refuses is then checked with
// json.Valid (which builds nothing): text that is not JSON at all (NDJSON,
// say) gets Decode's kind of error, a syntax error, not a BuildError, so a
// caller that keeps text that is not JSON as text still does.
func DecodeWithin(data []byte, max int64) (any, error) {
	if _, err := checkBuild(data, max); err != nil {
		if !json.Valid(data) {
			return nil, syntaxError(data)
		}
		return nil, err
	}
	return Decode(data)
}

// syntaxError is encoding/json's error for data that json.Valid refused:
// Unmarshal checks the whole text before it decodes anything, so nothing is
// built. The target skips every value, should the two ever disagree.
func syntaxError(data []byte) error {
	if err := json.Unmarshal(data, &struct{}{}); err != nil {
		return err
	}
	return errors.New("invalid JSON")
}

// BuildError is text whose decoded value would hold more than Max bytes
// (DecodeWithin's estimate).
type BuildError struct {
	Max int64
	// Values and Offset are how many values, in how many bytes of the text,
	// the walk had counted when the estimate passed Max.
	Values int64
	Offset int
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("decoded, it would hold more than %d bytes of memory: its first %d values (the first %d bytes of its text) pass that already",
		e.Max, e.Values, e.Offset)
}

// What a value costs once Decode has built it, in bytes (Go's 64-bit layout;
// measured, rounded up): the slot an array keeps it in (an interface, with
// append's spare room), a string's header and bytes, a number's box
// (encoding/json's json.Number until Normalize, then the int64 or float64), a
// map's header, its first group of 8 slots, and each entry's slot, spare room
// and key. true, false and null cost only their slot.
const (
	elemCost   = 32
	stringCost = 16
	numberCost = 24
	arrayCost  = 24
	objectCost = 48
	groupCost  = 272
	entryCost  = 64
)

// buildFrame is an array or object the walk is inside.
type buildFrame struct {
	object, wantKey, empty bool
}

// checkBuild walks data adding up what Decode would build (see the costs
// above): the sum, and a BuildError as soon as the sum passes max. It checks no syntax:
// Decode does, on text within max. Nesting past encoding/json's own limit
// (10,000 levels) is left to Decode to refuse.
func checkBuild(data []byte, max int64) (int64, error) {
	var total, values int64
	stack := make([]buildFrame, 0, 16)
	// slot charges a value's place in its container: an array's element, or
	// nothing in an object (its entry was charged with the key).
	slot := func() {
		values++
		if n := len(stack); n > 0 && !stack[n-1].object {
			total += elemCost
		}
	}
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case c == '{' || c == '[':
			if len(stack) > 10000 {
				return total, nil
			}
			slot()
			if c == '{' {
				total += objectCost
			} else {
				total += arrayCost
			}
			stack = append(stack, buildFrame{object: c == '{', wantKey: c == '{', empty: true})
			i++
		case c == '}' || c == ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			i++
		case c == ',' || c == ':':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].wantKey = c == ','
			}
			i++
		case c == '"':
			n, end := stringLen(data, i+1)
			if top := len(stack) - 1; top >= 0 && stack[top].wantKey {
				total += entryCost + n
				if stack[top].empty {
					total += groupCost
					stack[top].empty = false
				}
				stack[top].wantKey = false
			} else {
				slot()
				total += stringCost + n
			}
			i = end
		case c == '-' || c >= '0' && c <= '9':
			j := i + 1
			for j < len(data) && (data[j] >= '0' && data[j] <= '9' || data[j] == '.' || data[j] == 'e' || data[j] == 'E' || data[j] == '+' || data[j] == '-') {
				j++
			}
			slot()
			total += numberCost + int64(j-i)
			i = j
		case c == 't' || c == 'f' || c == 'n':
			j := i + 1
			for j < len(data) && data[j] >= 'a' && data[j] <= 'z' {
				j++
			}
			slot()
			i = j
		default:
			i++
		}
		if total > max {
			return total, &BuildError{Max: max, Values: values, Offset: i}
		}
	}
	return total, nil
}

// stringLen reads the JSON string whose text begins at data[i] (after its
// quote): the bytes it decodes to at most, and where it ends (after its
// closing quote, or at the end of data). An escape decodes to one byte, or
// three for \uXXXX; a byte that is not UTF-8 becomes U+FFFD, three bytes.
func stringLen(data []byte, i int) (int64, int) {
	var n int64
	q := -1 // where the next quote is, once looked for: each byte is searched once
	for {
		if q < i {
			q = bytes.IndexByte(data[i:], '"')
			if q < 0 {
				return n + textLen(data[i:]), len(data)
			}
			q += i
		}
		span := data[i:q]
		b := bytes.IndexByte(span, '\\')
		if b < 0 {
			return n + textLen(span), q + 1
		}
		n += textLen(span[:b])
		i += b + 1 // the escaped byte: skipped below, so \" does not end the string
		switch {
		case i < len(data) && data[i] == 'u':
			n += 3
			i = min(i+5, len(data))
		case i < len(data):
			n++
			i++
		}
	}
}

// textLen is how many bytes b decodes to: itself when it is UTF-8, else
// with each invalid byte three bytes of U+FFFD.
func textLen(b []byte) int64 {
	if utf8.Valid(b) {
		return int64(len(b))
	}
	var n int64
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			n += 3
		} else {
			n += int64(size)
		}
		b = b[size:]
	}
	return n
}
