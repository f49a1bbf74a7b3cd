package engine

import (
	"encoding/json"
	"maps"
	"reflect"
	"testing"
	"time"
)

// TestStepUnchangedSeesEveryField: a change to any field of a step's state,
// however deep, makes stepUnchanged answer false, so Encode writes the step
// afresh. The fields are found by reflection: a field added to StepState (or
// to what it holds) is checked without editing this test, and fails it until
// stepUnchanged compares it.
func TestStepUnchangedSeesEveryField(t *testing.T) {
	result, arcs, set := map[string]any{"r": int64(1)}, map[string]any{"a": "x"}, map[string]any{"s": true}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	base := func() *StepState {
		return &StepState{Status: StepRunning, Visits: 2, Attempts: 1, Bound: true, Result: result,
			ResultRef: &ResultKey{Kind: KindStepResult, Step: "s", Visit: 1, Index: 2, URI: "u"}, ResultURI: "r",
			Error: "e", EnterSeq: 9, EnteredAt: at, ExitedAt: at.Add(time.Second),
			Ledger: []FiredArc{{From: "a", Set: set}},
			Visit: &Visit{N: 2, ArcSet: arcs, InFlight: 1, Loop: &LoopState{Total: 3, Iterator: "i", Issued: 2, Done: 1,
				Failed: 1, Limit: 2, Cursor: true, Claiming: true, Drained: true, ClaimTxid: "t", Kept: []int{0}}},
			Kept: &KeptIterations{Visit: 1, Indexes: []int{0}}}
	}
	if !stepUnchanged(base(), base()) {
		t.Fatal("two equal states (the same JSON values) count as changed")
	}
	leaves := walkLeaves(reflect.ValueOf(base()).Elem(), "StepState", -1)
	if leaves < 30 {
		t.Fatalf("found %d fields: the walk missed some", leaves)
	}
	for i := range leaves {
		b := base()
		var path string
		walkLeaves(reflect.ValueOf(b).Elem(), "StepState", i, &path)
		if stepUnchanged(base(), b) {
			t.Errorf("changing %s is not seen", path)
		}
	}
}

// walkLeaves counts the fields under v; the n-th (n ≥ 0) it changes, and
// names it in *path.
func walkLeaves(v reflect.Value, name string, n int, path ...*string) int {
	count := 0
	var walk func(v reflect.Value, name string)
	leaf := func(v reflect.Value, name string) {
		if count == n {
			mutate(v)
			*path[0] = name
		}
		count++
	}
	walk = func(v reflect.Value, name string) {
		switch {
		case v.Type() == reflect.TypeFor[time.Time]():
			leaf(v, name)
		case v.Kind() == reflect.Struct:
			for i := range v.NumField() {
				walk(v.Field(i), name+"."+v.Type().Field(i).Name)
			}
		case v.Kind() == reflect.Pointer:
			leaf(v, name+" (nil)")
			if !v.IsNil() {
				walk(v.Elem(), name)
			}
		case v.Kind() == reflect.Slice:
			leaf(v, name+" (longer)")
			for i := range v.Len() {
				walk(v.Index(i), name+"[i]")
			}
		default:
			leaf(v, name)
		}
	}
	walk(v, name)
	return count
}

func mutate(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.Zero(v.Type()))
	case reflect.Slice:
		v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Map:
		// The same content in another map: values are compared by identity.
		v.Set(reflect.ValueOf(maps.Clone(v.Interface().(map[string]any))))
	case reflect.Interface:
		v.Set(reflect.ValueOf(map[string]any{"other": true}))
	case reflect.Struct: // time.Time
		v.Set(reflect.ValueOf(v.Interface().(time.Time).Add(time.Nanosecond)))
	default:
		panic("mutate: no change for " + v.Type().String())
	}
}

// TestSameValue: scalars compare by value, maps and lists by identity, and
// what it does not know counts as changed.
func TestSameValue(t *testing.T) {
	m, l := map[string]any{"a": int64(1)}, []any{"x"}
	for _, c := range []struct {
		a, b any
		same bool
	}{
		{nil, nil, true}, {"a", "a", true}, {int64(1), int64(1), true}, {1.5, 1.5, true}, {true, true, true},
		{json.Number("1"), json.Number("1"), true}, {m, m, true}, {l, l, true},
		{nil, "a", false}, {"a", nil, false}, {int64(1), 1.0, false}, {"a", "b", false},
		{m, maps.Clone(m), false}, {l, []any{"x"}, false}, {l, l[:0], false},
		{map[string]any(nil), map[string]any{}, false}, {[]any(nil), []any{}, false},
		{[]string{"x"}, []string{"x"}, false}, // not a decoded JSON value: written afresh
	} {
		if got := sameValue(c.a, c.b); got != c.same {
			t.Errorf("sameValue(%#v, %#v) = %v", c.a, c.b, got)
		}
	}
}
