package jsonx

import (
	"fmt"
	"strconv"
	"strings"
)

// Pointer returns the value a JSON Pointer (RFC 6901: "" is the whole value,
// "/a/0/b" a path, ~1 and ~0 escape / and ~) names inside v.
func Pointer(v any, ptr string) (any, error) {
	if ptr == "" {
		return v, nil
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, fmt.Errorf("JSON pointer %q must start with /", ptr)
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[tok]
			if !ok {
				return nil, fmt.Errorf("JSON pointer %q: no member %q", ptr, tok)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("JSON pointer %q: no element %q", ptr, tok)
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("JSON pointer %q: %q reaches into %s", ptr, tok, TypeName(v))
		}
	}
	return v, nil
}
