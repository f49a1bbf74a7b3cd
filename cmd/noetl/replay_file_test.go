package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/jsonx"
)

// TestReplayEventsFile: `noetl replay --events FILE` folds the parity log
// offline to NoETL's expected state, shows what changed since --diff-from, and
// refuses --verify, which needs a live snapshot.
func TestReplayEventsFile(t *testing.T) {
	dir := filepath.Join(conformance.Dir(t), "replay")
	events := filepath.Join(dir, "events.json")
	raw, err := os.ReadFile(filepath.Join(dir, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := jsonx.DecodeObject(raw)
	if err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI("replay", "--events", events)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	got, err := jsonx.DecodeObject([]byte(out))
	if err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"event_count", "last_event_id", "last_event_type"} {
		if !reflect.DeepEqual(got[k], want[k]) {
			t.Errorf("%s = %v, want %v", k, got[k], want[k])
		}
	}
	if g, w := got["execution"].(map[string]any)["status"], want["execution"].(map[string]any)["status"]; g != w {
		t.Errorf("execution.status = %v, want %v", g, w)
	}

	code, out, errOut = runCLI("replay", "--events", events, "--projection", "execution", "--as-of-position", "5", "--diff-from", "position:3")
	if code != exitOK {
		t.Fatalf("diff: exit %d: %s", code, errOut)
	}
	var doc struct {
		EventCount int `json:"event_count"`
		Diff       []struct {
			Op, Path      string
			Before, After any
		} `json:"diff"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, c := range doc.Diff {
		if c.Path == "/event_count" && c.Op == "replace" && c.Before == float64(3) && c.After == float64(5) {
			found = true
		}
	}
	if doc.EventCount != 5 || !found {
		t.Fatalf("diff from position 3 to 5: %s", out)
	}

	code, _, errOut = runCLI("replay", "--events", events, "--verify")
	if code != exitUsage || !strings.Contains(errOut, "--verify") || !strings.Contains(errOut, "execution id") {
		t.Fatalf("--verify with --events: exit %d, %q; want usage error naming the fix", code, errOut)
	}
}
