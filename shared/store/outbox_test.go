package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/ids"
	"github.com/noetl-go/noetl/shared/store"
)

// TestOutboxBackoff: a failed publish's delay is min(cap, 2^min(8, n-1)) s
// after the n-th failure, a cap of 0 meaning none (events.md §2), for the
// count an outside publisher gives and for the row's own.
func TestOutboxBackoff(t *testing.T) {
	s, _ := newStore(t, 1)
	ctx := testContext(t)
	sh := s.Shard(0)
	row := outboxRows(t, sh, 1)[0]
	for _, c := range []struct {
		attempts int
		max      time.Duration
		want     time.Duration
	}{
		{1, 0, time.Second}, {2, 0, 2 * time.Second}, {3, 0, 4 * time.Second}, {9, 0, 256 * time.Second},
		{20, 0, 256 * time.Second}, {9, 300 * time.Second, 256 * time.Second}, {5, 10 * time.Second, 10 * time.Second},
	} {
		if got, err := store.MarkOutboxFailedAfter(ctx, sh.Pool(), row, "x", c.attempts, c.max); err != nil || got != c.want {
			t.Errorf("MarkOutboxFailedAfter(attempts %d, max %v) = %v, %v; want %v", c.attempts, c.max, got, err, c.want)
		}
	}
}

// outboxRows inserts n rows for a new execution on sh, created long enough ago for the
// drain, and returns their ids.
func outboxRows(t *testing.T, sh *store.Shard, n int) []int64 {
	t.Helper()
	ctx := testContext(t)
	e := newExecution(t, sh, nil)
	msgs := make([]store.OutboxMessage, n)
	for i := range msgs {
		msgs[i] = store.OutboxMessage{
			ExecutionID: e.ExecutionID, EventID: int64(1000 + i), Subject: fmt.Sprintf("noetl.commands.shared.%d", e.ExecutionID),
			MsgID: fmt.Sprintf("%d:s:%d:1", e.ExecutionID, i), Payload: json.RawMessage(fmt.Sprintf(`{"n": %d}`, i)),
		}
	}
	// The control plane takes outbox ids from the shard's id sequence.
	got, err := store.AllocateIDs(ctx, sh.Pool(), sh.Index(), n)
	if err != nil {
		t.Fatal(err)
	}
	for i := range msgs {
		msgs[i].OutboxID = got[i]
	}
	mustWrite(t, sh, &store.Changes{Outbox: msgs})
	if len(got) != n || !slices.IsSorted(got) {
		t.Fatalf("outbox ids %v", got)
	}
	for _, id := range got {
		if ids.ShardOf(id) != sh.Index() {
			t.Fatalf("outbox id %d does not carry shard %d", id, sh.Index())
		}
	}
	return got
}

// status reads a row's status, attempts and backoff (available_at - updated_at: both
// written by one statement, so no clock reading of the test enters).
func status(t *testing.T, sh *store.Shard, id int64) (string, int, time.Duration) {
	t.Helper()
	var st string
	var attempts int
	var until time.Duration
	err := sh.Pool().QueryRow(testContext(t),
		`SELECT status, attempts, available_at - updated_at FROM outbox WHERE outbox_id = $1`, id).Scan(&st, &attempts, &until)
	if err != nil {
		t.Fatal(err)
	}
	return st, attempts, until
}

func claimIDs(t *testing.T, sh *store.Shard, limit int) []int64 {
	t.Helper()
	msgs, err := store.ClaimOutbox(testContext(t), sh.Pool(), limit)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, m := range msgs {
		if m.Status != store.OutboxInFlight || m.LockedAt.IsZero() || m.Subject == "" || m.MsgID == "" || len(m.Payload) == 0 {
			t.Errorf("claimed row %+v", m)
		}
		out = append(out, m.OutboxID)
	}
	slices.Sort(out)
	return out
}

