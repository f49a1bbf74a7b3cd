package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
)

// TestGuardsMatchSQL pins each guard of the command lifecycle to its SQL
// form: over command rows of every status with leases, deadlines,
// availability and announcements around the database's clock (the
// boundaries included), each guard selects in Postgres exactly the rows its
// Go form accepts, and LeaseEnd computes the same time in both. The rows and
// the guards are evaluated in one transaction, so now() is one instant.
func TestGuardsMatchSQL(t *testing.T) {
	s, _ := newStore(t, 1)
	ctx := testContext(t)
	db := s.Shard(0).Pool()
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var clk lifecycle.Clock
	if err := tx.QueryRow(ctx, `SELECT now(), `+lifecycle.ReachableSinceSQL).Scan(&clk.Now, &clk.ReachableSince); err != nil {
		t.Fatal(err)
	}
	if clk.Now.Sub(clk.ReachableSince) > time.Hour {
		t.Fatalf("the test database has been reachable since %v: the quiet cases below need less than an hour", clk.ReachableSince)
	}
	// Offsets from now (nil: NULL) at and around the boundaries the guards
	// draw: now itself, a minute (the grace below), an hour.
	offsets := []*time.Duration{nil}
	for _, d := range []time.Duration{-2 * time.Hour, -time.Hour, -61 * time.Second, -time.Minute, -59 * time.Second,
		-time.Second, -time.Microsecond, 0, time.Microsecond, time.Second, time.Minute, time.Hour} {
		offsets = append(offsets, &d)
	}
	at := func(o *time.Duration) *time.Time {
		if o == nil {
			return nil
		}
		v := clk.Now.Add(*o)
		return &v
	}
	rng := rand.New(rand.NewPCG(28, 1))
	pick := func() *time.Duration { return offsets[rng.IntN(len(offsets))] }
	const execID = 424242
	type row struct {
		id  string
		got lifecycle.Row
	}
	var rows []row
	add := func(status, worker string, attempt int, lease, deadline, available, announced *time.Duration) {
		r := row{id: fmt.Sprintf("c%03d", len(rows)), got: lifecycle.Row{Status: status, WorkerID: worker, Attempt: attempt}}
		if available == nil {
			d := time.Duration(0)
			available = &d // NOT NULL
		}
		for dst, o := range map[*time.Time]*time.Duration{&r.got.LeaseExpiresAt: lease, &r.got.DeadlineAt: deadline,
			&r.got.AvailableAt: available, &r.got.AnnouncedAt: announced} {
			if v := at(o); v != nil {
				*dst = *v
			}
		}
		var w *string
		if worker != "" {
			w = &worker
		}
		if _, err := tx.Exec(ctx, `INSERT INTO command (command_id, execution_id, issued_event_id, step, tool_kind, status,
			attempt, worker_id, lease_expires_at, deadline_at, available_at, announced_at)
			VALUES ($1, $2, $3, 's', 'noop', $4, $5, $6, $7, $8, $9, $10)`,
			r.id, execID, 1000+len(rows), status, attempt, w, at(lease), at(deadline), at(available), at(announced)); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	// Every status with every lease and deadline offset, then random mixes.
	for _, st := range lifecycle.Statuses {
		for _, o := range offsets {
			add(st, "w1", 1, o, pick(), pick(), pick())
			add(st, "w2", 2, pick(), o, o, pick())
			add(st, "w1", 2, pick(), pick(), pick(), o)
		}
	}
	for range 300 {
		st := lifecycle.Statuses[rng.IntN(len(lifecycle.Statuses))]
		add(st, []string{"", "w1", "w2"}[rng.IntN(3)], 1+rng.IntN(3), pick(), pick(), pick(), pick())
	}

	type guard struct {
		name string
		sql  string
		args []any
		go_  func(lifecycle.Row) bool
	}
	var guards []guard
	guards = append(guards,
		guard{"Held", lifecycle.HeldSQL, nil, lifecycle.Held},
		guard{"Active", lifecycle.ActiveSQL, nil, lifecycle.Active},
		guard{"Claimable", lifecycle.ClaimableSQL, nil, func(r lifecycle.Row) bool { return lifecycle.Claimable(r, clk) }},
		guard{"Live", lifecycle.LiveSQL, nil, func(r lifecycle.Row) bool { return lifecycle.Live(r, clk) }},
	)
	for _, h := range []struct {
		worker  string
		attempt int
	}{{"w1", 0}, {"w1", 1}, {"w2", 2}, {"w2", 1}, {"", 0}} {
		guards = append(guards, guard{fmt.Sprintf("HeldBy(%q, %d)", h.worker, h.attempt), lifecycle.HeldBySQL("$2", "$3"),
			[]any{h.worker, h.attempt}, func(r lifecycle.Row) bool { return lifecycle.HeldBy(r, h.worker, h.attempt) }})
	}
	for _, l := range []lifecycle.Limits{{}, {Grace: time.Minute}, {Lease: 2 * time.Hour, Grace: time.Minute}, {Grace: time.Hour}} {
		guards = append(guards,
			guard{fmt.Sprintf("Ended(%+v)", l), lifecycle.EndedSQL("$2", "$3"), []any{l.Lease, l.Grace},
				func(r lifecycle.Row) bool { return lifecycle.Ended(r, clk, l) }},
			guard{fmt.Sprintf("TimedOut(%+v)", l), lifecycle.TimedOutSQL("$2"), []any{l.Grace},
				func(r lifecycle.Row) bool { return lifecycle.TimedOut(r, clk, l) }},
		)
	}
	for _, a := range []lifecycle.Reannounce{{}, {First: time.Second, Max: time.Minute}, {First: time.Minute, Max: time.Hour}, lifecycle.DefaultReannounce} {
		guards = append(guards, guard{fmt.Sprintf("ReannounceDue(%+v)", a), lifecycle.ReannounceDueSQL("$2", "$3"), []any{a.First, a.Max},
			func(r lifecycle.Row) bool { return lifecycle.ReannounceDue(r, clk, a) }})
	}

	for _, overdue := range []time.Duration{0, time.Minute, time.Hour} {
		guards = append(guards, guard{fmt.Sprintf("Stale(%s)", overdue), lifecycle.StaleSQL("$2"), []any{overdue},
			func(r lifecycle.Row) bool { return lifecycle.Stale(r, clk, overdue) }})
	}
	for _, g := range guards {
		q, err := tx.Query(ctx, `SELECT command_id FROM command WHERE execution_id = $1 AND (`+g.sql+`) ORDER BY command_id`,
			append([]any{execID}, g.args...)...)
		if err != nil {
			t.Fatalf("%s: %s: %v", g.name, g.sql, err)
		}
		inSQL, err := pgx.CollectRows(q, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		var inGo []string
		for _, r := range rows {
			if g.go_(r.got) {
				inGo = append(inGo, r.id)
			}
		}
		// Within a lease (2 h) of the database's start no lease ends, and
		// no worker id holds anything: those select nothing by design.
		none := strings.HasPrefix(g.name, "Ended(") && strings.Contains(g.name, "Lease:2h") || strings.HasPrefix(g.name, `HeldBy("",`)
		if none && len(inGo) != 0 {
			t.Errorf("%s holds for %d rows, want none", g.name, len(inGo))
		}
		if !none && (len(inGo) == 0 || len(inGo) == len(rows)) {
			t.Errorf("%s holds for %d of %d rows: the rows do not exercise it", g.name, len(inGo), len(rows))
		}
		if !slices.Equal(inSQL, inGo) {
			for _, r := range rows {
				if slices.Contains(inSQL, r.id) != slices.Contains(inGo, r.id) {
					t.Errorf("%s: row %s %+v: SQL %v, Go %v (now %v)", g.name, r.id, r.got, slices.Contains(inSQL, r.id), slices.Contains(inGo, r.id), clk.Now)
					break
				}
			}
			t.Errorf("%s: SQL selects %d rows, Go %d", g.name, len(inSQL), len(inGo))
		}
	}

	// LeaseEnd: the time a claim (Go) and a heartbeat (SQL) give a lease.
	for _, l := range []lifecycle.Limits{{Lease: time.Minute, Grace: 30 * time.Second}, {Lease: time.Hour, Grace: 0}, {Lease: time.Second, Grace: time.Hour}} {
		q, err := tx.Query(ctx, `SELECT command_id, `+lifecycle.LeaseEndSQL("$2", "$3")+` FROM command WHERE execution_id = $1 ORDER BY command_id`,
			execID, l.Lease, l.Grace)
		if err != nil {
			t.Fatal(err)
		}
		ends := map[string]time.Time{}
		var (
			id  string
			end time.Time
		)
		if _, err := pgx.ForEachRow(q, []any{&id, &end}, func() error { ends[id] = end; return nil }); err != nil {
			t.Fatal(err)
		}
		capped := 0
		for _, r := range rows {
			want := lifecycle.LeaseEnd(clk.Now, r.got.DeadlineAt, l)
			if !ends[r.id].Equal(want) {
				t.Fatalf("LeaseEnd(%+v) of %s %+v: SQL %v, Go %v", l, r.id, r.got, ends[r.id], want)
			}
			if want.Before(clk.Now.Add(l.Lease)) {
				capped++
			}
		}
		if capped == 0 {
			t.Errorf("LeaseEnd(%+v): no row's deadline capped its lease", l)
		}
	}
	// The store's statuses are the lifecycle's.
	if store.CommandClaimed != lifecycle.Claimed || store.CommandExpired != lifecycle.Expired {
		t.Fatal("store's command statuses differ from the lifecycle's")
	}
}
