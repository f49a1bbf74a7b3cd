package tools

import "strings"

// countStatements counts the non-empty SQL statements of a script (see
// splitStatements). It feeds the "params need exactly one statement" check.
func countStatements(sql string) int { return len(splitStatements(sql)) }

// splitStatements splits a script into its non-empty statements (comments kept,
// the ';' dropped), honouring quotes ('…', E'…', "…"), dollar quotes
// ($tag$…$tag$) and comments (--, nested /* */), so a ';' inside any of them
// does not split; a stretch of only comments is no statement. A SQL-standard
// function body (BEGIN ATOMIC … END) splits at its inner statements too. The
// duckdb tool runs a script statement by statement from it (DuckDB's dialect
// quotes the same way).
func splitStatements(sql string) []string {
	var out []string
	start := 0
	nonEmpty := false
	i := 0
	n := len(sql)
	for i < n {
		c := sql[i]
		switch {
		case c == '-' && i+1 < n && sql[i+1] == '-':
			for i < n && sql[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < n && sql[i+1] == '*':
			depth := 0
			for i < n {
				if sql[i] == '/' && i+1 < n && sql[i+1] == '*' {
					depth++
					i += 2
					continue
				}
				if sql[i] == '*' && i+1 < n && sql[i+1] == '/' {
					depth--
					i += 2
					if depth == 0 {
						break
					}
					continue
				}
				i++
			}
			continue
		case c == '\'':
			backslash := i > 0 && (sql[i-1] == 'E' || sql[i-1] == 'e') && (i < 2 || !isIdentByte(sql[i-2]))
			i = skipQuoted(sql, i, '\'', backslash)
			nonEmpty = true
			continue
		case c == '"':
			i = skipQuoted(sql, i, '"', false)
			nonEmpty = true
			continue
		case c == '$':
			if tag, ok := dollarTag(sql, i); ok {
				end := strings.Index(sql[i+len(tag):], tag)
				if end < 0 {
					i = n
				} else {
					i += len(tag) + end + len(tag)
				}
				nonEmpty = true
				continue
			}
		case c == ';':
			if nonEmpty {
				out = append(out, strings.TrimSpace(sql[start:i]))
			}
			nonEmpty = false
			i++
			start = i
			continue
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' {
			nonEmpty = true
		}
		i++
	}
	if nonEmpty {
		out = append(out, strings.TrimSpace(sql[start:]))
	}
	return out
}

// skipQuoted returns the index after the quoted token starting at i. A doubled quote
// is an escaped quote; with backslash (E'…') a backslash escapes the next byte.
func skipQuoted(s string, i int, q byte, backslash bool) int {
	i++
	for i < len(s) {
		switch {
		case backslash && s[i] == '\\':
			i += 2
		case s[i] == q:
			if i+1 < len(s) && s[i+1] == q {
				i += 2
				continue
			}
			return i + 1
		default:
			i++
		}
	}
	return len(s)
}

// dollarTag reads a dollar-quote opener ($$ or $tag$) at i. `$1` (a parameter) is not
// one: a tag cannot start with a digit.
func dollarTag(s string, i int) (string, bool) {
	if i > 0 && isIdentByte(s[i-1]) {
		return "", false // part of an identifier such as a$b
	}
	j := i + 1
	for j < len(s) && s[j] != '$' {
		c := s[j]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 || (j > i+1 && c >= '0' && c <= '9')) {
			return "", false
		}
		j++
	}
	if j >= len(s) {
		return "", false
	}
	return s[i : j+1], true
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
