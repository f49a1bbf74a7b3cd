package store_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
)

func TestExecutionLifecycle(t *testing.T) {
	s, _ := newStore(t, 2)
	ctx := testContext(t)
	sh := s.Shard(1)
	e := newExecution(t, sh, func(e *store.Execution) {
		e.ParentExecutionID = 77
		e.Workload = map[string]any{"big": int64(9007199254740993), "s": "x"}
	})
	if e.Status != lifecycle.ExecutionRunning || e.StartedAt.IsZero() || !e.UpdatedAt.Equal(e.StartedAt) || string(e.State) != "{}" {
		t.Fatalf("inserted: %+v", e)
	}
	got, err := store.GetExecution(ctx, sh.Pool(), e.ExecutionID)
	if err != nil || got.Workload["big"] != int64(9007199254740993) || got.ParentExecutionID != 77 || got.Pool != "shared" {
		t.Fatalf("get: %+v %v", got, err)
	}
	done := time.Now().UTC().Truncate(time.Microsecond)
	ls := &store.LockSet{Executions: []int64{e.ExecutionID}}
	tx := lock(t, sh, ls)
	locked := ls.ExecutionRows[e.ExecutionID]
	locked.Status, locked.State, locked.LastSeq = lifecycle.ExecutionFailed, json.RawMessage(`{"steps":{}}`), 9
	locked.CompletedAt, locked.Error = done, "boom"
	if err := tx.Write(&store.Changes{Executions: []store.Execution{locked}}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got, err = store.GetExecution(ctx, sh.Pool(), e.ExecutionID)
	if err != nil || got.Status != lifecycle.ExecutionFailed || got.LastSeq != 9 || !got.CompletedAt.Equal(done) ||
		got.Error != "boom" || string(got.State) != `{"steps":{}}` || !got.UpdatedAt.After(e.UpdatedAt) {
		t.Fatalf("after update: %+v %v", got, err)
	}
	// nil State keeps the stored snapshot.
	got.State, got.Status = nil, lifecycle.ExecutionCancelled
	mustWrite(t, sh, &store.Changes{Executions: []store.Execution{got}})
	if again, _ := store.GetExecution(ctx, sh.Pool(), e.ExecutionID); string(again.State) != `{"steps":{}}` || again.Status != lifecycle.ExecutionCancelled {
		t.Errorf("nil state: %+v", again)
	}
	if _, err := store.GetExecution(ctx, sh.Pool(), 12345); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing execution: %v", err)
	}
	got.Status = "BOGUS"
	if err := write(ctx, sh, &store.Changes{Executions: []store.Execution{got}}); err == nil {
		t.Error("status outside the CHECK accepted")
	}
}

// TestExecutionIdempotencyKey: concurrent executes with one key, each the way
// the control plane does it (look the key up under the lock; insert; on the
// key's conflict read the winner), create one execution and all get it back.
func TestExecutionIdempotencyKey(t *testing.T) {
	s, _ := newStore(t, 2)
	ctx := testContext(t)
	sh := s.ShardForKey("key-1")
	const n = 8
	out := make([]store.Execution, n)
	created := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], created[i], errs[i] = executeWithKey(ctx, sh, "key-1")
		}()
	}
	wg.Wait()
	creators := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("execute %d: %v", i, errs[i])
		}
		if created[i] {
			creators++
		}
		if out[i].ExecutionID != out[0].ExecutionID || out[i].IdempotencyKey != "key-1" {
			t.Errorf("execute %d got execution %d, execute 0 got %d", i, out[i].ExecutionID, out[0].ExecutionID)
		}
	}
	if creators != 1 {
		t.Errorf("%d executes created an execution, want 1", creators)
	}
	byKey, err := store.GetExecutionByIdempotencyKey(ctx, sh.Pool(), "key-1")
	if err != nil || byKey.ExecutionID != out[0].ExecutionID {
		t.Errorf("by key: %+v %v", byKey, err)
	}
}

