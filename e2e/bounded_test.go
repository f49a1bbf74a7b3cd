package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/conformance"
	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/wire"
	"github.com/noetl-go/noetl/shared/worker"
)

// runSummary executes a catalog path and waits for its end, reading only its
// summary (a view with results of tens of MB is not what these tests read).
func (s *stack) runSummary(t testing.TB, req wire.ExecuteRequest) (int64, *wire.Execution) {
	t.Helper()
	return s.runWith(t, req, s.cl.WaitSummary)
}

// exitOf is the result a step's last step.exit recorded inline, and its error.
func exitOf(evs []wire.Event, stepName string) (any, string) {
	var result any
	errText := ""
	for _, e := range evs {
		if e.EventType == "step.exit" && string(e.NodeName) == stepName {
			result = e.Context["result"]
			errText, _ = e.Context["error"].(string)
		}
	}
	return result, errText
}

// TestStorageTiersWithDefaults: NoETL's test_storage_tiers (read in place)
// with the product's defaults, the shape issue 28 found stuck: results of
// 0.1, 2 and 15 MB go by reference (NoETL's 64 KiB threshold: the 5 KB one
// stays inline), the artifact tool reads each back whole through its _ref,
// and the last step reads those results: its command carries them as
// references, so it is small and the run completes within its leases (the
// product's default lease: defaultLease). The playbook's
// own verdict names NoETL's storage tiers, which this server does not have,
// and reads the artifact's count outside its data: docs/noetl-playbooks.md.
func TestStorageTiersWithDefaults(t *testing.T) {
	t.Parallel()
	st := shared.defaultLease(t)
	st.startWorkers(t, "tiers", 2)
	path := st.register(t, filepath.Join(conformance.Dir(t), "noetl-e2e", "playbooks", "test_storage_tiers.yaml"))
	id, view := st.runSummary(t, wire.ExecuteRequest{Path: path, Pool: "tiers"})
	if view.Status != "COMPLETED" {
		t.Fatalf("status %s error %s", view.Status, view.Error)
	}
	evs := shared.events(t, id)
	if n := count(evs, "command.expired", "") + count(evs, "command.retry", ""); n != 0 {
		t.Fatalf("%d expiries and retries; with the default lease the run must end within its leases", n)
	}
	for name, n := range map[string]int64{"load_kv_data": 500, "load_disk_data": 2000, "load_large_data": 5000} {
		r := storedResult(t, evs, name)
		data, _ := r["data"].(map[string]any)
		if items, _ := data["items"].([]any); data["count"] != n || int64(len(items)) != n {
			t.Fatalf("%s read back count %v and %d items, want %d: the artifact tool reads the stored result whole", name, data["count"], len(items), n)
		}
	}
	got, _ := exitOf(evs, "final_summary")
	summary, _ := got.(map[string]any)
	tiers, _ := summary["tier_details"].(map[string]any)
	for tier, want := range map[string]bool{"inline": false, "nats_kv": true, "disk": true, "large_storage": true} {
		if got, _ := tiers[tier].(map[string]any); got["externalized"] != want {
			t.Errorf("tier %s: externalized %v, want %v (the worker's 64 KiB threshold, NoETL's): %v", tier, got["externalized"], want, got)
		}
	}
	for _, e := range evs {
		if e.EventType != "command.issued" {
			continue
		}
		b, _ := jsonx.Marshal(map[string]any(e.Context))
		if len(b) > 64<<10 {
			t.Errorf("%s's command carries %d bytes; results stored by reference must travel as references", e.NodeName, len(b))
		}
	}
	// Its steps are one-task pipelines, read for context updates: with none,
	// each keeps the worker's reference rather than a copy in the shard.
	for _, e := range evs {
		if e.EventType == "step.exit" && (e.NodeName == "test_large_storage" || e.NodeName == "load_large_data") {
			if ref, _ := e.Context["result_ref"].(map[string]any); ref["kind"] != string(engine.KindReference) || ref["uri"] == nil {
				t.Errorf("%s's step.exit names its result as %v, want the worker's reference", e.NodeName, ref)
			}
		}
	}
	rc, _ := lastIssued(evs, "final_summary")["render_context"].(map[string]any)
	if m, _ := rc["load_large_data"].(map[string]any); m[pipeline.RefLoadKey] == nil {
		t.Fatalf("final_summary's command carries load_large_data as %v, want its reference", m)
	}
	shared.verify(t, id)
}

