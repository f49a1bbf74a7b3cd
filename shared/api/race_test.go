package api_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/api/apitest"
)

// TestClaimRaceOverHTTP: workers racing for one command through the API get
// exactly one 200; every other claim is answered 409.
func TestClaimRaceOverHTTP(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	target := "/api/commands/" + strconv.FormatInt(f.command, 10) + "/claim"
	const workers = 8
	statuses := make([]int, workers)
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := serve(t, f.s.API, call{method: "POST", target: target, token: tWorker,
				body: map[string]any{"worker_id": "racer-" + strconv.Itoa(i)}})
			statuses[i] = r.Status
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, s := range statuses {
		count[s]++
	}
	if count[200] != 1 || count[409] != workers-1 {
		t.Fatalf("claim statuses %v, want one 200 and %d 409", count, workers-1)
	}
}

// secondAttempt is a fixture whose start command first claimed lost its
// lease (attempt 1) and second claimed holds attempt 2; it returns the
// command's id.
func secondAttempt(t *testing.T, first, second string) (*fixture, string) {
	t.Helper()
	const lease = 300 * time.Millisecond
	f := newFixture(t, apitest.Options{Lease: lease})
	a := f.s.API
	target := "/api/commands/" + strconv.FormatInt(f.command, 10) + "/claim"
	r := must(t, a, 200, call{method: "POST", target: target, token: tWorker, body: map[string]any{"worker_id": first}})
	commandID := r.str("command_id")
	time.Sleep(2 * lease)
	// The re-issued attempt waits out the step's retry backoff (429 until due, R-L7).
	r = serve(t, a, call{method: "POST", target: target, token: tWorker, body: map[string]any{"worker_id": second}})
	for tries := 0; r.Status == 429 && tries < 10; tries++ {
		time.Sleep(time.Duration(r.json["retry_after_seconds"].(int64)) * time.Second)
		r = serve(t, a, call{method: "POST", target: target, token: tWorker, body: map[string]any{"worker_id": second}})
	}
	if r.Status != 200 || r.json["attempt"] != int64(2) {
		t.Fatalf("claim after expiry: %s", r.Body)
	}
	return f, commandID
}

// TestLateWorkerOverHTTP: after a lease expires and another worker takes the
// command (attempt 2), the first worker's reports are answered 409 and the
// step keeps the second worker's result (R-L3, R-L8).
func TestLateWorkerOverHTTP(t *testing.T) {
	f, commandID := secondAttempt(t, "slow", "fast")
	a := f.s.API
	report := func(worker string, attempt int64, n int64, want int) {
		t.Helper()
		meta := map[string]any{"command_id": commandID, "attempt": attempt}
		for _, ev := range []map[string]any{
			{"event_type": "call.done", "status": "COMPLETED", "payload": map[string]any{"result": map[string]any{"status": "success", "data": map[string]any{"n": n}}}},
			{"event_type": "command.completed", "status": "success"},
		} {
			ev["execution_id"], ev["step"], ev["worker_id"], ev["meta"] = f.exec, "start", worker, meta
			must(t, a, want, call{method: "POST", target: "/api/events", token: tWorker, body: ev})
		}
	}
	report("fast", 2, 1, 200)
	report("slow", 1, 99, 200) // stored ignored (R-L8), answered as NoETL's server does
	r := must(t, a, 200, call{method: "GET", target: "/api/executions/" + strconv.FormatInt(f.exec, 10), token: tAPI})
	start, _ := r.json["steps"].(map[string]any)["start"].(map[string]any)
	if res, _ := start["result"].(map[string]any); res["n"] != int64(1) {
		t.Fatalf("start: %v; the late worker's result must be ignored", start)
	}
}

// TestFenceByHolderOverHTTP: issue 10's fencing defect through the API
// (R-L8). While A holds attempt 2, B's command.completed naming attempt 2 is
// stored ignored and answered, posted alone (/api/events: 200 naming why it was
// ignored, as NoETL's server takes it) or in a report (its event's status 409); A's real result then completes the step.
func TestFenceByHolderOverHTTP(t *testing.T) {
	f, commandID := secondAttempt(t, "x", "A")
	a := f.s.API
	exec := strconv.FormatInt(f.exec, 10)
	completed := func(worker string, n int64) map[string]any {
		return map[string]any{"execution_id": exec, "step": "start", "event_type": "command.completed", "status": "success",
			"worker_id": worker, "meta": map[string]any{"command_id": commandID, "attempt": int64(2)},
			"payload": map[string]any{"command_id": commandID, "result": map[string]any{"status": "success", "data": map[string]any{"n": n}}}}
	}
	r := must(t, a, 200, call{method: "POST", target: "/api/events", token: tWorker, body: completed("B", 99)})
	if !strings.Contains(r.str("ignored"), "held by A, not B") || r.str("event_id") == "" {
		t.Fatalf("B's completion: %s", r.Body)
	}
	r = must(t, a, 200, call{method: "POST", target: "/api/worker/report", token: tWorker,
		body: map[string]any{"worker_id": "B", "events": []any{completed("B", 98)}}})
	if ev := r.json["events"].([]any)[0].(map[string]any); ev["status"] != int64(409) || !strings.Contains(ev["error"].(string), "held by A, not B") {
		t.Fatalf("B's report: %s", r.Body)
	}
	evs := must(t, a, 200, call{method: "GET", target: "/api/executions/" + exec + "/events?event_type=command.completed", token: tAPI})
	for _, e := range evs.json["events"].([]any) {
		if m := e.(map[string]any); m["worker_id"] != "B" || m["ignored"] != true {
			t.Fatalf("stored completions %s, want B's two, ignored", evs.Body)
		}
	}

	r = must(t, a, 200, call{method: "POST", target: "/api/worker/report", token: tWorker,
		body: map[string]any{"worker_id": "A", "events": []any{completed("A", 1)}}})
	if ev := r.json["events"].([]any)[0].(map[string]any); ev["status"] != int64(200) || ev["commands_generated"] != int64(1) {
		t.Fatalf("A's report: %s", r.Body)
	}
	v := must(t, a, 200, call{method: "GET", target: "/api/executions/" + exec, token: tAPI})
	start, _ := v.json["steps"].(map[string]any)["start"].(map[string]any)
	if res, _ := start["result"].(map[string]any); res["n"] != int64(1) || start["attempts"] != int64(2) {
		t.Fatalf("start: %v; A's result must complete it", start)
	}
}
