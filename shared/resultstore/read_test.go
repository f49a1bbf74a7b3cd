package resultstore_test

import (
	"context"
	"errors"
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
	for _, want := range []string{uri, "resultstore.MaxDecodedBytes (134217728 bytes, 128 MiB)", "return fewer, larger values", "write large data elsewhere"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %q", err, want)
		}
	}
	if built.Offset > len(tiny)/2 {
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
	// Shown only up to a size: over it nothing is decoded.
	if v, ok, err := resultstore.ReadJSONUpTo(ctx, st, uri, 7, 1<<20); ok || v != nil || err != nil {
		t.Errorf("ReadJSONUpTo over its size: %v, %v, %v; want not ok, no error", v, ok, err)
	}
	if v, ok, err := resultstore.ReadJSONUpTo(ctx, st, uri+"#/data", 7, 61_000_000); !ok || err != nil || v != big {
		t.Errorf("ReadJSONUpTo under its size: ok %v, %v", ok, err)
	}
}