func TestOutboxStateMachine(t *testing.T) {
	s, _ := newStore(t, 2)
	ctx := testContext(t)
	sh := s.Shard(1)
	db := sh.Pool()
	rows := outboxRows(t, sh, 5)

	// Fresh rows belong to the post-commit publisher for 5 s: the drain leaves them.
	if got := claimIDs(t, sh, 10); len(got) != 0 {
		t.Fatalf("drain claimed fresh rows %v", got)
	}
	if n, err := store.PendingOutboxCount(ctx, db); err != nil || n != 5 {
		t.Fatalf("pending count %d %v", n, err)
	}
	mustExec(t, db, `UPDATE outbox SET created_at = now() - interval '6 seconds'`)

	first := claimIDs(t, sh, 2)
	rest := claimIDs(t, sh, 10)
	if all := slices.Sorted(slices.Values(append(slices.Clone(first), rest...))); len(first) != 2 || !slices.Equal(all, rows) {
		t.Fatalf("claims of 2 then 10: %v then %v; want 2 rows, then the other 3 of %v", first, rest, rows)
	}
	if got := claimIDs(t, sh, 10); len(got) != 0 {
		t.Fatalf("IN_FLIGHT rows claimed again at once: %v", got)
	}
	// A publisher that died: its IN_FLIGHT rows are taken over after 60 s.
	mustExec(t, db, `UPDATE outbox SET locked_at = now() - interval '61 seconds' WHERE outbox_id = $1`, rows[4])
	if got := claimIDs(t, sh, 10); !slices.Equal(got, rows[4:5]) {
		t.Fatalf("stale IN_FLIGHT reclaim %v, want %v", got, rows[4:5])
	}

	// The post-commit publisher marks its rows; a second mark changes nothing.
	if n, err := store.MarkOutboxPublished(ctx, db, rows[:2]); err != nil || n != 2 {
		t.Fatalf("mark published: %d %v", n, err)
	}
	if n, _ := store.MarkOutboxPublished(ctx, db, rows[:2]); n != 0 {
		t.Errorf("re-marking published rows changed %d", n)
	}

	// Failed publishes back off 1, 2, 4 … s and return the row to PENDING.
	for attempt := 1; attempt <= 4; attempt++ {
		delay, err := store.MarkOutboxFailed(ctx, db, rows[2], "nats: no responders", 0)
		if err != nil {
			t.Fatal(err)
		}
		want := time.Duration(1<<(attempt-1)) * time.Second
		st, attempts, until := status(t, sh, rows[2])
		if delay != want || st != store.OutboxPending || attempts != attempt || until != want {
			t.Errorf("failure %d: delay %v, status %s, attempts %d, available in %v; want %v PENDING %d", attempt, delay, st, attempts, until, want, attempt)
		}
		if got := claimIDs(t, sh, 10); slices.Contains(got, rows[2]) {
			t.Errorf("failure %d: row claimable before its backoff ran out", attempt)
		}
	}
	if delay, err := store.MarkOutboxFailed(ctx, db, rows[3], strings.Repeat("x", 5000), 10*time.Second); err != nil || delay != time.Second {
		t.Errorf("first failure with cap: %v %v", delay, err)
	}
	mustExec(t, db, `UPDATE outbox SET attempts = 7 WHERE outbox_id = $1`, rows[3])
	if delay, err := store.MarkOutboxFailed(ctx, db, rows[3], "again", 10*time.Second); err != nil || delay != 10*time.Second {
		t.Errorf("capped failure: %v %v", delay, err)
	}
	var lastErrLen int
	if err := db.QueryRow(ctx, `SELECT char_length(last_error) FROM (SELECT last_error FROM outbox WHERE outbox_id = $1) x`, rows[3]).Scan(&lastErrLen); err != nil || lastErrLen != 5 {
		t.Errorf("last_error length %d %v", lastErrLen, err)
	}
	mustExec(t, db, `UPDATE outbox SET available_at = now() - interval '1 second' WHERE outbox_id = $1`, rows[2])
	if got := claimIDs(t, sh, 10); !slices.Equal(got, rows[2:3]) {
		t.Errorf("after backoff: claimed %v, want %v", got, rows[2:3])
	}

	if _, err := store.MarkOutboxFailed(ctx, db, rows[0], "late", 0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("failing a PUBLISHED row: %v, want ErrConflict", err)
	}
	if _, err := store.MarkOutboxFailed(ctx, db, 42, "x", 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("failing a missing row: %v, want ErrNotFound", err)
	}
	if n, _ := store.PendingOutboxCount(ctx, db); n != 3 {
		t.Errorf("pending count %d, want 3", n)
	}

	// Retention: only PUBLISHED rows older than a day go.
	mustExec(t, db, `UPDATE outbox SET published_at = now() - interval '25 hours' WHERE outbox_id = $1`, rows[0])
	if n, err := store.DeletePublishedOutbox(ctx, db, store.OutboxRetention, 100); err != nil || n != 1 {
		t.Errorf("deleted %d %v, want 1", n, err)
	}
	var left int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&left); err != nil || left != 4 {
		t.Errorf("%d rows left, want 4", left)
	}
	for _, bad := range []int{0, 1001} {
		if _, err := store.ClaimOutbox(ctx, db, bad); err == nil {
			t.Errorf("claim limit %d accepted", bad)
		}
	}
}

