package jsonx

import (
	"log/slog"
	"math"
	"reflect"
	"testing"
	"time"
)

func TestDecodeKeepsIntegersExact(t *testing.T) {
	// R-T10: ids above 2^53 survive a round trip; integral values stay int64.
	big := int64(1)<<62 + 7
	v, err := Decode([]byte(`{"id": 4611686018427387911, "n": 3, "f": 2.5, "e": 1e3, "l": [1, "00123", null, true]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if m["id"] != big {
		t.Fatalf("id = %#v, want %d", m["id"], big)
	}
	if m["n"] != int64(3) || m["f"] != 2.5 || m["e"] != 1000.0 {
		t.Fatalf("numbers = %#v %#v %#v", m["n"], m["f"], m["e"])
	}
	want := []any{int64(1), "00123", nil, true}
	if !reflect.DeepEqual(m["l"], want) {
		t.Fatalf("list = %#v", m["l"])
	}
	out, _ := Marshal(v)
	if string(out) != `{"e":1000,"f":2.5,"id":4611686018427387911,"l":[1,"00123",null,true],"n":3}` {
		t.Fatalf("canonical = %s", out)
	}
}

func TestDecodeRejectsTrailingData(t *testing.T) {
	for _, in := range []string{`{} {}`, `[1] x`, `{"a":`} {
		if _, err := Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%q) = nil error", in)
		}
	}
}

func TestDecodeObject(t *testing.T) {
	if m, err := DecodeObject([]byte(`null`)); err != nil || len(m) != 0 {
		t.Fatalf("null: %v %v", m, err)
	}
	if _, err := DecodeObject([]byte(`[1]`)); err == nil || err.Error() != "expected a JSON object, got array" {
		t.Fatalf("array: %v", err)
	}
}

func TestNormalize(t *testing.T) {
	in := map[string]any{
		"a": 1, "b": uint64(math.MaxUint64), "c": float32(1.5), "d": map[any]any{1: "x"},
		"e": []string{"s"}, "f": struct{ X int }{2},
	}
	got := Normalize(in)
	want := map[string]any{
		"a": int64(1), "b": float64(math.MaxUint64), "c": 1.5, "d": map[string]any{"1": "x"},
		"e": []any{"s"}, "f": map[string]any{"X": int64(2)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Normalize = %#v", got)
	}
}

// TestNormalizeNumberTypes: Go's integer and float types become int64 or
// float64 (GoNumber); a named number type keeps its own JSON form.
func TestNormalizeNumberTypes(t *testing.T) {
	for _, c := range []struct{ in, want any }{
		{int8(-3), int64(-3)}, {uint(3), int64(3)}, {uint16(7), int64(7)}, {float32(1.5), 1.5},
		{uint64(math.MaxUint64), float64(math.MaxUint64)},
		{time.Second, int64(time.Second)}, // no JSON form of its own: a number
		{slog.LevelWarn, "WARN"},          // its MarshalJSON's
	} {
		if got := Normalize(c.in); got != c.want {
			t.Errorf("Normalize(%T %v) = %T %v, want %T %v", c.in, c.in, got, got, c.want, c.want)
		}
	}
}

func TestMarshalDoesNotEscapeHTML(t *testing.T) {
	b, err := Marshal(map[string]any{"q": "a<b>&c"})
	if err != nil || string(b) != `{"q":"a<b>&c"}` {
		t.Fatalf("%s %v", b, err)
	}
}

func TestCloneIsDeep(t *testing.T) {
	orig := map[string]any{"l": []any{map[string]any{"x": int64(1)}}}
	c := Clone(orig).(map[string]any)
	c["l"].([]any)[0].(map[string]any)["x"] = int64(2)
	if orig["l"].([]any)[0].(map[string]any)["x"] != int64(1) {
		t.Fatal("Clone shares nested maps")
	}
}

func TestInt(t *testing.T) {
	for _, c := range []struct {
		v    any
		want int
	}{{int64(3), 3}, {3, 3}, {2.9, 2}, {"3", 0}, {nil, 0}, {true, 0}, {map[string]any{}, 0}} {
		if got := Int(c.v); got != c.want {
			t.Errorf("Int(%#v) = %d, want %d", c.v, got, c.want)
		}
	}
}
