package replay

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
)

func mustJSON(t testing.TB, st *State) []byte {
	t.Helper()
	b, err := st.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFoldIsDeterministic(t *testing.T) {
	rows := loadParityRows(t)
	a := fold(t, Options{ExecutionID: "7"}, rows)
	b := fold(t, Options{ExecutionID: "7"}, rows)
	if !bytes.Equal(mustJSON(t, a), mustJSON(t, b)) {
		t.Fatal("same log, different bytes")
	}
	if a.Checksum != b.Checksum {
		t.Fatalf("checksums differ: %v vs %v", a.Checksum, b.Checksum)
	}
	// Taking State twice from one folder must not disturb it.
	f := NewFolder(Options{ExecutionID: "7"})
	for _, r := range rows {
		if err := f.Add(r); err != nil {
			t.Fatal(err)
		}
		if _, err := f.State(); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := f.State()
	if !bytes.Equal(mustJSON(t, a), mustJSON(t, c)) {
		t.Fatal("intermediate State calls changed the final state")
	}
}

func TestChecksumsAreSHA256OfCanonicalJSON(t *testing.T) {
	st := fold(t, Options{}, loadParityRows(t))
	hash := func(v any) string {
		sum := sha256.Sum256(jsonx.MustMarshal(v))
		return hex.EncodeToString(sum[:])
	}
	if len(st.ProjectionChecksums) != 7 {
		t.Fatalf("projection_checksums: %d entries, want 7", len(st.ProjectionChecksums))
	}
	for name, c := range st.ProjectionChecksums {
		if c.Type != "sha256" || c.Value != hash(st.Projections[name]) {
			t.Errorf("%s: checksum %v, want sha256 %s", name, c, hash(st.Projections[name]))
		}
	}
	doc := st.Document()
	delete(doc, "checksum")
	delete(doc, "projection_checksums")
	if st.Checksum.Value != hash(doc) {
		t.Errorf("top-level checksum %s, want %s", st.Checksum.Value, hash(doc))
	}
	// Pin the canonical form's shape: sorted keys, no whitespace.
	if got := string(jsonx.MustMarshal(st.Projections["loops"])); got !=
		`{"L-1":{"completed":true,"done":1,"failed":0,"last_event_id":108,"loop_id":"L-1","step_name":"iterate","total":2}}` {
		t.Errorf("canonical loops = %s", got)
	}
}

func TestCutoffFoldEqualsPrefixFold(t *testing.T) {
	rows := loadParityRows(t)
	for k := 0; k <= len(rows); k++ {
		prefix := mustJSON(t, fold(t, Options{}, rows[:k]))
		byPos := fold(t, Options{Cutoff: Cutoff{Kind: CutoffPosition, Position: int64(k)}}, rows)
		if k == 0 {
			// Position 0 is not a valid query value, but Admits must still
			// exclude every row.
			if byPos.EventCount != 0 {
				t.Fatalf("cutoff 0 folded %d events", byPos.EventCount)
			}
		}
		if !bytes.Equal(prefix, mustJSON(t, byPos)) {
			t.Fatalf("as_of_position=%d differs from the first %d rows", k, k)
		}
		if k > 0 {
			byID := fold(t, Options{Cutoff: Cutoff{Kind: CutoffEventID, EventID: rows[k-1].EventID}}, rows)
			if !bytes.Equal(prefix, mustJSON(t, byID)) {
				t.Fatalf("as_of_event_id=%d differs from the first %d rows", rows[k-1].EventID, k)
			}
		}
	}
}

func TestCutoffTimeAndStopIsSticky(t *testing.T) {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rows := loadParityRows(t)
	for i := range rows {
		rows[i].CreatedAt = base.Add(time.Duration(i) * time.Second)
	}
	f := NewFolder(Options{Cutoff: Cutoff{Kind: CutoffTime, Time: base.Add(4 * time.Second)}})
	var stopped int
	for _, r := range rows {
		err := f.Add(r)
		if errors.Is(err, ErrCutoffReached) {
			stopped++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	st, _ := f.State()
	if st.EventCount != 5 || st.LastEventID != 104 || st.Truncated {
		t.Fatalf("as_of_time: count %d last %d truncated %v, want 5, 104, false", st.EventCount, st.LastEventID, st.Truncated)
	}
	if stopped != len(rows)-5 {
		t.Fatalf("%d rows refused, want %d", stopped, len(rows)-5)
	}
}

func TestChecksumsChangeWithTheirProjection(t *testing.T) {
	rows := loadParityRows(t)
	before := fold(t, Options{}, rows[:12]) // up to stage.closed
	after := fold(t, Options{}, rows)       // + playbook.completed
	if before.ProjectionChecksums["execution"] == after.ProjectionChecksums["execution"] {
		t.Error("execution changed (RUNNING → COMPLETED) but its checksum did not")
	}
	for _, same := range []string{"stages", "frames", "commands", "business_objects", "loops", "steps"} {
		if before.ProjectionChecksums[same] != after.ProjectionChecksums[same] {
			t.Errorf("%s did not change but its checksum did", same)
		}
	}
	if before.Checksum == after.Checksum {
		t.Error("top-level checksum did not change")
	}
	// A different execution id changes the document, so the top-level checksum.
	other := fold(t, Options{ExecutionID: "other"}, rows)
	if other.Checksum == after.Checksum || other.ProjectionChecksums["execution"] != after.ProjectionChecksums["execution"] {
		t.Error("execution_id must move the top-level checksum only")
	}
}

func TestExecutionStatus(t *testing.T) {
	row := func(seq int64, typ string) Row { return Row{Seq: seq, EventID: 1000 + seq, EventType: typ} }
	cases := []struct {
		name  string
		types []string
		want  string
	}{
		{"no events", nil, StatusUnknown},
		{"legacy start", []string{"playbook_started"}, lifecycle.ExecutionRunning},
		{"dotted start", []string{"playbook.started", "step.enter"}, lifecycle.ExecutionRunning},
		{"completed", []string{"playbook.started", "playbook.completed"}, lifecycle.ExecutionCompleted},
		{"legacy completed", []string{"playbook_started", "playbook_completed"}, lifecycle.ExecutionCompleted},
		{"failed", []string{"playbook.started", "command.failed", "playbook.failed"}, lifecycle.ExecutionFailed},
		{"command failure is not execution failure", []string{"playbook.started", "command.failed"}, lifecycle.ExecutionRunning},
		{"legacy cancelled", []string{"playbook_started", "playbook_cancelled"}, lifecycle.ExecutionCancelled},
		{"terminal sticks", []string{"playbook.started", "playbook.cancelled", "step.exit"}, lifecycle.ExecutionCancelled},
		// A redrive reopens an ended execution (docs/redrive.md).
		{"redriven", []string{"playbook.started", "playbook.failed", "playbook.redriven", "step.rerouted"}, lifecycle.ExecutionRunning},
		{"redriven, then completed", []string{"playbook.started", "playbook.cancelled", "playbook.redriven", "playbook.completed"}, lifecycle.ExecutionCompleted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rows []Row
			for i, typ := range c.types {
				rows = append(rows, row(int64(i+1), typ))
			}
			if got := fold(t, Options{}, rows).ExecutionStatus(); got != c.want {
				t.Fatalf("status %q, want %q", got, c.want)
			}
		})
	}
}

// ourLoopLog is a hand-written log in our engine's event shapes
// (docs/architecture.md): a loop step "fetch" over 3 items whose second
// iteration fails once and is retried, whose third fails for good, then a
// second visit of the same step with one item, and a plain command.
func ourLoopLog() []Row {
	var rows []Row
	add := func(r Row) {
		r.Seq = int64(len(rows) + 1)
		r.EventID = 5000 + r.Seq
		rows = append(rows, r)
	}
	cmd := func(typ, status, id string, meta map[string]any) Row {
		m := map[string]any{"command_id": id, "attempt": int64(1)}
		for k, v := range meta {
			m[k] = v
		}
		return Row{EventType: typ, NodeName: "fetch", Status: status, CommandID: id, Meta: m}
	}
	issue := func(id string, visit, index, total int64) Row {
		return cmd("command.issued", "PENDING", id, map[string]any{"step": "fetch", "visit": visit,
			"tool_kind": "http", "max_attempts": int64(2), "iteration_index": index, "iteration_total": total})
	}
	add(Row{EventType: "playbook.started", Status: "STARTED", Context: map[string]any{"path": "demo"}})
	add(Row{EventType: "step.enter", NodeName: "fetch", Status: "ENTERED",
		Context: map[string]any{"visit": int64(1), "iterations_expected": int64(3), "iterator": "item"},
		Meta:    map[string]any{"visit": int64(1)}}) // seq 2
	add(issue("1:fetch:5002:i0", 1, 0, 3))                                                             // 3
	add(issue("1:fetch:5002:i1", 1, 1, 3))                                                             // 4
	add(issue("1:fetch:5002:i2", 1, 2, 3))                                                             // 5
	add(cmd("command.claimed", "CLAIMED", "1:fetch:5002:i0", nil))                                     // 6
	add(cmd("command.completed", "COMPLETED", "1:fetch:5002:i0", nil))                                 // 7
	add(cmd("command.failed", "FAILED", "1:fetch:5002:i1", map[string]any{"class": "error"}))          // 8
	add(cmd("command.retry", "PENDING", "1:fetch:5002:i1", map[string]any{"delay_seconds": int64(1)})) // 9
	add(cmd("command.completed", "success", "1:fetch:5002:i1", nil))                                   // 10
	add(cmd("command.failed", "FAILED", "1:fetch:5002:i2", nil))                                       // 11
	add(Row{EventType: "step.exit", NodeName: "fetch", Status: "FAILED",
		Context: map[string]any{"visit": int64(1)}, Meta: map[string]any{"visit": int64(1)}}) // 12
	add(Row{EventType: "step.enter", NodeName: "fetch", Status: "ENTERED",
		Context: map[string]any{"visit": int64(2), "iterations_expected": int64(1), "iterator": "item"},
		Meta:    map[string]any{"visit": int64(2)}}) // 13
	add(issue("1:fetch:5013:i0", 2, 0, 1))                             // 14
	add(cmd("command.completed", "COMPLETED", "1:fetch:5013:i0", nil)) // 15
	add(Row{EventType: "step.exit", NodeName: "fetch", Status: "COMPLETED",
		Context: map[string]any{"visit": int64(2)}, Meta: map[string]any{"visit": int64(2)}}) // 16
	// A plain (non-loop) step with one command: no loop entry.
	add(Row{EventType: "step.enter", NodeName: "report", Status: "ENTERED",
		Context: map[string]any{"visit": int64(1)}, Meta: map[string]any{"visit": int64(1)}}) // 17
	add(Row{EventType: "command.issued", NodeName: "report", Status: "PENDING", CommandID: "1:report:5017",
		Meta: map[string]any{"command_id": "1:report:5017", "step": "report", "visit": int64(1)}}) // 18
	add(Row{EventType: "command.completed", NodeName: "report", Status: "COMPLETED", CommandID: "1:report:5017",
		Meta: map[string]any{"command_id": "1:report:5017"}}) // 19
	add(Row{EventType: "playbook.failed", Status: "FAILED", Context: map[string]any{"error": "fetch failed"}}) // 20
	return rows
}

func TestOurLoops(t *testing.T) {
	rows := ourLoopLog()
	loop := func(t *testing.T, st *State, key string) map[string]any {
		t.Helper()
		l, ok := st.Projections["loops"].(map[string]any)[key].(map[string]any)
		if !ok {
			t.Fatalf("loop %q missing; loops = %s", key, jsonx.MustMarshal(st.Projections["loops"]))
		}
		return l
	}
	st := fold(t, Options{}, rows)
	loops := st.Projections["loops"].(map[string]any)
	if len(loops) != 2 {
		t.Fatalf("loops = %s, want fetch#1 and fetch#2 only", jsonx.MustMarshal(loops))
	}
	want1 := map[string]any{"loop_id": "fetch#1", "step_name": "fetch", "visit": "1", "total": int64(3),
		"done": int64(2), "failed": int64(1), "completed": true, "last_event_id": int64(5012)}
	if got := loop(t, st, "fetch#1"); !equalJSON(got, want1) {
		t.Errorf("fetch#1 = %s\nwant %s", jsonx.MustMarshal(got), jsonx.MustMarshal(want1))
	}
	want2 := map[string]any{"loop_id": "fetch#2", "step_name": "fetch", "visit": "2", "total": int64(1),
		"done": int64(1), "failed": int64(0), "completed": true, "last_event_id": int64(5016)}
	if got := loop(t, st, "fetch#2"); !equalJSON(got, want2) {
		t.Errorf("fetch#2 = %s\nwant %s", jsonx.MustMarshal(got), jsonx.MustMarshal(want2))
	}
	// R-X3: no stage or frame events in our runs → empty projections.
	if len(st.Projections["stages"].(map[string]any)) != 0 || len(st.Projections["frames"].(map[string]any)) != 0 {
		t.Error("stages/frames must stay empty for our runs")
	}
	if st.ExecutionStatus() != lifecycle.ExecutionFailed {
		t.Errorf("status %s", st.ExecutionStatus())
	}
	cmds := st.Projections["commands"].(map[string]any)
	if c := cmds["1:fetch:5002:i1"].(map[string]any); c["status"] != "success" || c["terminal_event_id"] != int64(5010) ||
		c["issued_event_id"] != int64(5004) {
		t.Errorf("retried command = %s", jsonx.MustMarshal(c))
	}

	// Mid-way (after the first failure, before the retry): not completed.
	mid := fold(t, Options{Cutoff: Cutoff{Kind: CutoffPosition, Position: 8}}, rows)
	m := loop(t, mid, "fetch#1")
	if m["done"] != int64(1) || m["failed"] != int64(1) || m["completed"] != false {
		t.Errorf("fetch#1 at seq 8 = %s", jsonx.MustMarshal(m))
	}
	// After the retry is scheduled the failure no longer counts.
	m = loop(t, fold(t, Options{Cutoff: Cutoff{Kind: CutoffPosition, Position: 9}}, rows), "fetch#1")
	if m["done"] != int64(1) || m["failed"] != int64(0) {
		t.Errorf("fetch#1 at seq 9 = %s", jsonx.MustMarshal(m))
	}
	// projection=loop alone folds the same loops.
	only := fold(t, Options{Projection: ProjectionLoop}, rows)
	if !equalJSON(only.Projections["loops"], st.Projections["loops"]) {
		t.Error("projection=loop differs from projection=all")
	}
}

// TestOurCursorLoop: a cursor loop's total is the rows its claims returned so
// far (loop.claimed), its claim commands are not iterations, and the loop is
// marked cursor for the dashboard's "rows" label.
func TestOurCursorLoop(t *testing.T) {
	var rows []Row
	add := func(r Row) {
		r.Seq = int64(len(rows) + 1)
		r.EventID = 6000 + r.Seq
		rows = append(rows, r)
	}
	claimed := func(total int64, drained bool) Row {
		return Row{EventType: "loop.claimed", NodeName: "drain", Status: "CLAIMED",
			Context: map[string]any{"visit": int64(1), "claimed": total, "total": total, "drained": drained}}
	}
	add(Row{EventType: "step.enter", NodeName: "drain", Status: "ENTERED",
		Context: map[string]any{"visit": int64(1), "iterations_expected": int64(0), "iterator": "row", "cursor": true}})
	add(Row{EventType: "command.issued", NodeName: "drain", CommandID: "1:drain:9",
		Meta: map[string]any{"command_id": "1:drain:9", "step": "drain", "visit": int64(1), "cursor_claim": true}})
	add(Row{EventType: "command.completed", NodeName: "drain", CommandID: "1:drain:9", Meta: map[string]any{"command_id": "1:drain:9"}})
	add(claimed(2, false))
	for i := range int64(2) {
		id := fmt.Sprintf("1:drain:1%d:i%d", i, i)
		add(Row{EventType: "command.issued", NodeName: "drain", CommandID: id,
			Meta: map[string]any{"command_id": id, "step": "drain", "visit": int64(1), "iteration_index": i, "iteration_total": int64(2)}})
	}
	add(Row{EventType: "command.completed", NodeName: "drain", CommandID: "1:drain:10:i0", Meta: map[string]any{"command_id": "1:drain:10:i0"}})
	mid := fold(t, Options{Projection: ProjectionLoop}, rows)
	want := map[string]any{"loop_id": "drain#1", "step_name": "drain", "visit": "1", "total": int64(2), "cursor": true,
		"done": int64(1), "failed": int64(0), "completed": false, "last_event_id": int64(6007)}
	if got := mid.Projections["loops"].(map[string]any)["drain#1"]; !equalJSON(got, want) {
		t.Errorf("drain#1 = %s\nwant %s", jsonx.MustMarshal(got), jsonx.MustMarshal(want))
	}
}

func equalJSON(a, b any) bool {
	return bytes.Equal(jsonx.MustMarshal(a), jsonx.MustMarshal(b))
}

func TestLimitTruncates(t *testing.T) {
	rows := loadParityRows(t)
	f := NewFolder(Options{Limit: 5})
	var err error
	n := 0
	for _, r := range rows {
		if err = f.Add(r); err != nil {
			break
		}
		n++
	}
	if !errors.Is(err, ErrLimitReached) || !IsStop(err) || n != 5 {
		t.Fatalf("Add: err %v after %d rows, want ErrLimitReached after 5", err, n)
	}
	st, _ := f.State()
	doc := st.Document()
	if doc["truncated"] != true || doc["last_seq"] != int64(5) || doc["event_count"] != int64(5) || doc["last_event_id"] != int64(104) {
		t.Fatalf("truncated=%v last_seq=%v event_count=%v last_event_id=%v", doc["truncated"], doc["last_seq"], doc["event_count"], doc["last_event_id"])
	}
	// Exactly limit rows and no more: not truncated.
	full := fold(t, Options{Limit: len(rows)}, rows)
	if full.Truncated || full.EventCount != int64(len(rows)) {
		t.Fatalf("limit = log size: truncated %v count %d", full.Truncated, full.EventCount)
	}
	// The default limit is DefaultLimit.
	if NewFolder(Options{}).limit != DefaultLimit || DefaultLimit != 100000 {
		t.Fatal("default limit")
	}
}

func TestAddRejectsOutOfOrderRows(t *testing.T) {
	f := NewFolder(Options{})
	if err := f.Add(Row{Seq: 2, EventID: 2, EventType: "playbook.started"}); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int64{2, 1, 0} {
		if err := f.Add(Row{Seq: seq, EventID: 9, EventType: "playbook.completed"}); err == nil || IsStop(err) {
			t.Fatalf("seq %d after 2: err %v, want an ordering error", seq, err)
		}
	}
	st, _ := f.State()
	if st.EventCount != 1 || st.ExecutionStatus() != lifecycle.ExecutionRunning {
		t.Fatalf("rejected rows changed the fold: count %d status %s", st.EventCount, st.ExecutionStatus())
	}
}

type countingSteps struct {
	seen []int64
	fail int64
}

func (c *countingSteps) Add(r Row) error {
	if r.Seq == c.fail {
		return fmt.Errorf("boom at %d", r.Seq)
	}
	c.seen = append(c.seen, r.Seq)
	return nil
}

func (c *countingSteps) Value() any {
	return map[string]any{"seen": len(c.seen), "last": c.seen[len(c.seen)-1]}
}

func TestStepProjector(t *testing.T) {
	rows := loadParityRows(t)
	if v := fold(t, Options{}, rows).Projections["steps"]; !equalJSON(v, map[string]any{}) {
		t.Fatalf("steps without projector = %s, want {}", jsonx.MustMarshal(v))
	}
	sp := &countingSteps{}
	st := fold(t, Options{Steps: sp}, rows)
	// Value's int and int64 come out normalised (int → int64).
	if want := map[string]any{"seen": int64(13), "last": int64(13)}; !reflect.DeepEqual(st.Projections["steps"], want) {
		t.Fatalf("steps = %#v, want %#v", st.Projections["steps"], want)
	}
	if !slices.Equal(sp.seen, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}) {
		t.Fatalf("projector saw %v", sp.seen)
	}
	// Not fed when another projection is selected.
	other := &countingSteps{}
	fold(t, Options{Projection: ProjectionExecution, Steps: other}, rows)
	if len(other.seen) != 0 {
		t.Fatalf("projection=execution fed the step projector %d rows", len(other.seen))
	}
	// A projector error rejects the row without folding it.
	failing := &countingSteps{fail: 3}
	f := NewFolder(Options{Steps: failing})
	for _, r := range rows[:3] {
		err := f.Add(r)
		if r.Seq == 3 && (err == nil || IsStop(err)) {
			t.Fatalf("projector error not returned: %v", err)
		}
	}
	if f.count != 2 {
		t.Fatalf("count %d after a projector error, want 2", f.count)
	}
}

// A re-posted command.completed (events.md: worker posts may repeat) must not
// count the iteration twice, nor may a completed-then-failed report both.
func TestOurLoopCountsIterationsOnce(t *testing.T) {
	meta := func(extra map[string]any) map[string]any {
		m := map[string]any{"command_id": "c-0"}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	rows := []Row{
		{Seq: 1, EventID: 1, EventType: "step.enter", NodeName: "s", Context: map[string]any{"visit": int64(1), "iterations_expected": int64(1)}},
		{Seq: 2, EventID: 2, EventType: "command.issued", NodeName: "s", CommandID: "c-0",
			Meta: meta(map[string]any{"step": "s", "visit": int64(1), "iteration_index": int64(0)})},
		{Seq: 3, EventID: 3, EventType: "command.completed", CommandID: "c-0", Meta: meta(nil)},
		{Seq: 4, EventID: 4, EventType: "command.completed", CommandID: "c-0", Meta: meta(nil)},
		{Seq: 5, EventID: 5, EventType: "command.failed", CommandID: "c-0", Meta: meta(nil)},
	}
	counts := func(pos int64) (any, any) {
		l := fold(t, Options{Projection: ProjectionLoop, Cutoff: Cutoff{Kind: CutoffPosition, Position: pos}}, rows).
			Projections["loops"].(map[string]any)["s#1"].(map[string]any)
		return l["done"], l["failed"]
	}
	if d, f := counts(4); d != int64(1) || f != int64(0) {
		t.Errorf("after a duplicate completion: done %v failed %v, want 1 0", d, f)
	}
	if d, f := counts(5); d != int64(0) || f != int64(1) {
		t.Errorf("after completed then failed: done %v failed %v, want 0 1 (latest outcome)", d, f)
	}
}
