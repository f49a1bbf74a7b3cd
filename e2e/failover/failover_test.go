package failover

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/api"
)

// outage is how long TestDatabaseStoppedForAMinute keeps the database down:
// an Aurora failover takes 30 to 60 s.
const outage = 60 * time.Second

// TestDatabaseStoppedForAMinute (issue 23): Postgres is stopped for a
// minute while executions run, with no worker or server killed. Every
// execution completes with its exact result and no command expires or runs
// twice, although every lease held at the stop lapses during it (the lease
// is shorter than the outage): the workers keep their finished results until
// the server takes them, and the server gives their holders a lease's time
// after the database is back before it expires anything. During the outage
// every function answers a request that needs the database 503 with
// Retry-After. The logs say what happened in a few lines.
func TestDatabaseStoppedForAMinute(t *testing.T) {
	t.Parallel()
	const lease = 30 * time.Second // under the outage; over the worker's longest backoff (10 s) twice
	st := startStack(t, options{lease: lease, drainEvery: time.Second})
	st.startWorker(t, "stopped", 4)
	r := st.startChains(t, "stopped", 6, 4, time.Second)
	running := waitRunning(t, st)
	serverMark, workerMark := st.serverLog.mark(), st.workerLog.mark()

	pg := st.srv.Postgres.Server()
	if err := pg.Halt("fast"); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	t.Logf("Postgres stopped with %d commands running; it stays down for %s", running, outage)
	probeEachFunction(t, st, r)
	time.Sleep(time.Until(stopped.Add(outage)))
	if err := pg.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("Postgres is back after %s", time.Since(stopped).Round(time.Millisecond))

	st.check(t, r)
	checkLogs(t, st, serverMark, workerMark, logBudget{server: 40, worker: 3, workerOutages: 1, serverSeesOutage: true})
}

