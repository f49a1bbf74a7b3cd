package worker

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/tools"
)

// TestChildStartSurvivesALostAnswer: the playbook tool's start of a child
// was sent once, with no idempotency key, so an answer lost after the
// server started the child failed the step, and its retry started a second
// child beside the first (the liveness review of 2026-11-29, F6). The start
// now carries a key of its own and is sent again with it.
func TestChildStartSurvivesALostAnswer(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Key    string `json:"idempotency_key"`
			Parent int64  `json:"parent_execution_id"`
		}
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
		mu.Lock()
		keys = append(keys, body.Key)
		n := len(keys)
		mu.Unlock()
		if n == 1 { // the child started; its answer is lost on the way
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"execution_id": "77", "status": "RUNNING"}`))
	}))
	t.Cleanup(srv.Close)
	c := &Children{Client: client.New(srv.URL, "")}
	id, err := c.Start(context.Background(), tools.ChildRequest{Path: "tests/child", ParentExecutionID: "5", Payload: map[string]any{}})
	if err != nil || id != "77" {
		t.Fatalf("start: %q, %v", id, err)
	}
	if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
		t.Fatalf("the start was sent with keys %q: want twice, one key", keys)
	}
	if _, err := c.Start(context.Background(), tools.ChildRequest{Path: "tests/child", Payload: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	if keys[2] == keys[0] {
		t.Fatalf("a second start reused the first one's key %q", keys[0])
	}
}