// TestOutboxConcurrentClaims: drains running at once get disjoint rows.
func TestOutboxConcurrentClaims(t *testing.T) {
	s, _ := newStore(t, 2)
	ctx := testContext(t)
	sh := s.Shard(0)
	rows := outboxRows(t, sh, 60)
	mustExec(t, sh.Pool(), `UPDATE outbox SET created_at = now() - interval '6 seconds'`)
	const drains = 6
	got := make([][]int64, drains)
	errs := make([]error, drains)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for d := range drains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[d] = pgx.BeginFunc(ctx, sh.Pool(), func(tx pgx.Tx) error {
				msgs, err := store.ClaimOutbox(ctx, tx, 15)
				for _, m := range msgs {
					got[d] = append(got[d], m.OutboxID)
				}
				return err
			})
		}()
	}
	close(start)
	wg.Wait()
	seen := map[int64]int{}
	for d := range drains {
		if errs[d] != nil {
			t.Fatal(errs[d])
		}
		for _, id := range got[d] {
			if prev, dup := seen[id]; dup {
				t.Fatalf("row %d claimed by drains %d and %d", id, prev, d)
			}
			seen[id] = d
		}
	}
	if len(seen) != len(rows) {
		t.Errorf("%d of %d rows claimed by %d drains of 15", len(seen), len(rows), drains)
	}
}

