package replay

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// TestNoETLRulesBeyondTheDataSet pins R-X2's words on the paths the 13-row
// parity log does not take: ids from aggregates and meta, stage.closed
// counters, frame.failed/abandoned, command lifecycle, other loop id keys,
// business-object identity from meta fields and aggregates, deletion.
func TestNoETLRulesBeyondTheDataSet(t *testing.T) {
	var rows []Row
	add := func(r Row) {
		r.Seq = int64(len(rows) + 1)
		r.EventID = 200 + r.Seq
		rows = append(rows, r)
	}
	add(Row{EventType: "stage.opened", AggregateType: "stage", AggregateID: "stage/s-9", NodeName: "node",
		Meta: map[string]any{"kind": "map", "parent_stage_id": "s-0", "loop_event_id": int64(77)}}) // 201
	add(Row{EventType: "frame.dispatched", AggregateType: "frame", AggregateID: "frame/f-9",
		Meta: map[string]any{"stage_id": "s-9", "attempt": int64(2), "command_id": int64(31)}}) // 202
	add(Row{EventType: "frame.dispatched", Meta: map[string]any{"frame_id": "f-9", "attempt": int64(1)}}) // 203
	add(Row{EventType: "frame.started", Status: "whatever", FrameID: "f-9"})                              // 204
	add(Row{EventType: "frame.failed", FrameID: "f-9", Meta: map[string]any{"events_emitted": int64(4)},
		PayloadRef: map[string]any{"rows_ref": map[string]any{"ref": "s3://x", "meta": map[string]any{"row_count": int64(0), "sha256": "ab"}}}}) // 205
	add(Row{EventType: "frame.abandoned", FrameID: "f-10"}) // 206
	add(Row{EventType: "stage.closed", StageID: "s-9",
		Meta: map[string]any{"frame_count": int64(2), "row_count": int64(10), "events_emitted": int64(4), "failed_count": int64(1)}}) // 207
	add(Row{EventType: "command.issued", CommandID: "c1"})                                                                   // 208
	add(Row{EventType: "command.claimed", CommandID: "c1", WorkerID: "w-1"})                                                 // 209
	add(Row{EventType: "command.started", Meta: map[string]any{"command_id": "c1"}})                                         // 210
	add(Row{EventType: "command.expired", Status: "EXPIRED", CommandID: "c1"})                                               // 211
	add(Row{EventType: "command.cancelled", CommandID: "c1"})                                                                // 212
	add(Row{EventType: "loop.shard.failed", Meta: map[string]any{"__loop_epoch_id": "E", "total": int64(5)}, NodeName: "l"}) // 213
	add(Row{EventType: "loop.fanin.completed", Meta: map[string]any{"__loop_epoch_id": "E"}})                                // 214
	add(Row{EventType: "order.upserted", Meta: map[string]any{"object_type": "order", "object_id": int64(7),
		"business_object": map[string]any{"version": int64(9), "attributes": map[string]any{"a": int64(1)}}}}) // 215
	add(Row{EventType: "order.removed", AggregateType: "business_object", AggregateID: "business_object/order/7"}) // 216
	add(Row{EventType: "thing.created", AggregateType: "business_object", AggregateID: "solo"})                    // 217

	st := fold(t, Options{}, rows)
	check := func(projection, key string, want map[string]any) {
		t.Helper()
		got, ok := st.Projections[projection].(map[string]any)[key].(map[string]any)
		if !ok {
			t.Errorf("%s[%s] missing: %s", projection, key, jsonx.MustMarshal(st.Projections[projection]))
			return
		}
		if m := subsetMismatches(projection+"/"+key, want, got); len(m) > 0 {
			t.Errorf("%s", strings.Join(m, "\n"))
		}
	}
	check("stages", "s-9", map[string]any{"status": "CLOSED", "kind": "map", "step_name": "node", "parent_stage_id": "s-0",
		"loop_event_id": "77", "opened_event_id": int64(201), "closed_event_id": int64(207), "frame_count": int64(2),
		"row_count": int64(10), "events_emitted": int64(4), "failed_count": int64(1), "last_event_id": int64(207)})
	check("frames", "f-9", map[string]any{"status": "FAILED", "stage_id": "s-9", "command_id": "31", "attempts": int64(2),
		"claimed_event_id": int64(203), "terminal_event_id": int64(205), "events_emitted": int64(4),
		"output_ref_summary": map[string]any{"ref": "s3://x", "row_count": int64(0), "sha256": "ab", "media_type": nil, "schema_digest": nil}})
	check("frames", "f-10", map[string]any{"status": "ABANDONED"})
	check("commands", "c1", map[string]any{"status": "CANCELLED", "worker_id": "w-1", "issued_event_id": int64(208),
		"claimed_event_id": int64(209), "started_event_id": int64(210), "terminal_event_id": int64(212)})
	check("commands", "31", map[string]any{"status": "UNKNOWN", "frame_id": "f-9", "stage_id": "s-9"})
	check("loops", "E", map[string]any{"step_name": "l", "total": int64(5), "failed": int64(1), "done": int64(0), "completed": true})
	check("business_objects", "order/7", map[string]any{"status": "DELETED", "deleted_event_id": int64(216),
		"event_count": int64(2), "version": int64(2), "attributes": map[string]any{"a": int64(1)}})
	check("business_objects", "business_object/solo", map[string]any{"status": "ACTIVE", "object_id": "solo"})

	// Command status at intermediate points follows the lifecycle.
	for pos, want := range map[int64]string{8: "PENDING", 9: "CLAIMED", 10: "RUNNING", 11: "EXPIRED"} {
		s := fold(t, Options{Cutoff: Cutoff{Kind: CutoffPosition, Position: pos}}, rows)
		if got := s.Projections["commands"].(map[string]any)["c1"].(map[string]any)["status"]; got != want {
			t.Errorf("c1 at seq %d: %v, want %s", pos, got, want)
		}
	}
	// The version at 215 comes from business_object.version.
	s := fold(t, Options{Cutoff: Cutoff{Kind: CutoffPosition, Position: 15}}, rows)
	if v := s.Projections["business_objects"].(map[string]any)["order/7"].(map[string]any)["version"]; v != int64(9) {
		t.Errorf("version %v, want 9", v)
	}
}

