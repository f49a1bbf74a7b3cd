package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

// issue inserts n PENDING commands of a new execution on sh.
func issue(t *testing.T, sh *store.Shard, n int, mutate func(i int, c *store.Command)) (store.Execution, []store.Command) {
	t.Helper()
	e := newExecution(t, sh, nil)
	eventIDs := allocate(t, sh, n)
	cmds := make([]store.Command, n)
	for i := range cmds {
		cmds[i] = store.Command{
			CommandID: engine.CommandID(e.ExecutionID, fmt.Sprintf("step%d", i), eventIDs[i], -1), ExecutionID: e.ExecutionID,
			IssuedEventID: eventIDs[i], Step: fmt.Sprintf("step%d", i), ToolKind: "python",
			Context: map[string]any{"code": "print(1)"}, Meta: map[string]any{"visit": int64(1)},
		}
		if mutate != nil {
			mutate(i, &cmds[i])
		}
	}
	if err := write(testContext(t), sh, &store.Changes{NewCommands: cmds}); err != nil {
		t.Fatal(err)
	}
	return e, cmds
}

func TestCommandLifecycle(t *testing.T) {
	s, _ := newStore(t, 2)
	ctx := testContext(t)
	sh := s.Shard(1)
	e, cmds := issue(t, sh, 3, func(i int, c *store.Command) {
		if i == 1 {
			c.MaxAttempts, c.TimeoutSeconds = 3, 30
		}
	})
	db := sh.Pool()

	got, err := store.GetCommandByIssuedEvent(ctx, db, cmds[1].IssuedEventID)
	if err != nil || got.CommandID != cmds[1].CommandID || got.Status != store.CommandPending || got.Attempt != 1 ||
		got.MaxAttempts != 3 || got.TimeoutSeconds != 30 || got.Context["code"] != "print(1)" || got.AvailableAt.IsZero() {
		t.Fatalf("by issued event: %+v %v", got, err)
	}
	if c, _ := storetest.Command(ctx, db, cmds[0].CommandID); c.TimeoutSeconds != store.DefaultTimeoutSeconds || c.MaxAttempts != 1 {
		t.Errorf("defaults: %+v", c)
	}
	if _, err := store.GetCommandByIssuedEvent(ctx, db, 99); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown event: %v", err)
	}
	if err := write(ctx, sh, &store.Changes{NewCommands: cmds[:1]}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("insert again: %v, want ErrDuplicate", err)
	}

	claimed := hold(t, sh, cmds[1], "w1", time.Minute)
	if claimed.Status != store.CommandClaimed || claimed.WorkerID != "w1" || claimed.Attempt != 1 {
		t.Fatalf("claim: %+v", claimed)
	}
	if err := write(ctx, sh, &store.Changes{Commands: []store.CommandChange{{CommandID: "nope", Status: store.CommandClaimed}}}); err != nil {
		t.Errorf("change of a missing command: %v", err)
	}
	if _, err := storetest.Command(ctx, db, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a change of a missing command created it: %v", err)
	}

	until, err := store.ExtendLease(ctx, db, cmds[1].CommandID, "w1", 1, lifecycle.Limits{Lease: 2 * time.Minute, Grace: time.Minute})
	if err != nil || !until.After(claimed.LeaseExpiresAt) {
		t.Errorf("heartbeat: %v %v", until, err)
	}
	if _, err := store.ExtendLease(ctx, db, cmds[1].CommandID, "w2", 0, lifecycle.Limits{Lease: time.Minute, Grace: time.Minute}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("heartbeat by another worker: %v", err)
	}
	if _, err := store.ExtendLease(ctx, db, cmds[1].CommandID, "w1", 2, lifecycle.Limits{Lease: time.Minute, Grace: time.Minute}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("heartbeat for another attempt: %v", err)
	}
	if _, err := store.ExtendLease(ctx, db, cmds[0].CommandID, "w1", 0, lifecycle.Limits{Lease: time.Minute, Grace: time.Minute}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("heartbeat of a PENDING command: %v", err)
	}
	if c := change(t, sh, store.CommandChange{CommandID: cmds[1].CommandID, Status: store.CommandRunning}); c.Status != store.CommandRunning ||
		c.WorkerID != "w1" || c.LeaseExpiresAt.IsZero() || !c.DeadlineAt.Equal(claimed.DeadlineAt) {
		t.Errorf("running keeps the holder: %+v", c)
	}
	if _, err := store.ExtendLease(ctx, db, cmds[1].CommandID, "w1", 1, lifecycle.Limits{Lease: time.Minute, Grace: time.Minute}); err != nil {
		t.Errorf("heartbeat while RUNNING: %v", err)
	}

	availableAt := time.Now().UTC().Add(10 * time.Second).Truncate(time.Microsecond)
	retried := retry(t, sh, cmds[1], 2, availableAt)
	if retried.Status != store.CommandPending || retried.Attempt != 2 || retried.WorkerID != "" ||
		!retried.LeaseExpiresAt.IsZero() || !retried.DeadlineAt.IsZero() || !retried.AvailableAt.Equal(availableAt) ||
		retried.IssuedEventID != cmds[1].IssuedEventID || retried.Context["code"] != "print(1)" {
		t.Fatalf("retry: %+v", retried)
	}
	if _, err := store.ExtendLease(ctx, db, cmds[1].CommandID, "w1", 1, lifecycle.Limits{Lease: time.Minute, Grace: time.Minute}); !errors.Is(err, store.ErrConflict) {
		t.Errorf("heartbeat after the retry was scheduled: %v", err)
	}

	change(t, sh, store.CommandChange{CommandID: cmds[2].CommandID, Status: store.CommandCompleted})
	active, err := storetest.ActiveCommands(ctx, db, e.ExecutionID)
	if err != nil || len(active) != 2 {
		t.Fatalf("active: %d %v", len(active), err)
	}
	var cancelled []store.Command
	tx := lock(t, sh, &store.LockSet{Executions: []int64{e.ExecutionID}})
	if cancelled, err = store.CancelActiveCommands(ctx, tx, e.ExecutionID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cancelled {
		if c.Status != store.CommandCancelled {
			t.Errorf("cancelled command %s has status %s", c.CommandID, c.Status)
		}
		ids = append(ids, c.CommandID)
	}
	slices.Sort(ids)
	if want := []string{cmds[0].CommandID, cmds[1].CommandID}; !slices.Equal(ids, want) {
		t.Errorf("cancelled %v, want %v", ids, want)
	}
	if active, _ := storetest.ActiveCommands(ctx, db, e.ExecutionID); len(active) != 0 {
		t.Errorf("%d active after cancel", len(active))
	}
	if c, _ := storetest.Command(ctx, db, cmds[2].CommandID); c.Status != store.CommandCompleted {
		t.Errorf("completed command changed by cancel: %s", c.Status)
	}
	if err := write(ctx, sh, &store.Changes{Commands: []store.CommandChange{{CommandID: cmds[2].CommandID, Status: "DONE"}}}); err == nil {
		t.Error("status outside the CHECK accepted")
	}
}

