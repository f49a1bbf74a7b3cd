package controlplane_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/controlplane"
)

// TestReferenceWithNULRefused: a result posted by reference never passed the
// API's text check, so the server checks it when it reads it back: a NUL in
// it refuses the completion (422 naming the field) with nothing stored, and
// the command.failed a worker sends instead fails the step.
func TestReferenceWithNULRefused(t *testing.T) {
	s, rs, st, body := claimedReadsStart(t, true)
	uri, err := rs.Put(s.ctx, fmt.Sprintf("%d/start.json", st.ExecutionID), []byte(`{"rows": ["ok", "a\u0000b"]}`))
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]any{"command_id": body.CommandID, "attempt": int64(body.Attempt)}
	completed := controlplane.EventInput{ExecutionID: st.ExecutionID, Step: "start", Type: "command.completed", Status: "success",
		WorkerID: "w1", Meta: meta, ResultKind: "ref", ResultURI: uri,
		Payload: map[string]any{"command_id": body.CommandID, "result": map[string]any{"status": "success"}}}
	before := len(s.eventTypes(t, st.ExecutionID))
	_, err = s.svc.Ingest(s.ctx, completed)
	if !isKind(err, controlplane.ErrInvalid) || !strings.Contains(err.Error(), uri) ||
		!strings.Contains(err.Error(), `data.rows[1]: contains a NUL character (\u0000) at byte 1, which cannot be stored`) {
		t.Fatalf("completion with a NUL by reference: %v, want 422 naming the stored field", err)
	}
	if after := len(s.eventTypes(t, st.ExecutionID)); after != before {
		t.Fatalf("the refused completion left %d events behind", after-before)
	}
	failed := controlplane.EventInput{ExecutionID: st.ExecutionID, Step: "start", Type: "command.failed", Status: "FAILED",
		WorkerID: "w1", Meta: map[string]any{"command_id": body.CommandID, "attempt": int64(body.Attempt), "class": "error"},
		Payload: map[string]any{"command_id": body.CommandID, "error": "the server refused the step's result: " + err.Error()}}
	if _, err := s.svc.Ingest(s.ctx, failed); err != nil {
		t.Fatal(err)
	}
	if v := s.execution(t, st.ExecutionID); v.Row.Status != "FAILED" || !strings.Contains(v.Row.Error, "data.rows[1]: contains a NUL") {
		t.Fatalf("execution %s: %s", v.Row.Status, v.Row.Error)
	}
}
