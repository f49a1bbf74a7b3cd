package tmpl

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// Error is a compile or render failure. It carries the template text and the position
// so a failed step names exactly what to fix (dsl.md §5).
type Error struct {
	Path     string // where the template sits in a compiled value (CompileValue), e.g. params.offset
	Template string // the template text
	Offset   int    // byte offset into Template
	Line     int    // 1-based
	Column   int    // 1-based, in characters
	Msg      string

	cause error // the underlying error, if any, for errors.Is/As
}

// maxQuoted bounds how much template text an error message repeats; a long SQL body is
// quoted from the failing line only.
const maxQuoted = 160

func (e *Error) Error() string {
	var b strings.Builder
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	text := e.Template
	if len(text) > maxQuoted {
		text = excerpt(e.Template, e.Offset)
	}
	// A helper's message may quote the value it refused; the message is
	// stored (the step's error), so it must not carry a NUL itself.
	fmt.Fprintf(&b, "template %q at %d:%d: %s", text, e.Line, e.Column, jsonx.EscapeNUL(e.Msg))
	return b.String()
}

// Unwrap exposes the underlying error (a JSON syntax error from fromjson, for example).
func (e *Error) Unwrap() error { return e.cause }

// newError positions msg at byte offset off of src.
func newError(src string, off int, msg string, cause error) *Error {
	off = max(0, min(off, len(src)))
	line, col := lineCol(src, off)
	return &Error{Template: src, Offset: off, Line: line, Column: col, Msg: msg, cause: cause}
}

// withPath returns a copy of e located inside a compiled value; templates are shared by
// caches, so their errors are never modified in place.
func (e *Error) withPath(path string) *Error {
	c := *e
	c.Path = path
	return &c
}

func lineCol(src string, off int) (line, col int) {
	before := src[:off]
	line = 1 + strings.Count(before, "\n")
	if i := strings.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	return line, 1 + utf8.RuneCountInString(before)
}

// excerpt is the line holding off, clipped around it.
func excerpt(src string, off int) string {
	start := strings.LastIndexByte(src[:off], '\n') + 1
	end := strings.IndexByte(src[off:], '\n')
	if end < 0 {
		end = len(src)
	} else {
		end += off
	}
	line := src[start:end]
	if len(line) <= maxQuoted {
		return line
	}
	from := max(0, off-start-maxQuoted/2)
	to := min(len(line), from+maxQuoted)
	// Keep whole characters at the cut points.
	for from > 0 && !utf8.RuneStart(line[from]) {
		from--
	}
	for to < len(line) && !utf8.RuneStart(line[to]) {
		to++
	}
	s := line[from:to]
	if from > 0 {
		s = "…" + s
	}
	if to < len(line) {
		s += "…"
	}
	return s
}