// storedResult reads the result a step's worker stored by reference, from
// the stack's result store.
func storedResult(t *testing.T, evs []wire.Event, stepName string) map[string]any {
	t.Helper()
	for _, e := range evs {
		if e.EventType != "command.completed" || string(e.NodeName) != stepName {
			continue
		}
		ref, _ := e.Result["reference"].(map[string]any)
		uri, _ := ref["logical_uri"].(string)
		b, err := shared.srv.Results.Get(context.Background(), uri)
		if err != nil {
			t.Fatalf("%s's result at %q: %v", stepName, uri, err)
		}
		v, err := jsonx.DecodeObject(b)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	t.Fatalf("no command.completed of %s", stepName)
	return nil
}

func lastIssued(evs []wire.Event, stepName string) map[string]any {
	var ctx map[string]any
	for _, e := range evs {
		if e.EventType == "command.issued" && string(e.NodeName) == stepName {
			ctx = e.Context
		}
	}
	return ctx
}

// TestSixtyMBResult: a python step returning a 60 MB string, read by the next
// step, with the product's defaults. Read by the code (context, as NoETL's
// python reads it) it travels as the worker's reference; rendered into the
// next step's input, the server puts that value in the result store as a
// part of the command (engine.CommandInlineBytes): either way the command is
// small, the step reads all 60 MB and the run completes. A command that
// cannot be made small (a hundred values of 50 KB, none a part) fails its
// step at dispatch naming the key and the size. No lease expires, nothing is
// retried: the product's default lease (defaultLease).
func TestSixtyMBResult(t *testing.T) {
	t.Parallel()
	st := shared.defaultLease(t)
	st.startWorkers(t, "sixty", 2)
	many := ""
	for i := range 100 {
		many += fmt.Sprintf("k%d: \"{{ 'x' * 50000 }}\", ", i)
	}
	path := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: sixty_mb, path: e2e/sixty_mb}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      - {step: gen, when: "{{ workload.mode != 'many' }}"}
      - {step: by_many, when: "{{ workload.mode == 'many' }}"}
  - step: gen
    tool: {kind: python, code: "result = 'x' * 60000000"}
    next:
      - {step: by_code, when: "{{ workload.mode == 'code' }}"}
      - {step: by_input, when: "{{ workload.mode == 'input' }}"}
  - step: by_code
    tool: {kind: python, code: "result = {'length': len(context['gen'])}"}
  - step: by_input
    tool: {kind: python, input: {data: "{{ gen }}"}, code: "result = {'length': len(data)}"}
  - step: by_many
    tool: {kind: python, input: {`+strings.TrimSuffix(many, ", ")+`}, code: "result = 1"}
`)
	for _, tc := range []struct{ mode, status, step string }{{"code", "COMPLETED", "by_code"}, {"input", "COMPLETED", "by_input"}, {"many", "FAILED", "by_many"}} {
		t.Run(tc.mode, func(t *testing.T) {
			id, view := st.runSummary(t, wire.ExecuteRequest{Path: path, Pool: "sixty", Payload: map[string]any{"mode": tc.mode}})
			if view.Status != tc.status {
				t.Fatalf("status %s error %s, want %s", view.Status, view.Error, tc.status)
			}
			evs := shared.events(t, id)
			got, errText := exitOf(evs, tc.step)
			switch tc.mode {
			case "code", "input":
				if m, _ := got.(map[string]any); m["length"] != int64(60000000) {
					t.Fatalf("%s read %v, want the whole 60 MB", tc.step, got)
				}
				b, _ := jsonx.Marshal(map[string]any(lastIssued(evs, tc.step)))
				if len(b) > 64<<10 {
					t.Fatalf("%s's command carries %d bytes; the 60 MB must travel by reference", tc.step, len(b))
				}
			case "many":
				if !regexp.MustCompile(`^command: \d+ bytes of JSON, over the limit of 4194304 \(engine.MaxCommandBytes, 4 MiB\); args is \d+ bytes`).MatchString(errText) {
					t.Fatalf("by_many's error %q must name the key and the sizes", errText)
				}
				if n := count(evs, "command.issued", "by_many"); n != 0 {
					t.Fatalf("by_many was issued %d times; a command over the limit is never issued", n)
				}
			}
			if n := count(evs, "command.expired", "") + count(evs, "command.retry", ""); n != 0 {
				t.Fatalf("%d expiries and retries; the run must end within its leases", n)
			}
		})
	}
}

// TestAnswerOverWorkerLimit: a worker whose answer limit is smaller than the
// commands handed to it (a server without the eager-dispatch cap, or a
// client configured small) takes an answer over its limit as a refusal: it
// says so once per answer (an error naming the limit), reports its results
// again without asking for commands, and never backs off as if the server
// were down; the commands it lost expire within their lease, its pool
// heartbeats notwithstanding (our worker's extend no lease), and are retried,
// and the run ends (FAILED: no attempt can be delivered to this worker).
func TestAnswerOverWorkerLimit(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	shared.startWorkers(t, "small-answers", 1, func(w *worker.Standard) {
		w.MaxAnswerBytes = 16 << 10
		// Beats faster than the lease: they must not keep the commands the
		// worker lost (its pool beats extend no lease, controlplane/workers.go).
		w.PoolHeartbeat = lease / 6
		w.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	path := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: small_answers, path: e2e/small_answers}
workflow:
  - step: start
    tool: {kind: python, code: "result = 1"}
    next:
      - {step: big}
  - step: big
    tool: {kind: python, input: {pad: "{{ 'p' * 40000 }}"}, code: "result = len(pad)"}
`)
	id, view := shared.runSummary(t, wire.ExecuteRequest{Path: path, Pool: "small-answers"})
	if view.Status != "FAILED" {
		t.Fatalf("status %s error %s, want FAILED", view.Status, view.Error)
	}
	evs := shared.events(t, id)
	if _, errText := exitOf(evs, "start"); errText != "" || count(evs, "command.completed", "start") != 1 {
		t.Fatalf("start's result must be delivered once, by the report sent again: %d completions, error %q", count(evs, "command.completed", "start"), errText)
	}
	if count(evs, "command.expired", "big") == 0 || count(evs, "command.retry", "big") == 0 {
		t.Fatalf("big's lost command must expire and be retried (R-L3): %d expired, %d retries", count(evs, "command.expired", "big"), count(evs, "command.retry", "big"))
	}
	out := logs.String()
	if !strings.Contains(out, "over this worker's answer limit") || !strings.Contains(out, "limit of 16384 bytes (client.MaxAnswerBytes)") {
		t.Fatalf("the worker must say the answer was over its limit, naming it; its log:\n%s", out)
	}
	if strings.Contains(out, "is unavailable") {
		t.Fatalf("an answer over the limit is not an outage; the worker's log:\n%s", out)
	}
}