func TestStepResults(t *testing.T) {
	s, _ := newStore(t, 2)
	ctx := testContext(t)
	sh := s.Shard(0)
	db := sh.Pool()
	e := newExecution(t, sh, nil)
	results := []store.StepResult{
		{StepResultKey: store.StepResultKey{Step: "loop", Visit: 1, Index: 1}, Result: map[string]any{"i": int64(1)}},
		{StepResultKey: store.StepResultKey{Step: "loop", Visit: 1, Index: 0}, Result: map[string]any{"i": int64(0)}},
		{StepResultKey: store.StepResultKey{Step: "loop", Visit: 2, Index: 0}, Result: "other visit"},
		{StepResultKey: store.StepResultKey{Step: "big", Visit: 1, Index: store.StepResultWhole}, Result: []any{int64(1), nil, 2.5}},
	}
	put := func(rs ...store.StepResult) {
		t.Helper()
		for i := range rs {
			rs[i].ExecutionID = e.ExecutionID
		}
		mustWrite(t, sh, &store.Changes{Results: rs})
	}
	put(results...)
	first, err := store.GetStepResults(ctx, db, e.ExecutionID, []store.StepResultKey{{Step: "loop", Visit: 1, Index: 0}, {Step: "loop", Visit: 1, Index: 1}})
	if err != nil || len(first) != 2 || first[store.StepResultKey{Kind: store.KindResult, Step: "loop", Visit: 1, Index: 1}].(map[string]any)["i"] != int64(1) {
		t.Fatalf("stored: %+v %v", first, err)
	}
	// A retried iteration overwrites its result.
	put(store.StepResult{StepResultKey: store.StepResultKey{Step: "loop", Visit: 1, Index: 1}, Result: map[string]any{"i": "retried"}})
	missing := store.StepResultKey{Step: "loop", Visit: 9, Index: 0}
	got, err := store.GetStepResults(ctx, db, e.ExecutionID, []store.StepResultKey{
		{Step: "loop", Visit: 1, Index: 1}, {Step: "big", Visit: 1, Index: store.StepResultWhole}, missing,
	})
	if err != nil || len(got) != 2 {
		t.Fatalf("get: %v %v", got, err)
	}
	if got[store.StepResultKey{Kind: store.KindResult, Step: "loop", Visit: 1, Index: 1}].(map[string]any)["i"] != "retried" {
		t.Errorf("overwrite lost: %v", got)
	}
	if big := got[store.StepResultKey{Kind: store.KindResult, Step: "big", Visit: 1, Index: store.StepResultWhole}].([]any); len(big) != 3 || big[2] != 2.5 || big[1] != nil {
		t.Errorf("whole result: %v", big)
	}
	if _, ok := got[missing]; ok {
		t.Error("missing key present")
	}
	// Loop items live beside results under the same step, visit and index.
	item := store.StepResultKey{Kind: store.KindItem, Step: "loop", Visit: 1, Index: 1}
	put(store.StepResult{StepResultKey: item, Result: "the item"})
	got, err = store.GetStepResults(ctx, db, e.ExecutionID, []store.StepResultKey{item, {Step: "loop", Visit: 1, Index: 1}})
	if err != nil || got[item] != "the item" || got[store.StepResultKey{Kind: store.KindResult, Step: "loop", Visit: 1, Index: 1}].(map[string]any)["i"] != "retried" {
		t.Fatalf("kinds mixed up: %v %v", got, err)
	}
}

// TestOutboxLag: the lag is the age of the oldest row not yet published, 0
// with none, and Postgres answers it from the outbox_unpublished index rather
// than by reading every row (the drain asks on every run).
func TestOutboxLag(t *testing.T) {
	s, _ := newStore(t, 1)
	ctx := testContext(t)
	sh := s.Shard(0)
	db := sh.Pool()
	if lag, err := store.OutboxLag(ctx, db); err != nil || lag != 0 {
		t.Fatalf("empty outbox: lag %v %v, want 0", lag, err)
	}
	rows := outboxRows(t, sh, 3)
	mustExec(t, db, `UPDATE outbox SET created_at = now() - make_interval(secs => 100 * (3 - (SELECT count(*) FROM outbox o WHERE o.outbox_id < outbox.outbox_id)))`)
	if lag, err := store.OutboxLag(ctx, db); err != nil || lag < 300*time.Second || lag > 330*time.Second {
		t.Fatalf("lag %v %v, want about 300 s (the oldest row's age)", lag, err)
	}
	if _, err := store.MarkOutboxPublished(ctx, db, rows[:1]); err != nil {
		t.Fatal(err)
	}
	if lag, err := store.OutboxLag(ctx, db); err != nil || lag < 200*time.Second || lag > 230*time.Second {
		t.Fatalf("lag after publishing the oldest %v %v, want about 200 s", lag, err)
	}

	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	mustExec(t, tx, `SET LOCAL enable_seqscan = off`)
	lines, err := tx.Query(ctx, "EXPLAIN (FORMAT TEXT) "+store.OutboxLagSQL)
	if err != nil {
		t.Fatal(err)
	}
	var plan string
	for lines.Next() {
		var line string
		if err := lines.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan += line + "\n"
	}
	if err := lines.Err(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan, "outbox_unpublished") {
		t.Fatalf("the lag query does not use the outbox_unpublished index:\n%s", plan)
	}
}
