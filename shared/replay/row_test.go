package replay

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"
)

func TestReadRowsKeepsIntegersExact(t *testing.T) {
	in := `[
	 {"event_id": 9007199254740993, "event_type": "command.issued", "command_id": 9007199254740995,
	  "meta": {"command_id": 9007199254740995, "attempt": 1}, "result": {"status": "ok", "context": {"n": 12345678901234567}}},
	 {"seq": 7, "event_id": "9223372036854775807", "event_type": "command.completed", "command_id": "c-1",
	  "stage_id": 12, "status": null, "created_at": "2026-01-02T03:04:05.123Z", "extra_column": [1,2]}
	]`
	var rows []Row
	if err := ReadRows(strings.NewReader(in), func(r Row) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows", len(rows))
	}
	r0, r1 := rows[0], rows[1]
	if r0.Seq != 1 || r0.EventID != 9007199254740993 || r0.CommandID != "9007199254740995" {
		t.Errorf("row 0: seq %d id %d command %q", r0.Seq, r0.EventID, r0.CommandID)
	}
	if r0.Meta["command_id"] != int64(9007199254740995) {
		t.Errorf("meta.command_id = %#v", r0.Meta["command_id"])
	}
	if n := r0.Result.(map[string]any)["context"].(map[string]any)["n"]; n != int64(12345678901234567) {
		t.Errorf("nested integer = %#v", n)
	}
	if r1.Seq != 7 || r1.EventID != 9223372036854775807 || r1.StageID != "12" || r1.Status != "" ||
		!r1.CreatedAt.Equal(time.Date(2026, 1, 2, 3, 4, 5, 123e6, time.UTC)) {
		t.Errorf("row 1: %+v", r1)
	}
}

func TestReadRowsErrors(t *testing.T) {
	cases := map[string]string{
		`{"event_id": 1}`:                    "expected a JSON array",
		`[{"event_id": 1.5}]`:                "row 1: event_id",
		`[{"event_id": "x"}]`:                "row 1: event_id",
		`[{"event_id": 1}, 3]`:               "row 2: expected a JSON object",
		`[{"meta": [1]}]`:                    "row 1: meta",
		`[{"created_at": "yesterday"}]`:      "row 1: created_at",
		`[{"event_type": {"a": 1}}]`:         "row 1: event_type",
		`[{"event_id": 1}] [{"event_id":2}]`: "unexpected data after the array",
		`[{"event_id": 1}`:                   "read rows",
	}
	for in, want := range cases {
		err := ReadRows(strings.NewReader(in), func(Row) error { return nil })
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want it to mention %q", in, err, want)
		}
	}
}

// endlessRows is an io.Reader over a JSON array that never ends: a reader
// that tried to load the whole array could never return.
type endlessRows struct {
	n   int
	buf []byte
}

func (e *endlessRows) Read(p []byte) (int, error) {
	if len(e.buf) == 0 {
		if e.n == 0 {
			e.buf = []byte("[")
		}
		e.n++
		e.buf = fmt.Appendf(e.buf, `{"event_id": %d, "event_type": "step.enter", "node_name": "s%d"},`, e.n, e.n%7)
	}
	k := copy(p, e.buf)
	e.buf = e.buf[k:]
	return k, nil
}

func TestReadRowsStreams(t *testing.T) {
	stop := errors.New("enough")
	f := NewFolder(Options{Projection: ProjectionExecution, Limit: 1000})
	err := ReadRows(&endlessRows{}, func(r Row) error {
		if err := f.Add(r); err != nil {
			return err
		}
		if r.Seq == 5000 {
			return stop
		}
		return nil
	})
	// The limit stops the fold at row 1001; the caller's own error at 5000
	// would have come later.
	if !errors.Is(err, ErrLimitReached) || !strings.Contains(err.Error(), "row 1001") {
		t.Fatalf("err = %v", err)
	}
	st, _ := f.State()
	if st.EventCount != 1000 || !st.Truncated || st.LastSeq != 1000 {
		t.Fatalf("count %d truncated %v last_seq %d", st.EventCount, st.Truncated, st.LastSeq)
	}
	var _ io.Reader = (*endlessRows)(nil)
}
