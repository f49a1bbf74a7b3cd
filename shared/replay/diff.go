package replay

import (
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// Change operations.
const (
	OpAdd     = "add"     // the path exists only in the later state
	OpRemove  = "remove"  // the path exists only in the earlier state
	OpReplace = "replace" // the value at the path differs
)

// Change is one difference between two replay states. Path is a JSON Pointer
// (RFC 6901: "/commands/9001/status", '/' in keys written "~1"), so keys such
// as business object "customer/c-99" stay unambiguous. Before is unset for
// OpAdd and After for OpRemove; a JSON null is a value, not an absence.
type Change struct {
	Op     string
	Path   string
	Before any
	After  any
}

// MarshalJSON writes {op, path, before?, after?} canonically.
func (c Change) MarshalJSON() ([]byte, error) {
	m := map[string]any{"op": c.Op, "path": c.Path}
	if c.Op != OpAdd {
		m["before"] = c.Before
	}
	if c.Op != OpRemove {
		m["after"] = c.After
	}
	return jsonx.Marshal(m)
}

// Diff reports what changed from a to b (diff_from: a is the earlier
// cutoff), ignoring the checksum fields. A nil state is an empty document.
// The order is deterministic: object keys sorted at every level, array
// elements by index. A subtree present on one side only is one change, not
// one per leaf.
func Diff(a, b *State) []Change {
	var out []Change
	diffValue("", bodyOf(a), bodyOf(b), &out)
	return out
}

func bodyOf(s *State) map[string]any {
	if s == nil {
		return map[string]any{}
	}
	return s.body()
}

func diffValue(path string, a, b any, out *[]Change) {
	switch x := a.(type) {
	case map[string]any:
		if y, ok := b.(map[string]any); ok {
			diffObject(path, x, y, out)
			return
		}
	case []any:
		if y, ok := b.([]any); ok {
			diffArray(path, x, y, out)
			return
		}
	}
	if !reflect.DeepEqual(a, b) {
		*out = append(*out, Change{Op: OpReplace, Path: path, Before: jsonx.Clone(a), After: jsonx.Clone(b)})
	}
}

func diffObject(path string, a, b map[string]any, out *[]Change) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := path + "/" + escapePointer(k)
		av, inA := a[k]
		bv, inB := b[k]
		switch {
		case !inA:
			*out = append(*out, Change{Op: OpAdd, Path: p, After: jsonx.Clone(bv)})
		case !inB:
			*out = append(*out, Change{Op: OpRemove, Path: p, Before: jsonx.Clone(av)})
		default:
			diffValue(p, av, bv, out)
		}
	}
}

func diffArray(path string, a, b []any, out *[]Change) {
	for i := range max(len(a), len(b)) {
		p := path + "/" + strconv.Itoa(i)
		switch {
		case i >= len(a):
			*out = append(*out, Change{Op: OpAdd, Path: p, After: jsonx.Clone(b[i])})
		case i >= len(b):
			*out = append(*out, Change{Op: OpRemove, Path: p, Before: jsonx.Clone(a[i])})
		default:
			diffValue(p, a[i], b[i], out)
		}
	}
}

func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
