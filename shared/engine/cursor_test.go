package engine_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/engine/enginetest"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// queue is a work table as a cursor loop's claim sees it: rows pending,
// claimed or done, a claim taking up to LIMIT pending rows.
type queue struct {
	status  map[int64]string
	order   []int64
	claims  map[int64]int // committed claims per row
	done    map[int64]int // pending→done transitions per row (the effect)
	runs    int           // iteration attempts
	next    func(id int64) []int64
	maxSeen int
}

func newQueue(n int) *queue {
	q := &queue{status: map[int64]string{}, claims: map[int64]int{}, done: map[int64]int{}}
	for i := 1; i <= n; i++ {
		q.add(int64(i))
	}
	return q
}

func (q *queue) add(id int64) {
	if _, ok := q.status[id]; !ok {
		q.status[id] = "pending"
		q.order = append(q.order, id)
	}
}

var limitRE = regexp.MustCompile(`LIMIT (\d+)`)

// claim runs the claim statement: it takes up to the rendered LIMIT pending rows.
func (q *queue) claim(c *enginetest.Cmd) enginetest.Reply {
	cfg := c.Payload["tool_config"].(map[string]any)
	m := limitRE.FindStringSubmatch(cfg["query"].(string))
	if m == nil {
		return enginetest.Reply{Status: "error", Error: "no LIMIT in " + cfg["query"].(string)}
	}
	limit, _ := strconv.Atoi(m[1])
	rows := []any{}
	for _, id := range q.order {
		if len(rows) == limit {
			break
		}
		if q.status[id] == "pending" {
			q.status[id] = "claimed"
			q.claims[id]++
			rows = append(rows, map[string]any{"id": id})
		}
	}
	return enginetest.Reply{Data: map[string]any{"command_0": map[string]any{"rows": rows}, "statement_count": int64(1), "rows": rows}}
}

// process runs one row: the effect happens only for a claimed row (the guard
// NoETL's playbooks write), and may enqueue follow-up rows.
func (q *queue) process(c *enginetest.Cmd) enginetest.Reply {
	q.runs++
	row := enginetest.Args(c)["row"].(map[string]any)
	id := row["id"].(int64)
	if q.status[id] == "claimed" {
		q.status[id] = "done"
		q.done[id]++
		if q.next != nil {
			for _, n := range q.next(id) {
				q.add(n)
			}
		}
	}
	return enginetest.Reply{Data: map[string]any{"id": id}}
}

func (q *queue) tool() enginetest.Tool {
	return func(c *enginetest.Cmd) enginetest.Reply {
		if c.Meta["cursor_claim"] == true {
			return q.claim(c)
		}
		return q.process(c)
	}
}

// check asserts every row was claimed once and done once.
func (q *queue) check(t *testing.T) {
	t.Helper()
	for _, id := range q.order {
		if q.status[id] != "done" || q.done[id] != 1 || q.claims[id] != 1 {
			t.Fatalf("row %d: status %s, done %d times, claimed %d times", id, q.status[id], q.done[id], q.claims[id])
		}
	}
}

const cursorStep = `
workflow:
  - step: start
    retry: {max_attempts: 5, delay: 0}
    loop:
      cursor:
        kind: postgres
        auth: pg_work
        claim: |
          UPDATE work SET status = 'claimed' WHERE id IN (
            SELECT id FROM work WHERE status = 'pending' LIMIT {{ __frame_max_rows | default(1) | int }} FOR UPDATE SKIP LOCKED)
          RETURNING id
      iterator: row
      spec: {mode: cursor%s}
    tool: {kind: noop, input: {row: "{{ iter.row }}", index: "{{ _index }}"}}
    next: [{step: after, when: "{{ event.name == 'loop.done' }}"}]
  - step: after
    tool: {kind: noop, input: {n: "{{ start.stats.total }}", data: "{{ start.data | length }}"}}
`

