package engine

import (
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// setPathOnce is a path written as the fold wrote it before pathWriter: a
// copy of every map along the path, one path at a time.
func setPathOnce(m map[string]any, path string, v any) map[string]any {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]any{}
	}
	head, rest, nested := strings.Cut(path, ".")
	if !nested {
		out[head] = v
		return out
	}
	child, _ := out[head].(map[string]any)
	out[head] = setPathOnce(child, rest, v)
	return out
}

// TestPathWriterWritesAsOnePathAtATime: a ctx.updated writes its values as
// writing them one at a time did, and changes none of the maps it was given
// (the context before, a value that is a map, a map inside one).
func TestPathWriterWritesAsOnePathAtATime(t *testing.T) {
	inner := map[string]any{"y": int64(1)}
	for i, values := range []map[string]any{
		{"a": int64(1)},
		{"a": int64(1), "b": "x", "c.d": true},
		{"n.x": int64(2), "n.z": int64(3)},
		{"n": map[string]any{"q": int64(1)}, "n.r": int64(2)},
		{"n.x": int64(2), "n": "flat", "n.y": int64(3)},
		{"m": inner, "m.y": int64(5), "m.w.v": int64(6), "n.x.y": int64(7)},
		{"n.x": inner, "n.x.y": int64(8), "n.x.z": int64(9), "s.t": int64(1)},
		{"a..b": int64(1), "a.": int64(2), ".c": int64(3)},
	} {
		ctx := map[string]any{"a": int64(0), "n": map[string]any{"x": int64(1), "deep": map[string]any{"k": "v"}}, "s": "str"}
		before := fmt.Sprint(ctx, values, inner)
		want := ctx
		for _, k := range slices.Sorted(maps.Keys(values)) {
			want = setPathOnce(want, k, values[k])
		}
		s := NewSnapshot()
		s.Ctx = ctx
		Apply(s, Event{Type: "ctx.updated", Context: map[string]any{"values": values}})
		if !reflect.DeepEqual(s.Ctx, want) {
			t.Errorf("%d: %v\nwritten %v\nwant    %v", i, values, s.Ctx, want)
		}
		if after := fmt.Sprint(ctx, values, inner); after != before {
			t.Errorf("%d: a map given was changed:\nbefore %s\nafter  %s", i, before, after)
		}
	}
}

// TestSetBlockCostsItsKeys: a ctx.updated of n keys allocates in proportion
// to n, not n² (each key copied the whole context: a set of 4,000 keys took
// 1.2 s and 519 MB).
func TestSetBlockCostsItsKeys(t *testing.T) {
	allocated := func(n int) float64 {
		values := map[string]any{}
		for i := range n {
			values[fmt.Sprintf("k%d", i)] = int64(i)
		}
		ev := Event{Type: "ctx.updated", Context: map[string]any{"values": values}}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		Apply(NewSnapshot(), ev)
		runtime.ReadMemStats(&after)
		return float64(after.TotalAlloc - before.TotalAlloc)
	}
	small, big := allocated(500), allocated(2000)
	if ratio := float64(big) / float64(small); ratio > 8 {
		t.Errorf("a set of 2000 keys allocated %.1f times what 500 did (%.0f and %.0f bytes): each key copies the context", ratio, big, small)
	}
}
