package ids

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/jsonx"
)

func TestComposeRoundTrip(t *testing.T) {
	cases := []struct {
		seq   int64
		shard int
	}{{1, 0}, {1, 1023}, {42, 7}, {MaxSeq, 0}, {MaxSeq, MaxShards - 1}, {1 << 40, 512}}
	for _, c := range cases {
		id := Compose(c.seq, c.shard)
		if id <= 0 {
			t.Fatalf("Compose(%d, %d) = %d, want positive", c.seq, c.shard, id)
		}
		if got := ShardOf(id); got != c.shard {
			t.Errorf("ShardOf(Compose(%d, %d)) = %d", c.seq, c.shard, got)
		}
		if got := id >> ShardBits; got != c.seq {
			t.Errorf("seq of (Compose(%d, %d)) = %d", c.seq, c.shard, got)
		}
	}
	if got := Compose(3, 5); got != 3<<10|5 {
		t.Errorf("Compose(3, 5) = %d, want %d", got, 3<<10|5)
	}
	if MaxShards != 1024 {
		t.Errorf("MaxShards = %d, want 1024", MaxShards)
	}
}

func TestComposePanicsOnBugs(t *testing.T) {
	for _, c := range []struct {
		seq   int64
		shard int
	}{{0, 0}, {-1, 0}, {MaxSeq + 1, 0}, {1, -1}, {1, MaxShards}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Compose(%d, %d) did not panic", c.seq, c.shard)
				}
			}()
			Compose(c.seq, c.shard)
		}()
	}
}

func TestParseAccepts(t *testing.T) {
	big := Compose(MaxSeq, 1023) // above 2^53: must survive as int64 and as string
	cases := []struct {
		in   any
		want int64
	}{
		{int64(5), 5},
		{5, 5},
		{int32(5), 5},
		{uint64(5), 5},
		{float64(1024), 1024},
		{float32(7), 7},
		{json.Number("123"), 123},
		{json.Number("1e3"), 1000},
		{"987654321", 987654321},
		{Format(big), big},
		{big, big},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if err != nil {
			t.Errorf("Parse(%#v) error: %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("Parse(%#v) = %d, want %d", c.in, got, c.want)
		}
	}
}

func TestParseFromJSONDocument(t *testing.T) {
	v, err := jsonx.Decode([]byte(`{"a": 9007199254740993, "b": "9007199254740993", "c": 1.5, "d": [1]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	for _, k := range []string{"a", "b"} {
		got, err := Parse(m[k])
		if err != nil || got != 9007199254740993 {
			t.Errorf("Parse(%s) = %d, %v; want 9007199254740993", k, got, err)
		}
	}
	for _, k := range []string{"c", "d"} {
		if _, err := Parse(m[k]); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%s) error = %v, want ErrInvalid", k, err)
		}
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		in      any
		message string // a fragment the message must contain
	}{
		{[]any{int64(1)}, "got array"},
		{map[string]any{"id": int64(1)}, "got object"},
		{nil, "got null"},
		{true, "got boolean"},
		{1.5, "integer"},
		{math.NaN(), "integer"},
		{math.Inf(1), "integer"},
		{json.Number("1.5"), "integer"},
		{"abc", `got "abc"`},
		{"12a", `got "12a"`},
		{" 12", `got " 12"`},
		{"1.0", `got "1.0"`},
		{"", "empty string"},
		{"-5", "positive"},
		{"0", "positive"},
		{int64(0), "positive"},
		{int64(-3), "positive"},
		{-2.0, "positive"},
		{"99999999999999999999", "out of range"},
		{float64(1 << 63), "out of range"},
		{uint64(math.MaxUint64), "out of range"},
		{struct{}{}, "got struct {}"},
	}
	for _, c := range cases {
		_, err := Parse(c.in)
		if err == nil {
			t.Errorf("Parse(%#v) accepted", c.in)
			continue
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%#v) error %v does not match ErrInvalid", c.in, err)
		}
		if !strings.Contains(err.Error(), c.message) {
			t.Errorf("Parse(%#v) error %q does not mention %q", c.in, err, c.message)
		}
		// Usable after a field name: no prefix of its own.
		if full := fmt.Sprintf("execution_id: %v", err); strings.Contains(full, "invalid id") {
			t.Errorf("message carries its own prefix: %q", full)
		}
	}
}

func TestFormat(t *testing.T) {
	if got := Format(Compose(MaxSeq, 1)); got != "9223372036854774785" {
		t.Errorf("Format = %s", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "abc", "9223372036854775807", "9223372036854775808", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) error %v not ErrInvalid", s, err)
			}
			return
		}
		if id <= 0 {
			t.Fatalf("Parse(%q) = %d, not positive", s, id)
		}
		if Format(id) != strings.TrimLeft(s, "0") {
			t.Fatalf("Parse(%q) = %d does not round-trip", s, id)
		}
	})
}