// TestCursorLoop drains work tables of several shapes: every row is claimed
// once and done once, no more iterations run at once than the loop's limit,
// and the snapshot is the fold of the log (replay).
func TestCursorLoop(t *testing.T) {
	cases := []struct {
		name      string
		spec      string
		rows      int
		next      func(id int64) []int64
		limit     int
		claimSize string
		items     int // the loop's items (rows, or frames)
	}{
		{name: "empty table: one claim, done", rows: 0, limit: 1, claimSize: "1"},
		{name: "one at a time by default", rows: 5, limit: 1, claimSize: "1", items: 5},
		{name: "max_in_flight rows per claim", spec: ", max_in_flight: 3", rows: 10, limit: 3, claimSize: "3", items: 10},
		{name: "frame.max_rows", spec: ", max_in_flight: 2, frame: {max_rows: 4}", rows: 9, limit: 2, claimSize: "4", items: 9},
		{name: "row_concurrency", spec: ", max_in_flight: 2, frame: {row_concurrency: 3}", rows: 20, limit: 6, claimSize: "6", items: 20},
		{name: "templated max_in_flight", spec: `, max_in_flight: "{{ workload.width }}"`, rows: 8, limit: 4, claimSize: "4", items: 8},
		// Rows the iterations add (the next page of a page) are claimed too: a
		// claim that finds nothing while iterations run waits for them.
		{name: "iterations add rows", spec: ", max_in_flight: 4", rows: 6, limit: 4, claimSize: "4", items: 6 + 6*2,
			next: func(id int64) []int64 {
				if id <= 6 {
					return []int64{id * 100}
				}
				if id%100 == 0 && id < 1000 {
					return []int64{id * 10}
				}
				return nil
			}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := sim(t, "workload: {width: 4}\n"+fmt.Sprintf(cursorStep, c.spec))
			q := newQueue(c.rows)
			q.next = c.next
			s.Tools = map[string]enginetest.Tool{"start": q.tool()}
			maxInFlight := 0
			s.Observe = func(engine.Event, *engine.Outcome, []byte) {
				n := 0
				for _, cmd := range s.Commands {
					if cmd.Step == "start" && cmd.Meta["cursor_claim"] != true && (cmd.Status == "PENDING" || cmd.Status == "CLAIMED") {
						n++
					}
				}
				maxInFlight = max(maxInFlight, n)
			}
			run(t, s, nil)
			if s.Status() != lifecycle.ExecutionCompleted {
				t.Fatalf("status %s: %v", s.Status(), s.Snapshot().Error)
			}
			q.check(t)
			if got := len(s.Result("start").([]any)); got != c.items {
				t.Fatalf("loop result has %d items, want %d", got, c.items)
			}
			if maxInFlight > c.limit {
				t.Fatalf("%d iterations in flight at once, over the limit of %d", maxInFlight, c.limit)
			}
			if c.items >= 2*c.limit && maxInFlight != c.limit {
				t.Fatalf("at most %d iterations in flight at once, want the limit %d reached", maxInFlight, c.limit)
			}
			after := enginetest.Args(lastCommand(s, "after"))
			if after["n"] != int64(c.items) || after["data"] != int64(c.items) {
				t.Fatalf("after sees %v, want the loop aggregate of %d items", after, c.items)
			}
			claims := 0
			for _, cmd := range s.Commands {
				if cmd.Meta["cursor_claim"] == true {
					claims++
					q := cmd.Payload["tool_config"].(map[string]any)["query"].(string)
					if !strings.Contains(q, "LIMIT "+c.claimSize+" ") || cmd.ToolKind != "postgres" {
						t.Fatalf("claim %s: kind %s, query %q; want LIMIT %s", cmd.ID, cmd.ToolKind, q, c.claimSize)
					}
				}
			}
			if s.Count(eventtype.LoopClaimed, "start") != claims || claims == 0 {
				t.Fatalf("%d claims, %d loop.claimed events", claims, s.Count(eventtype.LoopClaimed, "start"))
			}
			last := s.Log[s.Index(eventtype.LoopClaimed, "start", claims-1)]
			if last.Context["drained"] != true || last.Context["total"] != int64(c.items) {
				t.Fatalf("last claim %v: want drained at total %d", last.Context, c.items)
			}
		})
	}
}

func lastCommand(s *enginetest.Sim, step string) *enginetest.Cmd {
	var out *enginetest.Cmd
	for _, c := range s.Commands {
		if c.Step == step && (out == nil || c.IssuedEventID > out.IssuedEventID) {
			out = c
		}
	}
	return out
}

// TestCursorLoopPerFrame: process: frame makes each claim one iteration whose
// iterator is the claimed rows.
func TestCursorLoopPerFrame(t *testing.T) {
	s := sim(t, fmt.Sprintf(cursorStep, ", frame: {max_rows: 4, process: frame}"))
	q := newQueue(10)
	var frames []int
	s.Tools = map[string]enginetest.Tool{"start": func(c *enginetest.Cmd) enginetest.Reply {
		if c.Meta["cursor_claim"] == true {
			return q.claim(c)
		}
		rows := enginetest.Args(c)["row"].([]any)
		frames = append(frames, len(rows))
		for _, r := range rows {
			id := r.(map[string]any)["id"].(int64)
			q.status[id] = "done"
			q.done[id]++
		}
		return enginetest.Reply{Data: int64(len(rows))}
	}}
	run(t, s, nil)
	q.check(t)
	if fmt.Sprint(frames) != "[4 4 2]" {
		t.Fatalf("frames %v, want [4 4 2]", frames)
	}
}

