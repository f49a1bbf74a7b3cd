package whatif_test

import (
	"context"
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/tools/noop"
	"github.com/noetl-go/noetl/shared/whatif"
	"github.com/noetl-go/noetl/shared/wire"
)

func parse(t testing.TB, file string) *playbook.Playbook {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	pb, diags := parser.Parse(src)
	if diags.HasErrors() {
		t.Fatalf("%s: %v", file, diags)
	}
	return pb
}

// priceReplies is the price service as v1's runs met it: kind a has a
// price, b is unknown (404), c is busy (503), z has a price the store
// refuses (500).
func priceReplies(kind string, calls *int) map[string]enginetest.Tool {
	return map[string]enginetest.Tool{
		"fetch": func(*enginetest.Cmd) enginetest.Reply {
			*calls++
			switch kind {
			case "b":
				return enginetest.Reply{Status: "error", Error: "HTTP 404", Data: map[string]any{"status_code": int64(404)}}
			case "c":
				return enginetest.Reply{Status: "error", Error: "HTTP 503", Data: map[string]any{"status_code": int64(503)}}
			}
			return enginetest.Reply{Data: map[string]any{"status_code": int64(200), "data": map[string]any{"price": int64(5)}}}
		},
		"store": func(*enginetest.Cmd) enginetest.Reply {
			*calls++
			if kind == "z" {
				return enginetest.Reply{Status: "error", Error: "HTTP 500", Data: map[string]any{"status_code": int64(500)}}
			}
			return enginetest.Reply{Data: map[string]any{"status_code": int64(200)}}
		},
	}
}

// record runs v1 in the simulator, as a worker would, and returns its log.
func record(t testing.TB, pb *playbook.Playbook, id int64, kind string, calls *int) whatif.Record {
	t.Helper()
	s := enginetest.New(pb, id)
	s.Tools = priceReplies(kind, calls)
	s.Default = func(c *enginetest.Cmd) enginetest.Reply { // the worker's noop
		cfg := maps.Clone(c.Payload["tool_config"].(map[string]any))
		delete(cfg, "args")
		return enginetest.Reply{Data: noop.Run(cfg).Data}
	}
	if err := s.Start(map[string]any{"kind": kind}); err != nil {
		t.Fatal(err)
	}
	if err := s.RunToEnd(100); err != nil {
		t.Fatal(err)
	}
	return whatif.Record{ExecutionID: id, Path: pb.Metadata.Path, Version: 1, Status: s.Status(), Events: s.Log}
}

func runner() *whatif.Runner { return &whatif.Runner{Engine: engine.New(engine.Config{})} }

// TestWhatIfOutcomes: the fix (v2) over v1's recorded runs, answered from the
// records alone (no tool is called): a completes the same way, b now
// completes through the fallback (diverging at fetch), c needs a live run at
// fetch (v2 retries a 503, and the second attempt was never run), z fails the
// same way.
func TestWhatIfOutcomes(t *testing.T) {
	v1, v2 := parse(t, "testdata/prices-v1.yaml"), parse(t, "testdata/prices-v2.yaml")
	calls := 0
	recs := map[string]whatif.Record{}
	for i, k := range []string{"a", "b", "c", "z"} {
		recs[k] = record(t, v1, int64(1024*(i+1)), k, &calls)
	}
	before := calls
	want := map[string]struct {
		outcome, diverges, live string
		steps                   string
	}{
		"a": {wire.OutcomeSame, "", "", "start:engine fetch:replayed store:replayed done:engine"},
		"b": {wire.OutcomeWouldComplete, "fetch", "", "start:engine fetch:changed fallback:changed"},
		"c": {wire.OutcomeNeedsLive, "fetch", "fetch", "start:engine fetch:no_record"},
		"z": {wire.OutcomeSame, "", "", "start:engine fetch:replayed store:replayed"},
	}
	r := runner()
	for k, w := range want {
		got, err := r.Execution(context.Background(), whatif.Version{PB: v2, CatalogID: 9, Version: 2}, recs[k])
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		var steps []string
		for _, s := range got.Steps {
			steps = append(steps, s.Step+":"+s.Verdict)
		}
		if got.Outcome != w.outcome || string(got.DivergesAt) != w.diverges || string(got.NeedsLiveAt) != w.live || strings.Join(steps, " ") != w.steps {
			t.Errorf("%s: outcome %s diverges_at %q needs_live_at %q steps %s; want %s %q %q %s\n%+v",
				k, got.Outcome, got.DivergesAt, got.NeedsLiveAt, strings.Join(steps, " "), w.outcome, w.diverges, w.live, w.steps, got)
		}
		if k == "b" && !strings.Contains(got.Steps[1].Diff, "status: recorded failed, now completed") {
			t.Errorf("b: fetch diff %q", got.Steps[1].Diff)
		}
		if k == "c" && !strings.Contains(got.Steps[1].Diff, "attempt 2 (visit 1) was never run") {
			t.Errorf("c: fetch diff %q", got.Steps[1].Diff)
		}
	}
	if calls != before {
		t.Errorf("the what-if called tools %d times", calls-before)
	}
}

