package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api/apitest"
)

// TestHostileRequestsOverHTTP sends a few of the API's hostile requests
// (shared/api TestHostileRequests has them all) through the real server, so
// the local gateway and the Lambda adapter are on the path: a NUL in a body,
// in the query and in the path, a body that is not UTF-8 (which travels
// base64-encoded), 100,000 nested arrays, an id past int64. Each is a 4xx
// naming the field, and nothing is written.
func TestHostileRequestsOverHTTP(t *testing.T) {
	ctx := context.Background()
	path := registerYAML(t, "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: req, path: e2e/requests}\n"+
		"workflow:\n  - step: start\n    tool: {kind: noop}\n")
	for _, tc := range []struct {
		name, method, target, body string
		status                     int
		want                       string
	}{
		{"NUL in a payload key", "POST", "/api/execute", `{"path": "` + path + `", "payload": {"a\u0000": 1}}`, 422,
			`payload["a\x00"]: the key contains a NUL character (\u0000) at byte 1, which cannot be stored`},
		{"NUL in a reported result", "POST", "/api/worker/report", `{"worker_id": "w", "events": [{"execution_id": "1024",
			"event_type": "command.completed", "payload": {"result": {"status": "success", "data": {"stdout": "a\u0000b"}}}}]}`, 422,
			`events[0].payload.result.data.stdout: contains a NUL character (\u0000) at byte 1`},
		{"NUL in the query", "GET", "/api/executions?path=e2e%00", "", 422, `path: contains a NUL character (\u0000) at byte 3`},
		{"NUL in the path", "GET", "/api/executions/12%00/events", "", 422, `id: contains a NUL character (\u0000) at byte 2`},
		{"body not UTF-8", "POST", "/api/execute", "{\"path\": \"" + path + "\xff\"}", 400, "the body is not valid UTF-8 at byte"},
		{"100,000 nested arrays", "POST", "/api/execute", `{"path": "` + path + `", "payload": {"x": ` + nested(100_000) + `}}`, 422,
			"nests arrays and objects more than 1000 levels deep (limit MaxJSONDepth)"},
		{"id past int64", "GET", "/api/executions/99999999999999999999", "", 422, "execution_id: id 99999999999999999999 is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := apitest.CountRows(ctx, shared.srv.Store)
			if err != nil {
				t.Fatal(err)
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequestWithContext(ctx, tc.method, shared.srv.URL+tc.target, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var answer struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(raw, &answer); err != nil || resp.StatusCode != tc.status || !strings.Contains(answer.Error, tc.want) {
				t.Fatalf("%d %s, want %d naming %q", resp.StatusCode, bytes.TrimSpace(raw), tc.status, tc.want)
			}
			if after, err := apitest.CountRows(ctx, shared.srv.Store); err != nil || after != before {
				t.Fatalf("rows written: %+v → %+v (%v)", before, after, err)
			}
		})
	}
}

// nested is n arrays, one inside the other.
func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
