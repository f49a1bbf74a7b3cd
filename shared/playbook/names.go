package playbook

import (
	"fmt"
	"regexp"
	"strings"
)

// namePattern is R-T7's rule for set keys, loop iterators and pipeline labels; step
// names are free.
var namePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidName reports whether s may name a set key's part, a loop iterator or a
// pipeline label (R-T7).
func ValidName(s string) bool { return namePattern.MatchString(s) }

// ContextKey reads a key that writes the durable context (a set key, an
// execution variable): an optional ctx., iter. or step. prefix, then a dotted
// path whose parts match namePattern (R-T9) and whose first part is not a
// reserved name (R-T7). It returns the path in ctx.
func ContextKey(key string) (string, error) {
	path := key
	for _, prefix := range []string{"ctx.", "iter.", "step."} {
		if strings.HasPrefix(path, prefix) {
			path = strings.TrimPrefix(path, prefix)
			break
		}
	}
	parts := strings.Split(path, ".")
	for _, part := range parts {
		if !namePattern.MatchString(part) {
			return "", fmt.Errorf("%q: each part of the path must match [A-Za-z_][A-Za-z0-9_]* (R-T9)", key)
		}
	}
	if reservedNames[parts[0]] {
		return "", fmt.Errorf("%q writes the reserved name %q (R-T7)", key, parts[0])
	}
	return path, nil
}

// reservedNames are bindings the engine provides to templates (R-T7).
var reservedNames = map[string]bool{
	"workload": true, "ctx": true, "steps": true, "iter": true, "output": true, "error": true,
	"execution_id": true, "catalog_id": true, "playbook_path": true, "_index": true, "_total": true,
}

// Reserved reports whether name is a binding the engine provides to templates,
// which a playbook may not write or bind (R-T7).
func Reserved(name string) bool { return reservedNames[name] }
