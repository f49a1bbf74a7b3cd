package resultstore_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/resultstore"
)

// TestReadJSONBoundsDecoding: a stored result of many tiny values, small as
// text but past MaxDecodedBytes once decoded, is refused as too large
// (naming the URI, the limit and what to do), having walked a fraction of
// it and built nothing; a 60 MB result of one string, under the limit, is
// read whole.
func TestReadJSONBoundsDecoding(t *testing.T) {
	ctx := context.Background()
	st, err := resultstore.Open(ctx, "file://"+filepath.Join(t.TempDir(), "r"), resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tiny := "[" + strings.TrimSuffix(strings.Repeat("{},", 6<<20), ",") + "]" // 19 MB of text, 500 MB once built
	uri, err := st.Put(ctx, "7/tiny.json", []byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	_, err = resultstore.ReadJSON(ctx, st, uri, 7)
	var bad *resultstore.ValueError
	var built *jsonx.BuildError
	if !errors.As(err, &bad) || !errors.Is(err, resultstore.ErrTooLarge) || !errors.As(err, &built) {
		t.Fatalf("many tiny values: %v, want a ValueError wrapping ErrTooLarge", err)
	}
	for _, want := range []string{uri, "resultstore.MaxDecodedBytes, the server's (268435456 bytes, 256 MiB)", "return fewer, larger values", "write large data elsewhere"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %q", err, want)
		}
	}
	if built.Offset > len(tiny)*2/3 { // 256 MiB is 3.4 M values of {}: 10 MB of the text's 19
		t.Errorf("refused after reading %d of %d bytes; the walk must stop at the limit", built.Offset, len(tiny))
	}

	big := strings.Repeat("x", 60_000_000)
	uri, err = st.Put(ctx, "7/big.json", []byte(`{"data": "`+big+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	v, err := resultstore.ReadJSON(ctx, st, uri+"#/data", 7)
	if s, _ := v.(string); err != nil || s != big {
		t.Fatalf("a 60 MB string: %d bytes, %v; want it whole", len(s), err)
	}
}

// TestReadJSONResultsOfRows: 300,000 rows of two short columns (8 MB of
// text, an estimate of 153 MiB) are a result NoETL stores and reads back:
// read on the server and by a worker. 66 MB of `[{},…]` (1.6 GiB by the
// estimate) is refused on both, naming each bound.
func TestReadJSONResultsOfRows(t *testing.T) {
	ctx := context.Background()
	st, err := resultstore.Open(ctx, "file://"+filepath.Join(t.TempDir(), "r"), resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`{"data": {"rows": [`)
	const rows = 300_000
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%d,"name":"abc"}`, i)
	}
	b.WriteString(`]}}`)
	uri, err := st.Put(ctx, "7/rows.json", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	check := func(side string, v any, err error) {
		t.Helper()
		list, _ := v.([]any)
		if err != nil || len(list) != rows {
			t.Fatalf("%s: %d rows, %v; want all %d", side, len(list), err, rows)
		}
		if last, _ := list[rows-1].(map[string]any); last["id"] != int64(rows-1) || last["name"] != "abc" {
			t.Fatalf("%s: the last row is %v", side, list[rows-1])
		}
	}
	v, err := resultstore.ReadJSONWithin(ctx, st, uri+"#/data/rows", 7, resultstore.WorkerMaxDecodedBytes)
	check("a worker", v, err)
	v = nil
	v, err = resultstore.ReadJSON(ctx, st, uri+"#/data/rows", 7)
	check("the server", v, err)
	v = nil

	uri, err = st.Put(ctx, "7/tiny.json", []byte("["+strings.Repeat("{},", 21<<20)+"{}]"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		side string
		max  int64
		want string
	}{
		{"the server", resultstore.MaxDecodedBytes, "resultstore.MaxDecodedBytes, the server's (268435456 bytes, 256 MiB)"},
		{"a worker", resultstore.WorkerMaxDecodedBytes, "resultstore.WorkerMaxDecodedBytes, a worker's (1073741824 bytes, 1024 MiB)"},
	} {
		_, err := resultstore.ReadJSONWithin(ctx, st, uri, 7, c.max)
		var built *jsonx.BuildError
		if !errors.Is(err, resultstore.ErrTooLarge) || !errors.As(err, &built) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s, 66 MB of [{},…]: %v; want ErrTooLarge naming %s", c.side, err, c.want)
		}
	}
	if _, err := resultstore.ReadJSON(ctx, st, uri, 7); !errors.Is(err, resultstore.ErrTooLarge) {
		t.Errorf("ReadJSON, 66 MB of [{},…]: %v; want ErrTooLarge", err)
	}
}
