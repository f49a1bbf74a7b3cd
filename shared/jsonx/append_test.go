package jsonx

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// reference is encoding/json's encoding, as Marshal wrote before AppendValue.
func reference(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// tricky are strings every escape rule of encoding/json has to get right.
var tricky = []string{"", "plain", `quo"te`, `back\slash`, "\b\f\n\r\t", "\x00\x01\x1f\x7f", "<a href='x'>&amp;</a>",
	"é ü 日本 🚀", "\u2028\u2029", "bad \xff\xfe utf8", "half \xe2\x82", strings.Repeat("x", 300)}

func randomValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(14); {
	case n == 0:
		return nil
	case n == 1:
		return r.IntN(2) == 0
	case n == 2:
		return r.Int64() - r.Int64()
	case n == 3:
		return []float64{0, math.Copysign(0, -1), 1e-7, 1e-6, 1e21, 1e20, -2.5e-9, 123.456, 1.0 / 3, math.MaxFloat64, math.SmallestNonzeroFloat64}[r.IntN(11)]
	case n == 4:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
	case n <= 7:
		return tricky[r.IntN(len(tricky))]
	case n == 8:
		return []string{tricky[r.IntN(len(tricky))], "b"}
	case n == 9:
		return map[string]string{"k": "v", "<": ">"} // not the convention: encoding/json writes it
	case depth > 3:
		return int64(r.IntN(10))
	case n <= 11:
		if r.IntN(8) == 0 {
			return map[string]any(nil)
		}
		m := map[string]any{}
		for range r.IntN(5) {
			m[tricky[r.IntN(len(tricky))]+string(rune('a'+r.IntN(26)))] = randomValue(r, depth+1)
		}
		return m
	default:
		var l []any
		if r.IntN(8) != 0 {
			l = []any{}
		}
		for range r.IntN(5) {
			l = append(l, randomValue(r, depth+1))
		}
		return l
	}
}

// TestAppendValueMatchesEncodingJSON: the direct encoding writes every value
// byte for byte as encoding/json did, so stored snapshots, event rows and
// replay checksums are unchanged.
func TestAppendValueMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		v := randomValue(r, 0)
		want, werr := reference(v)
		got, gerr := AppendValue(nil, v)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("value %d %#v:\n got %s %v\nwant %s %v", i, v, got, gerr, want, werr)
		}
	}
	for _, v := range []any{math.NaN(), math.Inf(1), []any{1.5, math.Inf(-1)}} {
		if _, err := AppendValue(nil, v); err == nil {
			t.Errorf("%v encoded; encoding/json refuses it", v)
		}
	}
}

func TestAppendTimeMatchesEncodingJSON(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2026, 11, 24, 13, 44, 39, 461685000, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC), time.Date(2026, 6, 1, 12, 0, 0, 120000000, time.FixedZone("x", 5*3600+1800)),
		time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		want, werr := reference(tm)
		got, gerr := AppendTime(nil, tm)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Errorf("%v: got %s %v, want %s %v", tm, got, gerr, want, werr)
		}
	}
}

// FuzzAppendValue: any JSON the API could decode is re-encoded exactly as
// encoding/json would.
func FuzzAppendValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x\u2028",null,true]}`, `"\ud800"`, `[1e-7,1e21,-0]`, `{"<":{"&":[]}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Decode([]byte(s))
		if err != nil {
			return
		}
		want, werr := reference(v)
		got, gerr := AppendValue(nil, v)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("%q: got %s %v, want %s %v", s, got, gerr, want, werr)
		}
	})
}
