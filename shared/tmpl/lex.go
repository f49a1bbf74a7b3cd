package tmpl

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEnd   tokKind = iota // the closing "}}" or "%}"
	tName                 // identifier or keyword
	tInt                  // integer literal (val is int64)
	tFloat                // float literal (val is float64)
	tStr                  // string literal (val is the decoded string)
	tOp                   // operator or punctuation (s)
)

type token struct {
	kind tokKind
	s    string // name or operator
	val  any    // literal value
	pos  int    // byte offset in the template
}

// syntaxError is a compile failure at a template offset; Compile turns it into *Error.
type syntaxError struct {
	pos int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

func errAt(pos int, msg string) *syntaxError { return &syntaxError{pos: pos, msg: msg} }

// segment is one piece of a template: text, an output tag {{ }} or a block tag {% %}.
type segment struct {
	kind      segKind
	text      string  // segText
	toks      []token // segOut, segTag: the tag's tokens ending with tEnd
	pos       int     // offset of the opening delimiter
	trimLeft  bool    // "{{-" / "{%-": strip whitespace before
	trimRight bool    // "-}}" / "-%}": strip whitespace after
}

type segKind uint8

const (
	segText segKind = iota
	segOut
	segTag
)

// split cuts a template into segments and applies whitespace control. Literal "}}" and
// lone braces are text (R-W7); "{#" is text too, since comments are not part of the dialect.
func split(src string) ([]segment, error) {
	var segs []segment
	pos := 0
	for pos < len(src) {
		i := nextOpen(src, pos)
		if i < 0 {
			segs = append(segs, segment{kind: segText, text: src[pos:], pos: pos})
			break
		}
		if i > pos {
			segs = append(segs, segment{kind: segText, text: src[pos:i], pos: pos})
		}
		kind, closer := segOut, byte('}')
		if src[i+1] == '%' {
			kind, closer = segTag, '%'
		}
		j := i + 2
		seg := segment{kind: kind, pos: i}
		if j < len(src) && src[j] == '-' {
			seg.trimLeft = true
			j++
		}
		toks, end, trimRight, err := lexTag(src, j, closer)
		if err != nil {
			if err.pos < 0 {
				err.pos = i
			}
			return nil, err
		}
		seg.toks, seg.trimRight = toks, trimRight
		segs = append(segs, seg)
		pos = end
	}
	for i := range segs {
		if segs[i].kind == segText {
			continue
		}
		if segs[i].trimLeft && i > 0 && segs[i-1].kind == segText {
			segs[i-1].text = strings.TrimRight(segs[i-1].text, " \t\r\n\f\v")
		}
		if segs[i].trimRight && i+1 < len(segs) && segs[i+1].kind == segText {
			segs[i+1].text = strings.TrimLeft(segs[i+1].text, " \t\r\n\f\v")
		}
	}
	return segs, nil
}

// nextOpen finds the next "{{" or "{%" at or after pos.
func nextOpen(src string, pos int) int {
	for {
		i := strings.IndexByte(src[pos:], '{')
		if i < 0 || pos+i+1 >= len(src) {
			return -1
		}
		i += pos
		if c := src[i+1]; c == '{' || c == '%' {
			return i
		}
		pos = i + 1
	}
}

// lexTag reads tokens from src[i:] up to the closing delimiter ("}}" when closer is '}',
// "%}" when '%'). Inside an open '{' the delimiter's braces close dict literals instead,
// and strings may hold anything, so {{ {'a': {'b': '}}'}} }} reads whole; inside an open
// '(' or '[' the delimiter still ends the tag, so a missing ']' is reported as such. It
// returns the offset after the delimiter. An error with pos -1 means the tag never
// closes; the caller points at its opening.
func lexTag(src string, i int, closer byte) (toks []token, end int, trimRight bool, err *syntaxError) {
	var open []byte // unclosed brackets
	closes := func(at int) bool {
		return at+1 < len(src) && src[at] == closer && src[at+1] == '}'
	}
	for {
		for i < len(src) && isSpace(src[i]) {
			i++
		}
		if i >= len(src) {
			what := "{{"
			if closer == '%' {
				what = "{%"
			}
			return nil, 0, false, errAt(-1, "unterminated '"+what+"'")
		}
		if len(open) == 0 || open[len(open)-1] != '{' {
			if closes(i) {
				return append(toks, token{kind: tEnd, pos: i}), i + 2, false, nil
			}
			if src[i] == '-' && closes(i+1) {
				return append(toks, token{kind: tEnd, pos: i}), i + 3, true, nil
			}
		}
		c := src[i]
		switch {
		case isNameStart(c):
			j := i + 1
			for j < len(src) && isNameChar(src[j]) {
				j++
			}
			toks = append(toks, token{kind: tName, s: src[i:j], pos: i})
			i = j
		case c >= '0' && c <= '9':
			// A number right after '.' is an index (a.0.1), never a float.
			afterDot := i > 0 && src[i-1] == '.'
			tok, j, err := lexNumber(src, i, afterDot)
			if err != nil {
				return nil, 0, false, err
			}
			toks = append(toks, tok)
			i = j
		case c == '\'' || c == '"':
			s, j, err := lexString(src, i)
			if err != nil {
				return nil, 0, false, err
			}
			toks = append(toks, token{kind: tStr, val: s, pos: i})
			i = j
		default:
			op := lexOp(src[i:])
			if op == "" {
				r, _ := utf8.DecodeRuneInString(src[i:])
				return nil, 0, false, errAt(i, "unexpected character "+strconv.QuoteRune(r))
			}
			switch op {
			case "(", "[", "{":
				open = append(open, op[0])
			case ")", "]", "}":
				if len(open) > 0 {
					open = open[:len(open)-1]
				}
			}
			toks = append(toks, token{kind: tOp, s: op, pos: i})
			i += len(op)
		}
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func isNameStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isNameChar(c byte) bool { return isNameStart(c) || (c >= '0' && c <= '9') }

var ops3 = [...]string{"**", "//", "==", "!=", "<=", ">="}

func lexOp(s string) string {
	for _, op := range ops3 {
		if strings.HasPrefix(s, op) {
			return op
		}
	}
	switch s[0] {
	case '+', '-', '*', '/', '%', '~', '(', ')', '[', ']', '{', '}', ',', '.', ':', '|', '=', '<', '>':
		return s[:1]
	}
	return ""
}

// lexNumber reads an integer (decimal, 0x, 0o, 0b; underscores allowed between digits)
// or a float. Integers beyond int64 are an error rather than a silent float.
func lexNumber(src string, i int, intOnly bool) (token, int, *syntaxError) {
	start := i
	if !intOnly && src[i] == '0' && i+1 < len(src) {
		base := 0
		switch src[i+1] | 0x20 {
		case 'x':
			base = 16
		case 'o':
			base = 8
		case 'b':
			base = 2
		}
		if base != 0 {
			j := i + 2
			for j < len(src) && (isHexDigit(src[j]) || src[j] == '_') {
				j++
			}
			n, err := strconv.ParseInt(src[i:j], 0, 64)
			if err != nil {
				return token{}, 0, errAt(start, "invalid number "+strconv.Quote(src[i:j]))
			}
			return token{kind: tInt, val: n, pos: start}, j, nil
		}
	}
	j := digits(src, i)
	isFloat := false
	if !intOnly {
		if j+1 < len(src) && src[j] == '.' && isDigit(src[j+1]) {
			j = digits(src, j+1)
			isFloat = true
		}
		if j < len(src) && src[j]|0x20 == 'e' {
			k := j + 1
			if k < len(src) && (src[k] == '+' || src[k] == '-') {
				k++
			}
			if k < len(src) && isDigit(src[k]) {
				j = digits(src, k)
				isFloat = true
			}
		}
	}
	text := strings.ReplaceAll(src[start:j], "_", "")
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsInf(f, 0) {
			return token{}, 0, errAt(start, "number out of range "+strconv.Quote(src[start:j]))
		}
		return token{kind: tFloat, val: f, pos: start}, j, nil
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return token{}, 0, errAt(start, "integer out of range "+strconv.Quote(src[start:j]))
	}
	return token{kind: tInt, val: n, pos: start}, j, nil
}

// digits skips digits with single underscores between them (1_000).
func digits(src string, i int) int {
	for i < len(src) {
		if isDigit(src[i]) {
			i++
			continue
		}
		if src[i] == '_' && i+1 < len(src) && isDigit(src[i+1]) {
			i++
			continue
		}
		break
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHexDigit(c byte) bool {
	return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f')
}

// lexString decodes a Python string literal. Unknown escapes keep their backslash, as
// Python does, so regular expressions such as '\d' survive.
func lexString(src string, i int) (string, int, *syntaxError) {
	quote := src[i]
	start := i
	i++
	var b strings.Builder
	for i < len(src) {
		c := src[i]
		switch {
		case c == quote:
			return b.String(), i + 1, nil
		case c != '\\':
			b.WriteByte(c)
			i++
			continue
		}
		if i+1 >= len(src) {
			break
		}
		e := src[i+1]
		i += 2
		switch e {
		case '\n':
			// A backslash-newline continues the line.
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			n := 2
			switch e {
			case 'u':
				n = 4
			case 'U':
				n = 8
			}
			if i+n > len(src) {
				return "", 0, errAt(i-2, "truncated \\"+string(e)+" escape")
			}
			r, err := strconv.ParseUint(src[i:i+n], 16, 32)
			if err != nil || r > utf8.MaxRune {
				return "", 0, errAt(i-2, "invalid \\"+string(e)+" escape")
			}
			b.WriteRune(rune(r))
			i += n
		case '0', '1', '2', '3', '4', '5', '6', '7':
			r := rune(e - '0')
			for k := 0; k < 2 && i < len(src) && src[i] >= '0' && src[i] <= '7'; k++ {
				r = r*8 + rune(src[i]-'0')
				i++
			}
			b.WriteRune(r)
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return "", 0, errAt(start, "unterminated string")
}

// TagBytes is the bytes of src inside its {{ }} and {% %} tags, delimiters
// included: what compiling grows with (text between tags compiles to one
// constant each). It reads the tags as Compile does, so a string inside a tag
// that holds "}}" does not end it early; src that does not lex as a template
// (Compile fails at once, nothing compiled) is 0.
func TagBytes(src string) int {
	n := 0
	for pos := 0; pos < len(src); {
		i := nextOpen(src, pos)
		if i < 0 {
			break
		}
		j := i + 2
		if j < len(src) && src[j] == '-' {
			j++
		}
		closer := byte('}')
		if src[i+1] == '%' {
			closer = '%'
		}
		_, end, _, err := lexTag(src, j, closer)
		if err != nil {
			return 0
		}
		n += end - i
		pos = end
	}
	return n
}