// TestWhatIfChangedInput: a version whose command renders another input
// needs a live run at that step, naming what changed.
func TestWhatIfChangedInput(t *testing.T) {
	v1 := parse(t, "testdata/prices-v1.yaml")
	src, _ := os.ReadFile("testdata/prices-v1.yaml")
	v3, diags := parser.Parse([]byte(strings.Replace(string(src), "/store", "/store/v3", 1)))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	calls := 0
	rec := record(t, v1, 1024, "a", &calls)
	got, err := runner().Execution(context.Background(), whatif.Version{PB: v3, Version: 3}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome != wire.OutcomeNeedsLive || got.NeedsLiveAt != "store" {
		t.Fatalf("got %+v", got)
	}
	last := got.Steps[len(got.Steps)-1]
	if last.Verdict != wire.VerdictNoRecord || !strings.Contains(last.Diff, "tool_config.url") || !strings.Contains(last.Diff, "/store/v3") {
		t.Fatalf("store: %+v", last)
	}
}

// TestWhatIfSameVersion: the recorded version itself reproduces every
// record: same, every step replayed or computed.
func TestWhatIfSameVersion(t *testing.T) {
	v1 := parse(t, "testdata/prices-v1.yaml")
	calls := 0
	for i, k := range []string{"a", "b", "c", "z"} {
		rec := record(t, v1, int64(1024*(i+1)), k, &calls)
		got, err := runner().Execution(context.Background(), whatif.Version{PB: v1, Version: 1}, rec)
		if err != nil {
			t.Fatal(err)
		}
		if got.Outcome != wire.OutcomeSame || got.DivergesAt != "" {
			t.Errorf("%s: %+v", k, got)
		}
	}
}

// TestWhatIfLoop: a loop's iterations are matched by index. The same
// version is the same; a version looping over one more item needs a live
// run at the loop: each iteration's input holds the loop's total, which
// changed (the tool sees it), and the diff says so.
func TestWhatIfLoop(t *testing.T) {
	const src = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: each, path: whatif/each}
workload: {items: [1, 2, 3]}
workflow:
  - step: start
    loop: {in: "{{ workload.items }}", iterator: item, spec: {mode: parallel}}
    tool: {kind: http, url: "http://svc/item/{{ item }}"}
    next: end
  - step: end
    tool: {kind: noop}
`
	v1, diags := parser.Parse([]byte(src))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s := enginetest.New(v1, 1024)
	s.Default = func(c *enginetest.Cmd) enginetest.Reply {
		if c.ToolKind == "noop" {
			return enginetest.Reply{Data: noop.Run(map[string]any{}).Data}
		}
		return enginetest.Reply{Data: map[string]any{"n": enginetest.Args(c)["item"]}}
	}
	if err := s.Start(nil); err != nil {
		t.Fatal(err)
	}
	if err := s.RunToEnd(100); err != nil {
		t.Fatal(err)
	}
	rec := whatif.Record{ExecutionID: 1024, Path: "whatif/each", Version: 1, Status: s.Status(), Events: s.Log}
	got, err := runner().Execution(context.Background(), whatif.Version{PB: v1, Version: 1}, rec)
	if err != nil || got.Outcome != wire.OutcomeSame {
		t.Fatalf("the same version: %+v %v", got, err)
	}
	v2, diags := parser.Parse([]byte(strings.Replace(src, "items: [1, 2, 3]", "items: [1, 2, 3, 4]", 1)))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	// The recorded workload wins over v2's default: the same items, the same run.
	if got, err := runner().Execution(context.Background(), whatif.Version{PB: v2, Version: 2}, rec); err != nil || got.Outcome != wire.OutcomeSame {
		t.Fatalf("v2 over the recorded workload: %+v %v", got, err)
	}
	v3, diags := parser.Parse([]byte(strings.Replace(src, `in: "{{ workload.items }}"`, `in: "{{ workload.items + [9] }}"`, 1)))
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	got, err = runner().Execution(context.Background(), whatif.Version{PB: v3, Version: 3}, rec)
	if err != nil || got.Outcome != wire.OutcomeNeedsLive || got.NeedsLiveAt != "start" {
		t.Fatalf("v3: %+v %v", got, err)
	}
	if d := got.Steps[0].Diff; !strings.Contains(d, "iteration 0") || !strings.Contains(d, "_total: recorded 3, now 4") {
		t.Fatalf("v3 says %q, want the first iteration's changed total", d)
	}
}
