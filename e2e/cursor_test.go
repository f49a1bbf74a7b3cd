package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/wire"
)

// cursorRows is the work table's size in TestCursorLoopWorkersKilled: with a
// worker killed every two to four seconds, enough for half a dozen kills
// mid-row. While each iteration opened a connection of its own a row cost
// about 60 ms of the test's time on 2 cores; with the postgres tool's
// connections kept between steps (pgIdle) 1,500 rows take about 17 s and 50
// CPU-s (3,000 took 41 s and 81 CPU-s of make test's budget). Killing more
// often drains no faster: each kill strands a worker's rows until its lease
// ends.
const cursorRows = 1_500

// cursorPlaybook drains a work table with a cursor loop: each claim marks up
// to max_in_flight pending rows claimed (counting the claim on the row) and
// each iteration marks its row done, logging it, only if the row is still
// claimed: the guard NoETL's cursor playbooks write.
const cursorPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: cursor_kill, path: e2e/cursor-kill}
workload: {work: cursor_work, done: cursor_done}
workflow:
  - step: start
    tool: {kind: noop}
    next: drain
  - step: drain
    retry: {max_attempts: 20, delay: 0}
    loop:
      cursor:
        kind: postgres
        auth: cursor_db
        claim: |
          WITH c AS (
            SELECT id FROM {{ workload.work }} WHERE status = 'pending'
            ORDER BY id FOR UPDATE SKIP LOCKED LIMIT {{ __frame_max_rows | default(1) | int }})
          UPDATE {{ workload.work }} w SET status = 'claimed', claims = w.claims + 1
          FROM c WHERE w.id = c.id RETURNING w.id
      iterator: row
      spec: {mode: cursor, max_in_flight: 50}
    tool:
      kind: postgres
      auth: cursor_db
      query: |
        WITH m AS (
          UPDATE {{ workload.work }} SET status = 'done' WHERE id = {{ iter.row.id }} AND status = 'claimed' RETURNING id)
        INSERT INTO {{ workload.done }} (id, at) SELECT id, clock_timestamp() FROM m
    next: [{step: end, when: "{{ event.name == 'loop.done' }}"}]
  - step: end
    tool: {kind: noop, input: {rows: "{{ drain.stats.total }}"}}
`

// TestCursorLoopWorkersKilled drains 1,500 rows with max_in_flight 50 while
// separate noetl worker processes are SIGKILLed every few seconds, mid-row
// and mid-claim, and replaced. Counted in the database: every row was done exactly
// once and claimed exactly once (a claim whose worker died before the server
// had its rows rolled back with the connection), and the execution's log
// replays to its snapshot. The dashboard then draws the loop with its rows done.
func TestCursorLoopWorkersKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("drains a work table while killing workers")
	}
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, shared.srv.ClusterDSN)
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last in, first out: the tables are dropped before the
	// connection closes (a deferred Close ran first and left them behind).
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	work, done := fmt.Sprintf("cursor_work_%d", os.Getpid()), fmt.Sprintf("cursor_done_%d", os.Getpid())
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE TABLE %[1]s (id int PRIMARY KEY, status text NOT NULL DEFAULT 'pending', claims int NOT NULL DEFAULT 0);
		INSERT INTO %[1]s (id) SELECT g FROM generate_series(1, %[3]d) g;
		CREATE TABLE %[2]s (id int NOT NULL, at timestamptz NOT NULL)`, work, done, cursorRows)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP TABLE "+work+"; DROP TABLE "+done) })
	path := registerYAML(t, cursorPlaybook)

	bin := buildNoetl(t)
	const pool = "cursor-kill"
	var mu sync.Mutex
	workers := map[int]*exec.Cmd{}
	n := 0
	start := func() {
		n++
		cmd := exec.Command(bin, "worker", "--server", shared.srv.URL, "--nats", shared.srv.NATSURL, "--pool", pool,
			"--id", fmt.Sprintf("cursor-%d", n), "--concurrency", "20", "--tool-user=")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Env = append(os.Environ(), `NOETL_CREDENTIAL_CURSOR_DB={"kind": "postgres", "dsn": "`+shared.srv.ClusterDSN+`"}`)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = cmd.Wait() }()
		mu.Lock()
		workers[cmd.Process.Pid] = cmd
		mu.Unlock()
	}
	killAll := func() {
		mu.Lock()
		defer mu.Unlock()
		for pid := range workers {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			delete(workers, pid)
		}
	}
	t.Cleanup(killAll)
	for range 3 {
		start()
	}

	id, err := shared.cl.Execute(ctx, wire.ExecuteRequest{Path: path, Pool: pool, Payload: map[string]any{"work": work, "done": done}})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	kills := 0
	stop := make(chan struct{})
	killed := make(chan int)
	go func() {
		rng := rand.New(rand.NewPCG(uint64(id), 3))
		k := 0
		defer func() { killed <- k }()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(2000+rng.IntN(2000)) * time.Millisecond):
			}
			mu.Lock()
			var victim int
			for pid := range workers {
				if victim == 0 || rng.IntN(2) == 0 {
					victim = pid
				}
			}
			if victim != 0 {
				_ = syscall.Kill(-victim, syscall.SIGKILL)
				delete(workers, victim)
				k++
			}
			mu.Unlock()
			start()
		}
	}()
	view, err := shared.cl.Wait(ctx, id, 500*time.Millisecond)
	close(stop)
	kills = <-killed
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(began)
	if view.Status != "COMPLETED" {
		t.Fatalf("the execution ended %s: %s", view.Status, view.Error)
	}
	var total, distinct, notDone, claimedTwice int
	if err := conn.QueryRow(ctx, "SELECT count(*), count(DISTINCT id) FROM "+done).Scan(&total, &distinct); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT count(*) FILTER (WHERE status <> 'done'), count(*) FILTER (WHERE claims <> 1) FROM "+work).Scan(&notDone, &claimedTwice); err != nil {
		t.Fatal(err)
	}
	evs := shared.events(t, id)
	expired := count(evs, "command.expired", "drain")
	var claimedRows int64
	for _, e := range evs {
		if e.EventType == "loop.claimed" {
			claimedRows += e.Context["claimed"].(int64)
		}
	}
	t.Logf("%d rows in %s with %d workers killed; %d commands expired; %d claims returned %d rows",
		cursorRows, took.Round(time.Millisecond), kills, expired, count(evs, "loop.claimed", "drain"), claimedRows)
	if total != cursorRows || distinct != cursorRows || notDone != 0 || claimedTwice != 0 {
		t.Fatalf("counted in the database: %d rows done (%d distinct) of %d, %d not done, %d claimed other than once",
			total, distinct, cursorRows, notDone, claimedTwice)
	}
	if kills == 0 || expired == 0 {
		t.Fatalf("%d kills and %d expired commands: the test did not kill a worker mid-row", kills, expired)
	}
	if rows := step(view, "end"); rows.Status != "completed" {
		t.Fatalf("end %+v", rows)
	}
	shared.verify(t, id)

	needDashboard(t)
	b := newBrowser(t, 1280, 800)
	eid := strconv.FormatInt(id, 10)
	b.run(t, "open the execution", chromedp.Navigate(shared.srv.URL+"/#/executions/"+eid),
		chromedp.WaitVisible(`#graph g.node[data-step="drain"][data-state="completed"]`, chromedp.ByQuery))
	want := fmt.Sprintf("%d of %d rows", claimedRows, claimedRows)
	if label := b.attr(t, `#graph g.node[data-step="drain"]`, "aria-label"); !strings.Contains(label, want) {
		t.Errorf("the cursor loop's node says %q, want %q", label, want)
	}
}
