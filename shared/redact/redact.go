// Package redact owns the secret rules, so each is written once:
//
//   - the key and shape rule (Value, SecretKey, SecretString): values under
//     secret-named keys and strings shaped like credentials become Mask. It
//     matches whole key names and recognisable shapes, not substrings:
//     NoETL's substring and long-string rules destroy fields like author,
//     max_tokens and every sha256 digest. Worker-supplied results and meta
//     get it before they are stored (events.md §7); the API applies it to
//     everything it serves to users.
//   - the value rule (Masker, Secrets): registered secret strings are
//     replaced wherever they appear, as CI systems mask registered secrets.
//     A worker registers what it resolved for a step and masks its reports
//     with it; the API registers an execution's secret workload values.
//   - LogHandler applies both to log records.
package redact

import (
	"regexp"
	"slices"
	"strings"
)

// Mask replaces a secret value.
const Mask = "[REDACTED]"

// secretKeys are key names (case-insensitive, '-' read as '_') whose values are
// secrets, alone or as the last part of a name (db_password, x_api_key).
var secretKeys = []string{
	"password", "passwd", "secret", "token", "api_key", "apikey", "access_token", "refresh_token",
	"authorization", "private_key", "client_secret", "connection_string", "passphrase",
}

var (
	jwtPattern = regexp.MustCompile(`^eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$`)
	pemPattern = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)
)

// SecretKey reports whether a key names a secret.
func SecretKey(key string) bool {
	k := strings.ReplaceAll(strings.ToLower(key), "-", "_")
	for _, s := range secretKeys {
		if k == s || strings.HasSuffix(k, s) && k[len(k)-len(s)-1] == '_' { // no "_"+s built per key
			return true
		}
	}
	return false
}

// SecretString reports whether a string value looks like a credential whatever
// its key: a bearer or basic authorization value, a JWT, or a PEM private key.
func SecretString(s string) bool {
	return strings.HasPrefix(s, "Bearer ") || strings.HasPrefix(s, "Basic ") ||
		jwtPattern.MatchString(s) || pemPattern.MatchString(s)
}

// Value returns v with secrets masked. It copies only what it changes; v is never
// modified.
func Value(v any) any {
	out, _ := walk(v)
	return out
}

// walk returns the redacted value and whether anything changed.
func walk(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		if SecretString(x) {
			return Mask, true
		}
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			var nv any
			changed := false
			if SecretKey(k) && e != nil {
				if s, ok := e.(string); !ok || s != Mask {
					nv, changed = Mask, true
				}
			} else {
				nv, changed = walk(e)
			}
			if changed {
				if out == nil {
					out = make(map[string]any, len(x))
					for k2, e2 := range x {
						out[k2] = e2
					}
				}
				out[k] = nv
			}
		}
		if out != nil {
			return out, true
		}
	case []any:
		return walkList(x, walk)
	}
	return v, false
}

// walkList applies walk to each element, copying x only when one changed.
func walkList(x []any, walk func(any) (any, bool)) (any, bool) {
	var out []any
	for i, e := range x {
		if nv, changed := walk(e); changed {
			if out == nil {
				out = slices.Clone(x)
			}
			out[i] = nv
		}
	}
	if out == nil {
		return x, false
	}
	return out, true
}
