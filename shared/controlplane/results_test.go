package controlplane_test

import (
	"errors"
	"fmt"
	"io/fs"
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
	return claimedStart(t, readsStart, "tests/reads_start", start)
}

// ignoresStart is readsStart whose reader reads nothing of start: the
// server records start's result without reading it.
const ignoresStart = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: ignores_start, path: tests/ignores_start}
workflow:
  - step: start
    tool: {kind: noop}
    next: reader
  - step: reader
    tool: {kind: noop}
`

// claimedStart starts playbook (at path) as claimedReadsStart does.
func claimedStart(t *testing.T, playbook, path string, start bool) (*stack, resultstore.Store, *controlplane.Started, *controlplane.CommandBody) {
	t.Helper()
	rs, err := resultstore.Open(t.Context(), "file://"+t.TempDir(), resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := newStack(t, func(c *controlplane.Config) { c.Results = rs })
	s.register(t, playbook)
	st, err := s.svc.Execute(s.ctx, controlplane.ExecuteRequest{Path: path})
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

// startEvent makes the events w1 posts for the start command it claimed.
func startEvent(st *controlplane.Started, body *controlplane.CommandBody) func(typ, status, clientID string) controlplane.EventInput {
	meta := map[string]any{"command_id": body.CommandID, "attempt": int64(body.Attempt)}
	return func(typ, status, clientID string) controlplane.EventInput {
		return controlplane.EventInput{ExecutionID: st.ExecutionID, Step: "start", Type: typ, Status: status, WorkerID: "w1",
			Meta: meta, ClientEventID: clientID}
	}
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
	ev := startEvent(st, body)
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

// TestViewShowsStoredResults: the execution view shows a step's result
// stored by reference as its value, whatever its size (a parent's
// return_step reads a child's step result from it, and NoETL hands it
// whole), and one it cannot show as a value as NoETL's reference, {_ref},
// the rest of the view still answering.
func TestViewShowsStoredResults(t *testing.T) {
	rows := func(n int) string { return `{"rows": [` + strings.Repeat(`"abcdefg",`, n-1) + `"last"]}` }
	for _, tc := range []struct {
		name, text, fragment string
		value                bool // shown as its value, read back whole by reader
	}{
		{"small", rows(10), "", true},
		{"over 1 MiB", rows(200_000), "", true},
		{"fragment", `{"data": ` + rows(10) + `}`, "#/data", true},
		{"not JSON", `{"rows": [1, 2`, "", false},
		{"NUL", `{"rows": ["a\u0000b"]}`, "", false},
		{"fragment pointing at nothing", rows(10), "#/nothing", false},
		{"over the decode bound", `{"rows": [` + strings.Repeat("{},", resultstore.MaxDecodedBytes/64) + `{}]}`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pb, path := ignoresStart, "tests/ignores_start"
			if tc.value {
				pb, path = readsStart, "tests/reads_start"
			}
			s, rs, st, body := claimedStart(t, pb, path, false)
			uri, err := rs.Put(s.ctx, fmt.Sprintf("%d/start.json", st.ExecutionID), []byte(tc.text))
			if err != nil {
				t.Fatal(err)
			}
			uri += tc.fragment
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
			want := any(map[string]any{"_ref": map[string]any{"kind": "result_ref", "ref": uri, "uri": uri}})
			if tc.value {
				got, _ := echoInput(s.pending(t, st.ExecutionID)[0]).(map[string]any)
				if got["last"] != "last" {
					t.Fatalf("reader's input %v, want the rows read back", got)
				}
				all, _ := jsonx.Decode([]byte(rows(int(got["n"].(int64)))))
				want = all
			}
			got := s.execution(t, st.ExecutionID).Steps["start"].Result
			if !reflect.DeepEqual(got, want) {
				g, _ := jsonx.Marshal(got)
				w, _ := jsonx.Marshal(want)
				t.Fatalf("the view shows %s, want %s", jsonx.Cut(string(g), 200), jsonx.Cut(string(w), 200))
			}
			// A result that cannot be read at all (gone from the store) fails
			// the view: shown as {_ref}, a parent's return_step would take the
			// marker for the value.
			if err := os.Remove(strings.TrimPrefix(strings.TrimSuffix(uri, tc.fragment), "file://")); err != nil {
				t.Fatal(err)
			}
			if v, err := s.svc.Execution(s.ctx, st.ExecutionID); err == nil || !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the view of a result gone from the store: %v, %v; want an error", v != nil, err)
			}
		})
	}
}

// TestRecordedReferenceOfAnotherStore: a result_uri the server's execution
// check refuses once recorded (recorded before the check, or by a server on
// another store URL: here a worker's store is a folder of the server's, so
// its names read results/<id>/…) fails the same on every retry: the
// completion that needs it is refused with 422 saying the server and its
// workers must use one store URL (the worker then reports the command
// failed), and the execution view still answers, showing it as {_ref}.
func TestRecordedReferenceOfAnotherStore(t *testing.T) {
	s, rs, st, body := claimedReadsStart(t, false)
	worker, err := resultstore.Open(s.ctx, rs.URL()+"/results", resultstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	uri, err := worker.Put(s.ctx, fmt.Sprintf("%d/start.json", st.ExecutionID), []byte(`{"rows": [1, 2, 3]}`))
	if err != nil {
		t.Fatal(err)
	}
	// A server on the worker's store URL accepted and recorded it.
	then, err := controlplane.New(controlplane.Config{Store: s.st, ServerURL: "http://test", Results: worker})
	if err != nil {
		t.Fatal(err)
	}
	ev := startEvent(st, body)
	done := ev("call.done", "COMPLETED", "done")
	done.ResultKind, done.ResultURI = "ref", uri
	for _, e := range []controlplane.EventInput{ev("command.started", "RUNNING", "s"), done} {
		if _, err := then.Ingest(s.ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.svc.Ingest(s.ctx, ev("command.completed", "success", "completed"))
	if !isKind(err, controlplane.ErrInvalid) || !strings.Contains(err.Error(), "same result store URL") {
		t.Fatalf("a completion needing a recorded reference the check refuses: %v, want 422 saying to use the same result store URL", err)
	}
	if _, err := then.Ingest(s.ctx, ev("command.completed", "success", "completed")); err != nil {
		t.Fatal(err)
	}
	got := s.execution(t, st.ExecutionID).Steps["start"].Result
	want := map[string]any{"_ref": map[string]any{"kind": "result_ref", "ref": uri, "uri": uri}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("the view shows %v, want %v", got, want)
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
