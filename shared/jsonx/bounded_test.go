package jsonx

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeWithinRefusesManyTinyValues: text of many small values is
// refused once its estimate passes the bound, having read a fraction of it
// and built nothing (counted in allocations), naming the bound.
func TestDecodeWithinRefusesManyTinyValues(t *testing.T) {
	data := []byte("[" + strings.TrimSuffix(strings.Repeat(`{},[1],"a",`, 400_000), ",") + "]") // 4.4 MB, 1.2 M values
	const max = 1 << 20
	var err error
	allocs := testing.AllocsPerRun(3, func() { _, err = DecodeWithin(data, max) })
	var be *BuildError
	if !errors.As(err, &be) || be.Max != max || !strings.Contains(err.Error(), "more than 1048576 bytes") {
		t.Fatalf("DecodeWithin: %v, want a BuildError naming the bound of %d bytes", err, max)
	}
	if be.Offset > len(data)/20 || be.Values > 100_000 {
		t.Errorf("refused after %d values, %d of %d bytes; the walk must stop where the estimate passes the bound", be.Values, be.Offset, len(data))
	}
	if allocs > 5 {
		t.Errorf("a refusal made %.0f allocations; nothing must be built", allocs)
	}
}

// TestDecodeWithinTextNotJSON: text the estimate refuses but that is not
// JSON at all (NDJSON: one object a line) gets a syntax error, as Decode
// gives it, not a BuildError: callers that keep text that is not JSON as
// text still do. Nothing is built.
func TestDecodeWithinTextNotJSON(t *testing.T) {
	data := []byte(strings.Repeat(`{"id":1,"name":"abc"}`+"\n", 100_000)) // 2.2 MB
	var err error
	allocs := testing.AllocsPerRun(3, func() { _, err = DecodeWithin(data, 1<<20) })
	var syntax *json.SyntaxError
	var be *BuildError
	if !errors.As(err, &syntax) || errors.As(err, &be) {
		t.Fatalf("NDJSON past the bound: %v, want a json.SyntaxError (not JSON), not a BuildError", err)
	}
	if allocs > 50 { // the checker's own state; 100,000 objects would be 300,000
		t.Errorf("refusing it made %.0f allocations; nothing must be built", allocs)
	}
	// Valid JSON past the bound is still a BuildError.
	data = []byte("[" + strings.TrimSuffix(strings.Repeat(`{"id":1,"name":"abc"},`, 100_000), ",") + "]")
	if _, err := DecodeWithin(data, 1<<20); !errors.As(err, &be) {
		t.Fatalf("JSON past the bound: %v, want a BuildError", err)
	}
}

// TestDecodeWithinLargeStrings: a few large strings cost their bytes, and
// decode as Decode decodes them.
func TestDecodeWithinLargeStrings(t *testing.T) {
	big := strings.Repeat("x", 8<<20)
	data := []byte(`{"a": "` + big + `", "b": ["` + big + `"]}`)
	v, err := DecodeWithin(data, 17<<20)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := v.(map[string]any); m["a"] != big || !reflect.DeepEqual(m["b"], []any{big}) {
		t.Fatalf("decoded %d keys, want both strings whole", len(m))
	}
	if _, err := DecodeWithin(data, 16<<20); err == nil {
		t.Fatal("16 MiB of strings decoded within 16 MiB; the strings' bytes count")
	}
}

// TestBuildEstimateCoversStrings: the estimate is at least the bytes of the
// decoded strings, whatever expands in decoding (each invalid UTF-8 byte
// becomes three), and DecodeWithin decodes, within a bound it fits, exactly
// what Decode decodes.
func TestBuildEstimateCoversStrings(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	texts := [][]byte{[]byte(`"` + strings.Repeat("\xff", 1000) + `"`), []byte(`{"\xfe\xfe": "\u00e9\ud83d\ude00\\\"x"}`)}
	for range 2000 {
		b, err := Marshal(randomValue(r, 0))
		if err == nil {
			texts = append(texts, b)
		}
	}
	for _, data := range texts {
		want, err := Decode(data)
		if err != nil {
			continue
		}
		est, err := checkBuild(data, math.MaxInt64)
		if err != nil || est < stringBytes(want) {
			t.Fatalf("%.80q: estimate %d, %v; its strings alone hold %d bytes", data, est, err, stringBytes(want))
		}
		got, err := DecodeWithin(data, est)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%.80q within its estimate: %v, %v; want %v", data, got, err, want)
		}
		if est > 0 {
			if _, err := DecodeWithin(data, est-1); err == nil {
				t.Fatalf("%.80q decoded within one byte less than its estimate", data)
			}
		}
	}
	if est, _ := checkBuild([]byte(`"`+strings.Repeat("\xff", 1000)+`"`), math.MaxInt64); est < 3000 {
		t.Errorf("1000 invalid bytes estimated at %d; they decode to 3000", est)
	}
}

// stringBytes is the bytes of v's strings, keys included.
func stringBytes(v any) int64 {
	switch x := v.(type) {
	case string:
		return int64(len(x))
	case []any:
		var n int64
		for _, e := range x {
			n += stringBytes(e)
		}
		return n
	case map[string]any:
		var n int64
		for k, e := range x {
			n += int64(len(k)) + stringBytes(e)
		}
		return n
	}
	return 0
}