// TestDatabaseCrashRestart (issue 23): the same under crash-like restarts
// (pg_ctl stop -m immediate, then start: what `pg_ctl restart -m immediate`
// does), twice while executions run. Transactions whose COMMIT was in
// flight are resolved, connections that died with the server are never
// handed to a request again (no 500), and nothing runs twice. The server
// says an outage it saw at its start and its end; a restart over before it
// dialed is not one it saw.
func TestDatabaseCrashRestart(t *testing.T) {
	t.Parallel()
	st := startStack(t, options{lease: 30 * time.Second, drainEvery: time.Second})
	st.startWorker(t, "crashed", 4)
	// Short steps: reports and commits are always in flight.
	r := st.startChains(t, "crashed", 12, 4, 300*time.Millisecond)
	waitRunning(t, st)
	serverMark, workerMark := st.serverLog.mark(), st.workerLog.mark()
	pg := st.srv.Postgres.Server()
	for i := range 2 {
		if i > 0 {
			time.Sleep(time.Second) // let the stack work between the crashes
		}
		if err := pg.Halt("immediate"); err != nil {
			t.Fatal(err)
		}
		if err := pg.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	st.check(t, r)
	checkLogs(t, st, serverMark, workerMark, logBudget{server: 30, worker: 6, workerOutages: -1})
}

// waitRunning waits until commands run, so the database stops under work in
// flight, and says how many.
func waitRunning(t *testing.T, st *stack) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a hang guard
	for {
		if n := st.running(t); n > 0 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatal("no command started running")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// logBudget is how many lines at WARN or above each process may write from
// the database's stop until every execution has ended, how many outages the
// worker sees (-1: any number), and whether the server must see one: a
// restart quicker than any dial may pass unseen, since a statement that
// loses its connection is not an outage (store/availability.go) and the
// pool dials again once the server is back.
type logBudget struct {
	server, worker, workerOutages int
	serverSeesOutage              bool
}

// checkLogs: an outage is said once at its start and once at its end by
// each process that saw it (the server per database), there is no ERROR and
// no 500, and the warnings fit the budget.
func checkLogs(t *testing.T, st *stack, serverMark, workerMark int, budget logBudget) {
	t.Helper()
	server, worker := st.serverLog.since(serverMark), st.workerLog.since(workerMark)
	serverWarn, workerWarn := atLeast(server, "WARN"), atLeast(worker, "WARN")
	t.Logf("from the stop to the end: the server wrote %d lines (%d at WARN or above), the worker %d (%d)",
		len(server), len(serverWarn), len(worker), len(workerWarn))
	if n := len(atLeast(server, "ERROR")); n > 0 {
		t.Errorf("the server logged %d errors", n)
	}
	if n := len(atLeast(worker, "ERROR")); n > 0 {
		t.Errorf("the worker logged %d errors", n)
	}
	if n := statuses(server)[http.StatusInternalServerError]; n > 0 {
		t.Errorf("the server answered 500 %d times", n)
	}
	down, back := count(server, "the database is unreachable"), count(server, "the database is reachable again")
	if (budget.serverSeesOutage && down < 1) || back != down {
		t.Errorf("the server said %d times that a database is unreachable and %d times that one is back; want each outage said at its start and its end",
			down, back)
	}
	down, back = count(worker, "the server is unavailable"), count(worker, "the server is available again")
	if back != down || (budget.workerOutages >= 0 && down != budget.workerOutages) {
		t.Errorf("the worker said %d times that the server is unavailable and %d times that it is back; want %d each",
			down, back, budget.workerOutages)
	}
	if len(serverWarn) > budget.server {
		t.Errorf("the server wrote %d lines at WARN or above; want at most %d", len(serverWarn), budget.server)
	}
	if len(workerWarn) > budget.worker {
		t.Errorf("the worker wrote %d lines at WARN or above; want at most %d", len(workerWarn), budget.worker)
	}
}

// probeEachFunction: with the database down, a request of every Lambda
// function that needs it is answered 503 with Retry-After (routes.json says
// which route is whose).
func probeEachFunction(t *testing.T, st *stack, r *run) {
	t.Helper()
	id := strconv.FormatInt(r.ids[0], 10)
	probes := map[string]struct{ method, path, body string }{
		api.FnStatus:    {"GET", "/api/executions/" + id, ""},
		api.FnCatalog:   {"GET", "/api/catalog", ""},
		api.FnClaim:     {"GET", "/api/commands/" + id, ""},
		api.FnIngest:    {"POST", "/api/worker/report", `{"worker_id": "probe", "claims": ["` + id + `"]}`},
		api.FnExecute:   {"POST", "/api/execute", `{"path": "` + r.path + `"}`},
		api.FnReplay:    {"GET", "/api/executions/" + id + "/replay", ""},
		api.FnOutbox:    {"GET", "/api/internal/outbox/pending-count", ""},
		api.FnSchedules: {"GET", "/api/schedules", ""},
		api.FnKeychain:  {"GET", "/api/credentials", ""},
	}
	router := api.NewRouter(api.Routes())
	for _, fn := range api.Functions() {
		p, ok := probes[fn]
		if !ok {
			t.Errorf("no probe for the %s function: add one of its routes that needs the database", fn)
			continue
		}
		if rt, _, _, ok := router.Find(p.method, p.path); !ok || rt.Function != fn {
			t.Errorf("%s %s is not a route of the %s function", p.method, p.path, fn)
		}
		req, err := http.NewRequest(p.method, st.srv.URL+p.path, strings.NewReader(p.body))
		if err != nil {
			t.Fatal(err)
		}
		if p.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", p.method, p.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var answer struct {
			Error  string `json:"error"`
			Status int    `json:"status"`
		}
		_ = json.Unmarshal(body, &answer)
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusServiceUnavailable || ra < 1 || answer.Status != 503 || !strings.Contains(answer.Error, "database") {
			t.Errorf("%s function, %s %s with the database down: %d, Retry-After %q, %s; want 503 with Retry-After naming the database",
				fn, p.method, p.path, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		} else {
			t.Logf("%s function, %s %s: 503, Retry-After: %d, %q", fn, p.method, p.path, ra, answer.Error)
		}
	}
}
