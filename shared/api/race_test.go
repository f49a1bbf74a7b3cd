package api_test

import (
	"strconv"
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

// TestLateWorkerOverHTTP: after a lease expires and another worker takes the
// command (attempt 2), the first worker's reports are answered 409 and the
// step keeps the second worker's result (R-L3, R-L8).
func TestLateWorkerOverHTTP(t *testing.T) {
	const lease = 300 * time.Millisecond
	f := newFixture(t, apitest.Options{Lease: lease})
	a := f.s.API
	target := "/api/commands/" + strconv.FormatInt(f.command, 10) + "/claim"
	slow := must(t, a, 200, call{method: "POST", target: target, token: tWorker, body: map[string]any{"worker_id": "slow"}})
	commandID := slow.str("command_id")
	time.Sleep(2 * lease)
	// The re-issued attempt waits out the step's retry backoff (429 until due, R-L7).
	fast := serve(t, a, call{method: "POST", target: target, token: tWorker, body: map[string]any{"worker_id": "fast"}})
	for tries := 0; fast.Status == 429 && tries < 10; tries++ {
		time.Sleep(time.Duration(fast.json["retry_after_seconds"].(int64)) * time.Second)
		fast = serve(t, a, call{method: "POST", target: target, token: tWorker, body: map[string]any{"worker_id": "fast"}})
	}
	if fast.Status != 200 || fast.json["attempt"] != int64(2) {
		t.Fatalf("claim after expiry: %s", fast.Body)
	}
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
	report("slow", 1, 99, 409)
	r := must(t, a, 200, call{method: "GET", target: "/api/executions/" + strconv.FormatInt(f.exec, 10), token: tAPI})
	start, _ := r.json["steps"].(map[string]any)["start"].(map[string]any)
	if res, _ := start["result"].(map[string]any); res["n"] != int64(1) {
		t.Fatalf("start: %v; the late worker's result must be ignored", start)
	}
}