// recordingTB captures Fatal and Skip so conformanceDir's R-C1 behaviour can
// be observed without failing or skipping the real test.
type recordingTB struct {
	testing.TB
	fatal, skip string
}

func (r *recordingTB) Helper()                   {}
func (r *recordingTB) Fatal(args ...any)         { r.fatal = fmt.Sprint(args...); runtime.Goexit() }
func (r *recordingTB) Fatalf(f string, a ...any) { r.fatal = fmt.Sprintf(f, a...); runtime.Goexit() }
func (r *recordingTB) Skip(args ...any)          { r.skip = fmt.Sprint(args...); runtime.Goexit() }

func resolveWith(t *testing.T) (dir string, rec *recordingTB) {
	rec = &recordingTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		dir = conformanceDir(rec)
	}()
	<-done
	return dir, rec
}

func TestConformanceDirResolution(t *testing.T) {
	// Default resolution: <module root>/../shared/conformance. This skips the
	// test (or fails it under CI) when the data set is absent, per R-C1.
	t.Setenv("NOETL_CONFORMANCE_DIR", "")
	real := conformanceDir(t)
	if filepath.Base(real) != "conformance" || filepath.Base(filepath.Dir(real)) != "shared" {
		t.Errorf("default dir %q, want …/shared/conformance", real)
	}
	if _, err := os.Stat(filepath.Join(real, "..", "..", filepath.Base(moduleRootOf(t)), "go.mod")); err != nil {
		t.Errorf("default dir %q is not beside the module root: %v", real, err)
	}

	missing := filepath.Join(t.TempDir(), "nowhere")
	t.Setenv("NOETL_CONFORMANCE_DIR", missing)
	t.Setenv("CI", "")
	if _, rec := resolveWith(t); rec.skip == "" || rec.fatal != "" || !strings.Contains(rec.skip, missing) {
		t.Errorf("missing dir outside CI: skip=%q fatal=%q, want a skip naming the dir", rec.skip, rec.fatal)
	}
	t.Setenv("CI", "true")
	if _, rec := resolveWith(t); rec.fatal == "" || rec.skip != "" {
		t.Errorf("missing dir under CI: skip=%q fatal=%q, want a failure", rec.skip, rec.fatal)
	}
	// The override wins when it holds the data set.
	t.Setenv("NOETL_CONFORMANCE_DIR", real)
	if dir, rec := resolveWith(t); dir != real || rec.fatal != "" || rec.skip != "" {
		t.Errorf("override: dir=%q skip=%q fatal=%q", dir, rec.skip, rec.fatal)
	}
}

func moduleRootOf(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			t.Fatal("no go.mod")
		}
		dir = filepath.Dir(dir)
	}
}

// FuzzFoldRows: any input either fails to load or folds deterministically.
func FuzzFoldRows(f *testing.F) {
	f.Add([]byte(`[{"event_id":1,"event_type":"playbook_started"},{"event_id":2,"event_type":"command.issued","command_id":5,"meta":{"iteration_index":0,"step":"a","visit":1}}]`))
	f.Add([]byte(`[{"event_id":"9","event_type":"customer.created","aggregate_type":"business_object","aggregate_id":"business_object/x/y","result":{"reference":{"rows_ref":{"ipc":{"sha256":"z"}}}}}]`))
	f.Add([]byte(`[{"event_id":3,"event_type":"step.enter","node_name":"s","context":{"iterations_expected":2}},{"event_id":4,"event_type":"step.exit","node_name":"s"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		foldBytes := func() []byte {
			fo := NewFolder(Options{})
			if err := ReadRows(bytes.NewReader(data), fo.Add); err != nil {
				return nil
			}
			st, err := fo.State()
			if err != nil {
				t.Fatalf("State after a clean load: %v", err)
			}
			b, err := st.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		if a, b := foldBytes(), foldBytes(); !bytes.Equal(a, b) {
			t.Fatalf("non-deterministic fold:\n%s\n%s", a, b)
		}
	})
}