// TestCursorLoopFaults drains 300 rows with commands run in random order, some
// failing transiently and some workers vanishing (lease expiry) after a claim
// or mid-row: every row is still claimed once and done once. A vanished
// claim's rows were never committed (the worker holds the claim's transaction
// open until the server has the rows), so the sim's claim takes rows only when
// it answers.
func TestCursorLoopFaults(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			s := sim(t, fmt.Sprintf(cursorStep, ", max_in_flight: 8, frame: {max_rows: 5}"))
			s.Rand = rng
			q := newQueue(300)
			s.Tools = map[string]enginetest.Tool{"start": func(c *enginetest.Cmd) enginetest.Reply {
				switch rng.IntN(10) {
				case 0:
					if c.Attempt < 3 {
						return enginetest.Reply{Expire: true}
					}
				case 1:
					if c.Attempt < 5 {
						return enginetest.Reply{Status: "error", Error: "transient"}
					}
				case 2:
					if c.Meta["cursor_claim"] != true && c.Attempt < 3 {
						// The row's effect committed, then the worker died before
						// reporting: the iteration runs again and finds it done.
						q.process(c)
						return enginetest.Reply{Expire: true}
					}
				}
				return q.tool()(c)
			}}
			run(t, s, nil)
			if s.Status() != lifecycle.ExecutionCompleted {
				t.Fatalf("status %s: %s", s.Status(), s.Snapshot().Error)
			}
			q.check(t)
		})
	}
}

// TestCursorLoopClaimFailures: a claim that fails after its retries, or that
// returns no row list, fails the step naming the claim.
func TestCursorLoopClaimFailures(t *testing.T) {
	for _, c := range []struct {
		name  string
		reply enginetest.Reply
		want  string
	}{
		{"sql error", enginetest.Reply{Status: "error", Error: "ERROR: relation \"work\" does not exist (SQLSTATE 42P01)"}, "loop.cursor claim: ERROR: relation"},
		{"no rows", enginetest.Reply{Data: map[string]any{"row_count": int64(3), "statement_count": int64(1)}}, "the claim returned no rows"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := sim(t, fmt.Sprintf(cursorStep, ""))
			s.Tools = map[string]enginetest.Tool{"start": func(*enginetest.Cmd) enginetest.Reply { return c.reply }}
			run(t, s, nil)
			st := s.Snapshot().Steps["start"]
			if s.Status() != lifecycle.ExecutionFailed || !strings.Contains(st.Error, c.want) {
				t.Fatalf("status %s, error %q; want failed naming %q", s.Status(), st.Error, c.want)
			}
		})
	}
}

// TestCursorIterationsWaitForClaim: our worker holds a claim's transaction open
// until the server has its rows and reports the transaction's id; each
// iteration of those rows names it (payload cursor.after_txid, with the
// cursor's auth) so its worker waits for the claim to commit before running.
// A claim without one (NoETL's workers commit first) adds nothing.
func TestCursorIterationsWaitForClaim(t *testing.T) {
	for _, withTxid := range []bool{true, false} {
		s := sim(t, fmt.Sprintf(cursorStep, ", max_in_flight: 3"))
		q := newQueue(8)
		claims := 0
		txOf := map[int64]string{}
		s.Tools = map[string]enginetest.Tool{"start": func(c *enginetest.Cmd) enginetest.Reply {
			if c.Meta["cursor_claim"] != true {
				cur, _ := c.Payload["cursor"].(map[string]any)
				id := enginetest.Args(c)["row"].(map[string]any)["id"].(int64)
				if want := txOf[id]; (want == "") != (cur == nil) || (cur != nil && (cur["after_txid"] != want || cur["auth"] != "pg_work")) {
					t.Fatalf("row %d's iteration has cursor %v, want after_txid %q", id, cur, want)
				}
				return q.process(c)
			}
			r := q.claim(c)
			if withTxid {
				claims++
				tx := fmt.Sprint("tx", claims)
				r.Data.(map[string]any)[toolresult.ClaimTxidKey] = tx
				for _, row := range r.Data.(map[string]any)["rows"].([]any) {
					txOf[row.(map[string]any)["id"].(int64)] = tx
				}
			}
			return r
		}}
		run(t, s, nil)
		if s.Status() != lifecycle.ExecutionCompleted {
			t.Fatalf("status %s: %v", s.Status(), s.Snapshot().Error)
		}
		q.check(t)
		if withTxid && len(txOf) != 8 {
			t.Fatalf("%d rows claimed with a transaction, want 8", len(txOf))
		}
	}
}