// executeWithKey starts an execution with an idempotency key as
// controlplane.Execute does; created is false when another had the key.
func executeWithKey(ctx context.Context, sh *store.Shard, key string) (_ store.Execution, created bool, _ error) {
	tx, err := sh.Begin(ctx)
	if err != nil {
		return store.Execution{}, false, err
	}
	defer tx.Rollback(ctx)
	ls := &store.LockSet{IdempotencyKey: key}
	if err := tx.Lock(ctx, ls); err != nil {
		return store.Execution{}, false, err
	}
	if ls.Existing != nil {
		return *ls.Existing, false, nil
	}
	id, err := store.AllocateIDs(ctx, tx, sh.Index(), 1)
	if err != nil {
		return store.Execution{}, false, err
	}
	err = tx.Write(&store.Changes{NewExecutions: []store.Execution{{ExecutionID: id[0], CatalogID: 1, Path: "p", Version: 1,
		Pool: "shared", IdempotencyKey: key, StartedAt: ls.Now}}})
	if err == nil {
		err = tx.Commit(ctx)
	}
	if store.IsIdempotencyConflict(err) {
		prev, err := store.GetExecutionByIdempotencyKey(ctx, sh.Pool(), key)
		return prev, false, err
	}
	if err != nil {
		return store.Execution{}, false, err
	}
	e, err := store.GetExecution(ctx, sh.Pool(), id[0])
	return e, true, err
}

// TestListExecutionsKeyset pages through executions of two shards merged the way the
// API merges them, with and without filters, and compares with the expected order.
func TestListExecutionsKeyset(t *testing.T) {
	s, _ := newStore(t, 2)
	ctx := testContext(t)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var all []store.Execution
	for i := range 60 {
		sh := s.Shard(i % 2)
		e := newExecution(t, sh, func(e *store.Execution) {
			// Groups of three share a start time, across shards: ids break the ties.
			e.StartedAt = base.Add(time.Duration(i/3) * time.Second)
			e.Status = []string{lifecycle.ExecutionRunning, lifecycle.ExecutionCompleted, lifecycle.ExecutionFailed}[i%3]
			e.Path = fmt.Sprintf("path/%d", i%4)
			e.CatalogID = int64(100 + i%5)
			if i%6 == 0 {
				e.ParentExecutionID = 4242
			}
		})
		all = append(all, e)
	}
	order := func(a, b store.Execution) int {
		if c := b.StartedAt.Compare(a.StartedAt); c != 0 {
			return c
		}
		return cmp.Compare(b.ExecutionID, a.ExecutionID)
	}
	slices.SortFunc(all, order)

	pageAll := func(f store.ExecutionFilter) []int64 {
		var got []int64
		for page := 0; page < 100; page++ {
			var merged []store.Execution
			for i := range s.NumShards() {
				rows, err := store.ListExecutions(ctx, s.Shard(i).Pool(), f)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.IsSortedFunc(rows, order) {
					t.Fatalf("shard %d page not in order", i)
				}
				for _, r := range rows {
					if r.State != nil || r.Workload != nil {
						t.Fatalf("list returned state/workload")
					}
				}
				merged = append(merged, rows...)
			}
			slices.SortFunc(merged, order)
			if len(merged) > f.Limit {
				merged = merged[:f.Limit]
			}
			for _, e := range merged {
				got = append(got, e.ExecutionID)
			}
			if len(merged) < f.Limit {
				return got
			}
			c := merged[len(merged)-1].Cursor()
			f.After = &c
		}
		t.Fatal("pagination did not end")
		return nil
	}
	expect := func(keep func(store.Execution) bool) []int64 {
		var out []int64
		for _, e := range all {
			if keep(e) {
				out = append(out, e.ExecutionID)
			}
		}
		return out
	}
	cases := []struct {
		name string
		f    store.ExecutionFilter
		keep func(store.Execution) bool
	}{
		{"all", store.ExecutionFilter{Limit: 7}, func(store.Execution) bool { return true }},
		{"status", store.ExecutionFilter{Limit: 4, Status: lifecycle.ExecutionFailed}, func(e store.Execution) bool { return e.Status == lifecycle.ExecutionFailed }},
		{"path", store.ExecutionFilter{Limit: 5, Path: "path/1"}, func(e store.Execution) bool { return e.Path == "path/1" }},
		{"catalog", store.ExecutionFilter{Limit: 3, CatalogID: 102}, func(e store.Execution) bool { return e.CatalogID == 102 }},
		{"parent", store.ExecutionFilter{Limit: 2, ParentExecutionID: 4242}, func(e store.Execution) bool { return e.ParentExecutionID == 4242 }},
		{"status+path", store.ExecutionFilter{Limit: 2, Status: lifecycle.ExecutionRunning, Path: "path/0"},
			func(e store.Execution) bool { return e.Status == lifecycle.ExecutionRunning && e.Path == "path/0" }},
	}
	for _, c := range cases {
		want := expect(c.keep)
		if len(want) == 0 {
			t.Fatalf("%s: the fixture selects nothing", c.name)
		}
		if got := pageAll(c.f); !slices.Equal(got, want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, got, want)
		}
	}
}

