package controlplane_test

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/resultstore"
)

const readsStart = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: reads_start, path: tests/reads_start}
workflow:
  - step: start
    tool: {kind: noop}
    next: reader
  - step: reader
    tool: {kind: noop, input: {n: "{{ start.rows | length }}", last: "{{ start.rows[-1] }}"}}
`

// claimedReadsStart starts tests/reads_start on a stack with a file result
// store, its start command claimed by w1 (and started when start is true).
func claimedReadsStart(t *testing.T, start bool) (*stack, resultstore.Store, *controlplane.Started, *controlplane.CommandBody) {
	t.Helper()
	rs, err := resultstore.Open(t.Context(), "file://"+t.TempDir(), resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, func(c *controlplane.Config) { c.Results = rs })
	s.register(t, readsStart)
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: "tests/reads_start"})
	if err != nil {
		t.Fatal(err)
	}
	c := s.pending(t, st.ExecutionID)[0]
	body, err := s.svc.Claim(s.ctx, c.IssuedEventID, "w1", start)
	if err != nil {
		t.Fatal(err)
	}
	return s, rs, st, body
}

// TestResultsByReference: worker.md §1 — a result posted by reference is read
// from the result store when the engine needs it; a store that cannot serve it
// aborts the ingest (nothing decided, the worker re-posts), and references the
// server could not read back as the event's execution's are refused with 422
// naming result_uri.
func TestResultsByReference(t *testing.T) {
	s, rs, st, body := claimedReadsStart(t, false)
	uri, err := rs.Put(s.ctx, fmt.Sprintf("%d/start.json", st.ExecutionID), []byte(`{"rows": [1, 2, 3]}`))
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]any{"command_id": body.CommandID, "attempt": int64(body.Attempt)}
	ev := func(typ, status, clientID string) controlplane.EventInput {
		return controlplane.EventInput{ExecutionID: st.ExecutionID, Step: "start", Type: typ, Status: status, WorkerID: "w1",
			Meta: meta, ClientEventID: clientID}
	}
	if _, err := s.svc.Ingest(s.ctx, ev("command.started", "RUNNING", "s")); err != nil {
		t.Fatal(err)
	}

	// Refused before anything is stored: a URI outside the store.
	bad := ev("call.done", "COMPLETED", "bad")
	bad.ResultKind, bad.ResultURI = "ref", "file:///etc/passwd"
	if _, err := s.svc.Ingest(s.ctx, bad); !isKind(err, controlplane.ErrInvalid) || !strings.Contains(err.Error(), "result_uri") || !strings.Contains(err.Error(), rs.URL()) {
		t.Fatalf("a reference outside the store: %v, want 422 naming result_uri and the store", err)
	}

	// A staged result's noetl:// reference is of its own execution only.
	other := ev("call.done", "COMPLETED", "other")
	other.ResultKind, other.ResultURI = "ref", resultstore.NoETLRef{ExecutionID: st.ExecutionID + 1, Name: "start", ID: "00112233aabb"}.String()
	if _, err := s.svc.Ingest(s.ctx, other); !isKind(err, controlplane.ErrInvalid) || !strings.Contains(err.Error(), "result_uri") || !strings.Contains(err.Error(), fmt.Sprintf("not of execution %d", st.ExecutionID)) {
		t.Fatalf("a noetl:// reference of another execution: %v, want 422 naming result_uri", err)
	}
	// So is an object of the store: one another execution's worker stored
	// (a worker must not hand this execution another's result).
	theirs, err := rs.Put(s.ctx, fmt.Sprintf("%d/start.json", st.ExecutionID+1), []byte(`{"rows": [9]}`))
	if err != nil {
		t.Fatal(err)
	}
	foreign := ev("call.done", "COMPLETED", "foreign")
	foreign.ResultKind, foreign.ResultURI = "ref", theirs
	if _, err := s.svc.Ingest(s.ctx, foreign); !isKind(err, controlplane.ErrInvalid) || !strings.Contains(err.Error(), "result_uri") || !strings.Contains(err.Error(), fmt.Sprintf("not a result of execution %d", st.ExecutionID)) {
		t.Fatalf("an object of another execution: %v, want 422 naming result_uri", err)
	}

	done := ev("call.done", "COMPLETED", "done")
	done.ResultKind, done.ResultURI = "ref", uri
	done.Payload = map[string]any{"result": map[string]any{"status": "success", "duration_ms": int64(5)}}
	if _, err := s.svc.Ingest(s.ctx, done); err != nil {
		t.Fatal(err)
	}

	// The object vanished: the completion is not decided on a missing result.
	path := strings.TrimPrefix(uri, "file://")
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	before := len(s.eventTypes(t, st.ExecutionID))
	if _, err := s.svc.Ingest(s.ctx, ev("command.completed", "success", "completed")); err == nil || !strings.Contains(err.Error(), uri) {
		t.Fatalf("completion with an unreadable reference: %v, want an error naming %s", err, uri)
	}
	if after := len(s.eventTypes(t, st.ExecutionID)); after != before {
		t.Fatalf("the failed completion left %d events behind", after-before)
	}
	if err := os.Rename(path+".away", path); err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.Ingest(s.ctx, ev("command.completed", "success", "completed")); err != nil {
		t.Fatal(err)
	}
	p := s.pending(t, st.ExecutionID)
	if len(p) != 1 || p[0].Step != "reader" {
		t.Fatalf("pending %v, want reader", p)
	}
	if got := echoInput(p[0]); !reflect.DeepEqual(got, map[string]any{"n": int64(3), "last": int64(3)}) {
		t.Fatalf("reader's input %v, want the referenced rows read back", got)
	}
	v := s.execution(t, st.ExecutionID)
	if v.Steps["start"].Status != "completed" {
		t.Fatalf("start is %s", v.Steps["start"].Status)
	}

	// A server with no result store refuses references it could never read.
	plain, err := controlplane.New(controlplane.Config{Store: s.st, ServerURL: "http://test"})
	if err != nil {
		t.Fatal(err)
	}
	orphan := ev("call.done", "COMPLETED", "orphan")
	orphan.ResultKind, orphan.ResultURI = "ref", uri
	if _, err := plain.Ingest(s.ctx, orphan); !isKind(err, controlplane.ErrInvalid) || !strings.Contains(err.Error(), "NOETL_RESULT_STORE") {
		t.Fatalf("a reference without a store: %v, want 422 saying how to configure one", err)
	}
	// Staging with it is refused as what it is, a server not configured for
	// it (501), never as an outage a worker would wait out.
	if _, err := plain.StageResult(s.ctx, st.ExecutionID, noetlwire.StagedResult{Name: "start", Data: int64(1)}); !isKind(err, controlplane.ErrNotConfigured) || !strings.Contains(err.Error(), "NOETL_RESULT_STORE") {
		t.Fatalf("staging without a store: %v, want ErrNotConfigured naming NOETL_RESULT_STORE", err)
	}
}

// TestViewShowsLargeStoredResultByReference: the execution view decodes a
// step's result stored by reference only up to ViewResultBytes of text; a
// larger one is shown as NoETL's reference, never read into the view, while
// the step after it still reads it whole.
func TestViewShowsLargeStoredResultByReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int // rows of 10 bytes
	}{{"small", 10}, {"large", controlplane.ViewResultBytes / 10}} {
		t.Run(tc.name, func(t *testing.T) {
			s, rs, st, body := claimedReadsStart(t, false)
			rows := "[" + strings.Repeat(`"abcdefg",`, tc.n-1) + `"last"]`
			uri, err := rs.Put(s.ctx, fmt.Sprintf("%d/start.json", st.ExecutionID), []byte(`{"rows": `+rows+`}`))
			if err != nil {
				t.Fatal(err)
			}
			meta := map[string]any{"command_id": body.CommandID, "attempt": int64(body.Attempt)}
			for _, e := range []controlplane.EventInput{
				{Type: "command.started", Status: "RUNNING", ClientEventID: "s"},
				{Type: "call.done", Status: "COMPLETED", ClientEventID: "done", ResultKind: "ref", ResultURI: uri},
				{Type: "command.completed", Status: "success", ClientEventID: "completed"},
			} {
				e.ExecutionID, e.Step, e.WorkerID, e.Meta = st.ExecutionID, "start", "w1", meta
				if _, err := s.svc.Ingest(s.ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			if got, _ := echoInput(s.pending(t, st.ExecutionID)[0]).(map[string]any); got["n"] != int64(tc.n) || got["last"] != "last" {
				t.Fatalf("reader's input %v, want all %d rows read back", got, tc.n)
			}
			got := s.execution(t, st.ExecutionID).Steps["start"].Result
			want := any(map[string]any{"_ref": map[string]any{"kind": "result_ref", "ref": uri, "uri": uri}})
			if tc.name == "small" {
				list, _ := jsonx.Decode([]byte(rows))
				want = map[string]any{"rows": list}
			}
			if !reflect.DeepEqual(got, want) {
				g, _ := jsonx.Marshal(got)
				w, _ := jsonx.Marshal(want)
				t.Fatalf("the view shows %s, want %s", jsonx.Cut(string(g), 200), jsonx.Cut(string(w), 200))
			}
		})
	}
}

// TestResolveResultBoundsDecoding: GET /api/result/resolve decodes a stored
// result within resultstore.MaxDecodedBytes: many tiny values are refused
// (422) naming the limit, before they are built.
func TestResolveResultBoundsDecoding(t *testing.T) {
	s, rs, st, _ := claimedReadsStart(t, false)
	uri, err := rs.Put(s.ctx, fmt.Sprintf("%d/tiny.json", st.ExecutionID), []byte("["+strings.Repeat("{},", 6<<20)+"{}]"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.svc.ResolveResult(s.ctx, uri); !isKind(err, controlplane.ErrInvalid) || !strings.Contains(err.Error(), "resultstore.MaxDecodedBytes") {
		t.Fatalf("resolving many tiny values: %v, want 422 naming resultstore.MaxDecodedBytes", err)
	}
}
