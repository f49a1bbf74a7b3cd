package worker

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/wire"
)

// TestLoadReferencesOfRows: a step reads a result of 600,000 rows of two
// short columns (16 MB of JSON; an estimate of 306 MiB, past the server's
// resultstore.MaxDecodedBytes) that an earlier step stored: the worker loads
// it within its own bound. 66 MB of `[{},…]` (1.6 GiB by the estimate) fails
// the load naming resultstore.WorkerMaxDecodedBytes.
func TestLoadReferencesOfRows(t *testing.T) {
	ctx := context.Background()
	st, err := resultstore.Open(ctx, "file://"+t.TempDir(), resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const rows = 600_000
	text := "[" + strings.Repeat(`{"id":100000,"name":"abc"},`, rows-1) + `{"id":100001,"name":"abc"}]`
	uri, err := st.Put(ctx, "7/rows.json", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{cfg: Config{Results: st}}
	cmd := &wire.Command{ExecutionID: 7, Context: wire.Object{"render_context": map[string]any{"a": pipeline.RefMarker(uri, nil)}}}
	if err := w.loadReferences(ctx, cmd); err != nil {
		t.Fatalf("loading 600,000 rows: %v", err)
	}
	list, _ := cmd.Context["render_context"].(map[string]any)["a"].([]any)
	if len(list) != rows {
		t.Fatalf("loaded %d rows, want %d", len(list), rows)
	}
	if last, _ := list[rows-1].(map[string]any); last["id"] != int64(100001) || last["name"] != "abc" {
		t.Fatalf("the last row is %v", list[rows-1])
	}
	if _, err := resultstore.ReadJSON(ctx, st, uri, 7); !errors.Is(err, resultstore.ErrTooLarge) {
		t.Fatalf("the server read it: %v; the test needs a result past the server's bound", err)
	}

	tiny, err := st.Put(ctx, "7/tiny.json", []byte("["+strings.Repeat("{},", 21<<20)+"{}]"))
	if err != nil {
		t.Fatal(err)
	}
	cmd = &wire.Command{ExecutionID: 7, Context: wire.Object{"render_context": map[string]any{"a": pipeline.RefMarker(tiny, nil)}}}
	err = w.loadReferences(ctx, cmd)
	if !errors.Is(err, resultstore.ErrTooLarge) || !strings.Contains(err.Error(), "resultstore.WorkerMaxDecodedBytes, a worker's (1073741824 bytes, 1024 MiB)") {
		t.Fatalf("loading 66 MB of [{},…]: %v; want ErrTooLarge naming resultstore.WorkerMaxDecodedBytes", err)
	}
}
