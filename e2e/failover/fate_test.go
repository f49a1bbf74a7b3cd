package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/noetl-go/noetl/shared/notify"
)

// TestCommitFate (issue 23): what becomes of a COMMIT that its caller, or
// its connection, does not see to the end. The database holds the COMMIT in
// flight: with synchronous_commit on it waits for a synchronous standby that
// never answers, until the test lets it go. No drain runs in this stack, so
// a notification that arrives was published by the request itself.
func TestCommitFate(t *testing.T) {
	t.Parallel()
	st := startStack(t, options{lease: 30 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hang guard
	defer cancel()
	const path, pool = "failover/commit-fate", "commit-fate"
	if _, err := st.cl.Register(ctx, chainYAML(path, 1, 0)); err != nil {
		t.Fatal(err)
	}
	cons, err := notify.EnsureConsumer(ctx, st.srv.JS, pool)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, st.srv.Postgres.Server().AdminDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	body := `{"path": "` + path + `", "execution_pool": "` + pool + `"}`

	// The client disconnects during the commit: the commit stands, is
	// published at once, and the log says so. The COMMIT is not cut short
	// (and then found to have happened): it completes.
	t.Run("the caller leaves", func(t *testing.T) {
		h := holdExecute(t, ctx, st, admin, body)
		mark := st.serverLog.mark()
		h.leave()
		if a := <-h.answer; a.err == nil {
			t.Fatalf("the request was answered (%d) while its COMMIT was held", a.status)
		}
		st.serverLog.wait(ctx, "the caller went away while COMMIT was in flight")
		h.release(t)
		line := st.serverLog.wait(ctx, "the commit stands although its caller went away")
		if line["published"] != float64(1) || line["notifications"] != float64(1) {
			t.Errorf("the commit's notifications: %v", line)
		}
		ids, _ := line["execution_ids"].([]any)
		if len(ids) != 1 {
			t.Fatalf("the log names executions %v, want the one started", line["execution_ids"])
		}
		id, _ := strconv.ParseInt(fmt.Sprint(ids[0]), 10, 64)
		if view, err := st.cl.Execution(ctx, id); err != nil || view.Status != "RUNNING" {
			t.Fatalf("execution %d after its caller left: %v %v", id, view, err)
		}
		published(t, cons, id, h.unheld)
		for _, l := range st.serverLog.since(mark) {
			if l["level"] == "ERROR" || strings.Contains(fmt.Sprint(l["msg"]), "during COMMIT") {
				t.Errorf("the server logged %v", l)
			}
		}
	})

	// The connection dies during the commit (its server process is ended
	// while it waits for the standby, after the commit record is written):
	// the answer to COMMIT is lost, the server reads the execution's log at
	// the seq it wrote, finds the commit stands, publishes and answers 200.
	t.Run("the connection dies", func(t *testing.T) {
		h := holdExecute(t, ctx, st, admin, body)
		var ended bool
		if err := admin.QueryRow(ctx, `SELECT pg_terminate_backend($1, 10000)`, h.pid).Scan(&ended); err != nil || !ended {
			t.Fatalf("end the server process %d: %v %v", h.pid, ended, err)
		}
		h.release(t)
		a := <-h.answer
		if a.err != nil || a.status != http.StatusOK {
			t.Fatalf("the execute was answered %d %s (%v); want 200: the commit stood", a.status, a.body, a.err)
		}
		var started struct {
			ExecutionID json.Number `json:"execution_id"`
		}
		if err := json.Unmarshal(a.body, &started); err != nil {
			t.Fatal(err)
		}
		id, _ := started.ExecutionID.Int64()
		line := st.serverLog.wait(ctx, "the connection failed during COMMIT; the commit stands")
		if line["execution_id"] != float64(id) {
			t.Errorf("the log resolved execution %v, want %d", line["execution_id"], id)
		}
		published(t, cons, id, h.unheld)
	})
}

// heldCommit is an execute request whose COMMIT the database holds.
type heldCommit struct {
	admin  *pgx.Conn
	ctx    context.Context
	leave  context.CancelFunc // the client goes away
	answer chan answer
	pid    int // the server process waiting in COMMIT
	held   bool
	// unheld are the executions of attempts that committed before the
	// setting reached their session: their notifications come first.
	unheld []int64
}

type answer struct {
	status int
	body   []byte
	err    error
}

// holdExecute makes the database hold commits and sends an execute until
// one waits in its COMMIT (the setting reaches a session as it next commits).
func holdExecute(t *testing.T, ctx context.Context, st *stack, admin *pgx.Conn, body string) *heldCommit {
	t.Helper()
	h := &heldCommit{admin: admin, ctx: ctx}
	h.set(t, true)
	t.Cleanup(func() { h.release(t) })
	for attempt := 1; ; attempt++ {
		if attempt > 20 {
			t.Fatal("no COMMIT was ever held waiting for the standby")
		}
		reqCtx, leave := context.WithCancel(ctx)
		h.leave, h.answer = leave, make(chan answer, 1)
		go func() {
			req, _ := http.NewRequestWithContext(reqCtx, "POST", st.srv.URL+"/api/execute", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			var a answer
			resp, err := http.DefaultClient.Do(req)
			if a.err = err; err == nil {
				a.status = resp.StatusCode
				a.body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			h.answer <- a
		}()
		if h.waitHeld(t) {
			return h
		}
		leave()
	}
}

// waitHeld waits until a session waits in COMMIT for the standby (true), or
// the request is answered (false: it committed before the setting reached
// it). The mark that an unheld attempt's notification was published is a
// commit of its own, and may be the one held: it is not the execute's.
func (h *heldCommit) waitHeld(t *testing.T) bool {
	t.Helper()
	for {
		err := h.admin.QueryRow(h.ctx, `SELECT pid FROM pg_stat_activity
			WHERE wait_event = 'SyncRep' AND query !~ '^\s*UPDATE outbox ' LIMIT 1`).Scan(&h.pid)
		switch {
		case err == nil:
			return true
		case err != pgx.ErrNoRows:
			t.Fatal(err)
		}
		select {
		case a := <-h.answer:
			if a.err != nil {
				t.Fatal(a.err)
			}
			var started struct {
				ExecutionID json.Number `json:"execution_id"`
			}
			if err := json.Unmarshal(a.body, &started); err == nil {
				if id, err := started.ExecutionID.Int64(); err == nil {
					h.unheld = append(h.unheld, id)
				}
			}
			return false
		case <-h.ctx.Done():
			t.Fatal("no COMMIT was held, and the request was never answered")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// release lets held commits go, and commits go on unheld.
func (h *heldCommit) release(t *testing.T) {
	t.Helper()
	if h.held {
		h.set(t, false)
	}
}

func (h *heldCommit) set(t *testing.T, hold bool) {
	t.Helper()
	sql := `ALTER SYSTEM RESET synchronous_standby_names`
	if hold {
		sql = `ALTER SYSTEM SET synchronous_standby_names = 'a_standby_that_never_answers'`
	}
	if _, err := h.admin.Exec(h.ctx, sql); err != nil {
		t.Fatal(err)
	}
	if _, err := h.admin.Exec(h.ctx, `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	h.held = hold
}

// published checks that the execution's first command was announced on
// NATS: the next notification, after those of the executions of unheld
// attempts (holdExecute's tries that committed at once).
func published(t *testing.T, cons jetstream.Consumer, id int64, unheld []int64) {
	t.Helper()
	var got []string
	for {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		var n struct {
			ExecutionID json.Number `json:"execution_id"`
		}
		for msg := range batch.Messages() {
			got = append(got, string(msg.Data()))
			_ = json.Unmarshal(msg.Data(), &n)
			_ = msg.Ack()
		}
		exec, _ := n.ExecutionID.Int64()
		switch {
		case len(got) > 0 && exec == id:
			return
		case len(got) > 0 && slices.Contains(unheld, exec):
			continue
		}
		t.Fatalf("notifications %q, want the first command of execution %d (after those of %v)", got, id, unheld)
	}
}