// change writes one command change and reads the row back.
func change(t *testing.T, sh *store.Shard, ch store.CommandChange) store.Command {
	t.Helper()
	ctx := testContext(t)
	// An UPDATE of a missing row changes nothing and says nothing: check first.
	if _, err := storetest.Command(ctx, sh.Pool(), ch.CommandID); err != nil {
		t.Fatalf("change %s: %v", ch.CommandID, err)
	}
	mustWrite(t, sh, &store.Changes{Commands: []store.CommandChange{ch}})
	c, err := storetest.Command(ctx, sh.Pool(), ch.CommandID)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// hold gives a command to a worker for lease from now, as a claim does.
func hold(t *testing.T, sh *store.Shard, c store.Command, worker string, lease time.Duration) store.Command {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	got := change(t, sh, store.CommandChange{CommandID: c.CommandID, Status: store.CommandClaimed, Hold: true, WorkerID: worker,
		LeaseExpiresAt: now.Add(lease), DeadlineAt: now.Add(time.Hour)})
	if !got.LeaseExpiresAt.Equal(now.Add(lease)) || !got.DeadlineAt.Equal(now.Add(time.Hour)) {
		t.Fatalf("hold: lease %v deadline %v", got.LeaseExpiresAt, got.DeadlineAt)
	}
	return got
}

// retry makes a command PENDING again for attempt, as a retry does (R-L6).
func retry(t *testing.T, sh *store.Shard, c store.Command, attempt int, at time.Time) store.Command {
	t.Helper()
	return change(t, sh, store.CommandChange{CommandID: c.CommandID, Status: store.CommandPending, Attempt: attempt,
		AvailableAt: at, Release: true})
}

// TestClaimRowLock: N workers race to claim one PENDING command, each the way
// the claim route does it (one round trip locking the execution, then the
// command, by the issuing event's id; check; claim; commit); exactly one wins
// and the others see it claimed.
func TestClaimRowLock(t *testing.T) {
	s, _ := newStore(t, 2)
	ctx := testContext(t)
	sh := s.Shard(0)
	const workers = 12
	_, cmds := issue(t, sh, 1, nil)
	var (
		mu     sync.Mutex
		wins   []string
		others int
		wg     sync.WaitGroup
	)
	start := make(chan struct{})
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker := fmt.Sprintf("w%d", w)
			<-start
			won, err := claimLocked(ctx, sh, cmds[0].IssuedEventID, worker)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if won {
				wins = append(wins, worker)
			} else {
				others++
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if len(wins) != 1 || others != workers-1 {
		t.Fatalf("with row locks: winners %v, %d others; want exactly one winner", wins, others)
	}
	if c, _ := storetest.Command(ctx, sh.Pool(), cmds[0].CommandID); c.WorkerID != wins[0] || c.Status != store.CommandClaimed {
		t.Errorf("stored claim %s/%s, winner %s", c.Status, c.WorkerID, wins[0])
	}
}

func claimLocked(ctx context.Context, sh *store.Shard, eventID int64, worker string) (bool, error) {
	tx, err := sh.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(ctx)
	ls := &store.LockSet{IssuedEventIDs: []int64{eventID}}
	if err := tx.Lock(ctx, ls); err != nil {
		return false, err
	}
	if len(ls.ExecutionRows) != 1 || len(ls.CommandRows) != 1 || ls.Now.IsZero() {
		return false, fmt.Errorf("%s locked %d executions, %d commands, now %v", worker, len(ls.ExecutionRows), len(ls.CommandRows), ls.Now)
	}
	var c store.Command
	for _, c = range ls.CommandRows {
	}
	if c.Status != store.CommandPending {
		if c.WorkerID == worker || c.WorkerID == "" {
			return false, fmt.Errorf("%s sees %s held by %q", worker, c.Status, c.WorkerID)
		}
		return false, nil
	}
	if err := tx.Write(&store.Changes{Commands: []store.CommandChange{{CommandID: c.CommandID, Status: store.CommandClaimed,
		Hold: true, WorkerID: worker, LeaseExpiresAt: ls.Now.Add(time.Minute)}}}); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

func TestSweeperQueries(t *testing.T) {
	s, _ := newStore(t, 2)
	ctx := testContext(t)
	sh := s.Shard(1)
	db := sh.Pool()
	// Per execution: 0 lease expired, 1 lease live, 2 past deadline (live lease),
	// 3 due retry, 4 retry not yet due, 5 pending first attempt.
	e, cmds := issue(t, sh, 6, nil)
	e2, cmds2 := issue(t, sh, 1, nil) // a second execution with an expired lease
	claim := func(c store.Command, lease time.Duration) { hold(t, sh, c, "w", lease) }
	claim(cmds[0], -time.Second) // already expired
	claim(cmds[1], time.Hour)
	claim(cmds[2], time.Hour)
	mustExec(t, db, `UPDATE command SET deadline_at = now() - interval '10 minutes' WHERE command_id = $1`, cmds[2].CommandID)
	retry(t, sh, cmds[3], 2, time.Now().Add(-time.Minute))
	retry(t, sh, cmds[4], 2, time.Now().Add(time.Hour))
	claim(cmds2[0], -time.Minute)

	ids := func(cs []store.Command) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.CommandID)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(in ...string) []string { slices.Sort(in); return in }
	sweep := func(fn func(tx pgx.Tx) ([]store.Command, error)) []string {
		var got []store.Command
		inTx(t, db, func(tx pgx.Tx) (err error) { got, err = fn(tx); return err })
		return ids(got)
	}

	ended := func(grace time.Duration) func(tx pgx.Tx) ([]store.Command, error) {
		return func(tx pgx.Tx) ([]store.Command, error) {
			return store.LockEndedLeases(ctx, tx, lifecycle.Limits{Grace: grace}, nil, 100)
		}
	}
	if got, want := sweep(ended(time.Minute)), sorted(cmds[0].CommandID, cmds[2].CommandID, cmds2[0].CommandID); !slices.Equal(got, want) {
		t.Errorf("ended leases (a lapsed lease, a deadline past its grace) %v, want %v", got, want)
	}
	if got, want := sweep(ended(time.Hour)), sorted(cmds[0].CommandID, cmds2[0].CommandID); !slices.Equal(got, want) {
		t.Errorf("ended leases with an hour's grace: %v, want %v", got, want)
	}
	// An execution the run already failed on is left out: the batch reaches
	// past it (e2's lease ended first, so it comes first otherwise).
	skipped := sweep(func(tx pgx.Tx) ([]store.Command, error) {
		return store.LockEndedLeases(ctx, tx, lifecycle.Limits{Grace: time.Hour}, []int64{e2.ExecutionID}, 1)
	})
	if want := []string{cmds[0].CommandID}; !slices.Equal(skipped, want) {
		t.Errorf("ended leases skipping %d, one at a time: %v, want %v", e2.ExecutionID, skipped, want)
	}
	due := func(first time.Duration) func(tx pgx.Tx) ([]store.Command, error) {
		return func(tx pgx.Tx) ([]store.Command, error) {
			return store.LockReannounceDue(ctx, tx, lifecycle.Reannounce{First: first, Max: time.Hour}, nil, 100)
		}
	}
	if got, want := sweep(due(0)), sorted(cmds[3].CommandID, cmds[5].CommandID); !slices.Equal(got, want) {
		t.Errorf("due to be announced again (a due retry, a first attempt): %v, want %v", got, want)
	}
	if got := sweep(due(time.Hour)); len(got) != 0 {
		t.Errorf("due to be announced again an hour after: %v", got)
	}

	// An execution held by another transaction (live ingest) is skipped, not waited for.
	holder := lock(t, sh, &store.LockSet{Executions: []int64{e.ExecutionID}})
	bounded, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var got []store.Command
	err := pgx.BeginFunc(bounded, db, func(tx pgx.Tx) (err error) {
		got, err = store.LockEndedLeases(bounded, tx, lifecycle.Limits{Grace: time.Hour}, nil, 100)
		return err
	})
	if err != nil {
		t.Fatalf("sweep while an execution is locked: %v (it must skip, not wait)", err)
	}
	if want := []string{cmds2[0].CommandID}; !slices.Equal(ids(got), want) {
		t.Errorf("with %d locked: %v, want %v", e.ExecutionID, ids(got), want)
	}
	holder.Rollback(ctx)

	// Two concurrent sweeps never return the same command.
	tx1, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx1.Rollback(ctx)
	first, err := store.LockEndedLeases(ctx, tx1, lifecycle.Limits{Grace: time.Hour}, nil, 100)
	if err != nil || len(first) != 2 {
		t.Fatalf("first sweep: %v %v", ids(first), err)
	}
	var second []store.Command
	inTx(t, db, func(tx pgx.Tx) (err error) {
		second, err = store.LockEndedLeases(ctx, tx, lifecycle.Limits{Grace: time.Hour}, nil, 100)
		return err
	})
	if len(second) != 0 {
		t.Errorf("second sweep got %v while the first holds them", ids(second))
	}
	_ = e2
	if _, err := store.LockEndedLeases(ctx, tx1, lifecycle.Limits{}, nil, 0); err == nil {
		t.Error("limit 0 accepted")
	}
}