func TestEvents(t *testing.T) {
	s, _ := newStore(t, 2)
	ctx := testContext(t)
	sh := s.Shard(0)
	e := newExecution(t, sh, nil)
	eventIDs := allocate(t, sh, 6)
	mk := func(seq int, typ, step string) store.Event {
		return store.Event{ExecutionID: e.ExecutionID, Seq: int64(seq), EventID: eventIDs[seq-1], EventType: typ, NodeName: step}
	}
	batch := []store.Event{
		mk(1, "playbook.started", ""),
		mk(2, "step.enter", "start"),
		mk(3, "command.issued", "start"),
		mk(4, "call.done", "start"),
	}
	batch[0].Context = map[string]any{"workload": map[string]any{"n": int64(1)}}
	batch[2].NodeType, batch[2].Status = "python", "PENDING"
	batch[2].Meta = map[string]any{"command_id": "c1", "attempt": int64(1)}
	batch[3].Result = map[string]any{"status": "success", "context": map[string]any{"x": 1.5}}
	batch[3].WorkerID, batch[3].CommandID, batch[3].ClientEventID, batch[3].ParentEventID = "w1", "c1", "client-1", eventIDs[2]
	ls := &store.LockSet{Executions: []int64{e.ExecutionID}}
	tx := lock(t, sh, ls)
	for i := range batch {
		batch[i].CreatedAt = ls.Now // the transaction's events share its clock (R-S4)
	}
	if err := tx.Write(&store.Changes{Events: batch}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// eventAt reads the event at seq back.
	eventAt := func(seq int64) store.Event {
		t.Helper()
		evs, err := store.ListEvents(ctx, sh.Pool(), store.EventFilter{ExecutionID: e.ExecutionID, AfterSeq: seq - 1, UntilSeq: seq})
		if err != nil || len(evs) != 1 {
			t.Fatalf("event %d: %d events, %v", seq, len(evs), err)
		}
		return evs[0]
	}

	// A re-posted worker event is found by its client id, under the lock.
	ls = &store.LockSet{Executions: []int64{e.ExecutionID}, ClientEvents: []store.ClientEventKey{
		{ExecutionID: e.ExecutionID, ClientID: "client-1"}, {ExecutionID: e.ExecutionID, ClientID: "client-2"}}}
	lock(t, sh, ls).Rollback(ctx)
	if id, ok := ls.Seen[ls.ClientEvents[0]]; !ok || id != eventIDs[3] {
		t.Fatalf("client-1 seen as %d, %v; want %d", id, ok, eventIDs[3])
	}
	if id, ok := ls.Seen[ls.ClientEvents[1]]; ok {
		t.Errorf("unknown client id seen as event %d", id)
	}
	now := time.Now().UTC()
	dup := mk(5, "call.done", "start")
	dup.ClientEventID, dup.CreatedAt = "client-1", now
	if err := write(ctx, sh, &store.Changes{Events: []store.Event{dup}}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("second event with client id client-1: %v, want ErrDuplicate", err)
	}
	again := mk(4, "call.done", "start")
	again.CreatedAt = now
	if err := write(ctx, sh, &store.Changes{Events: []store.Event{again}}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("seq 4 again: %v, want ErrDuplicate", err)
	}
	if err := write(ctx, sh, &store.Changes{Events: []store.Event{mk(5, "call.done", "start")}}); err == nil {
		t.Error("an event without created_at was written")
	}

	// An ignored (fenced) event keeps its place in the log and its time.
	future := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond)
	fenced := mk(5, "command.completed", "start")
	fenced.CreatedAt, fenced.Ignored = future, true
	late := mk(6, "step.exit", "start")
	late.CreatedAt = future
	mustWrite(t, sh, &store.Changes{Events: []store.Event{fenced, late}})

	got := eventAt(4)
	if got.EventID != eventIDs[3] || got.Result["context"].(map[string]any)["x"] != 1.5 || got.WorkerID != "w1" || got.ParentEventID != eventIDs[2] || got.ClientEventID != "client-1" {
		t.Errorf("event 4: %+v", got)
	}
	if ev := eventAt(5); !ev.Ignored || !ev.CreatedAt.Equal(future) {
		t.Errorf("fenced event: %+v", ev)
	}

	seqs := func(f store.EventFilter) []int64 {
		evs, err := store.ListEvents(ctx, sh.Pool(), f)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, ev := range evs {
			out = append(out, ev.Seq)
		}
		return out
	}
	for name, c := range map[string]struct {
		f    store.EventFilter
		want []int64
	}{
		"all":      {store.EventFilter{ExecutionID: e.ExecutionID}, []int64{1, 2, 3, 4, 5, 6}},
		"page":     {store.EventFilter{ExecutionID: e.ExecutionID, AfterSeq: 2, Limit: 2}, []int64{3, 4}},
		"type":     {store.EventFilter{ExecutionID: e.ExecutionID, EventType: "call.done"}, []int64{4}},
		"step":     {store.EventFilter{ExecutionID: e.ExecutionID, Step: "start", AfterSeq: 3}, []int64{4, 5, 6}},
		"until":    {store.EventFilter{ExecutionID: e.ExecutionID, UntilSeq: 3}, []int64{1, 2, 3}},
		"before":   {store.EventFilter{ExecutionID: e.ExecutionID, Before: batch[3].CreatedAt}, []int64{1, 2, 3, 4}},
		"no match": {store.EventFilter{ExecutionID: e.ExecutionID + 1}, nil},
	} {
		if got := seqs(c.f); !slices.Equal(got, c.want) {
			t.Errorf("%s: seqs %v, want %v", name, got, c.want)
		}
	}

	var streamed []int64
	err := store.StreamEvents(ctx, sh.Pool(), store.EventFilter{ExecutionID: e.ExecutionID, AfterSeq: 1}, func(ev *store.Event) error {
		streamed = append(streamed, ev.Seq)
		return nil
	})
	if err != nil || !slices.Equal(streamed, []int64{2, 3, 4, 5, 6}) {
		t.Errorf("stream: %v %v", streamed, err)
	}
	stop := errors.New("stop")
	streamed = nil
	err = store.StreamEvents(ctx, sh.Pool(), store.EventFilter{ExecutionID: e.ExecutionID}, func(ev *store.Event) error {
		streamed = append(streamed, ev.Seq)
		if ev.Seq == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !slices.Equal(streamed, []int64{1, 2}) {
		t.Errorf("stopped stream: %v %v", streamed, err)
	}
	// The pool is still usable after an abandoned stream.
	if ev := eventAt(1); ev.EventID != eventIDs[0] {
		t.Errorf("after stream: %+v", ev)
	}
}
