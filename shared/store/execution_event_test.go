package store_test

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	if e.Status != store.ExecutionRunning || e.StartedAt.IsZero() || !e.UpdatedAt.Equal(e.StartedAt) || string(e.State) != "{}" {
		t.Fatalf("inserted: %+v", e)
	}
	got, err := store.GetExecution(ctx, sh.Pool(), e.ExecutionID)
	if err != nil || got.Workload["big"] != int64(9007199254740993) || got.ParentExecutionID != 77 || got.Pool != "shared" {
		t.Fatalf("get: %+v %v", got, err)
	}
	done := time.Now().UTC().Truncate(time.Microsecond)
	inTx(t, sh.Pool(), func(tx pgx.Tx) error {
		locked, err := store.LockExecution(ctx, tx, e.ExecutionID)
		if err != nil {
			return err
		}
		locked.Status, locked.State, locked.LastSeq = store.ExecutionFailed, json.RawMessage(`{"steps":{}}`), 9
		locked.CompletedAt, locked.Error = done, "boom"
		return store.UpdateExecution(ctx, tx, locked)
	})
	got, err = store.GetExecution(ctx, sh.Pool(), e.ExecutionID)
	if err != nil || got.Status != store.ExecutionFailed || got.LastSeq != 9 || !got.CompletedAt.Equal(done) ||
		got.Error != "boom" || string(got.State) != `{"steps":{}}` || !got.UpdatedAt.After(e.UpdatedAt) {
		t.Fatalf("after update: %+v %v", got, err)
	}
	// nil State keeps the stored snapshot.
	got.State, got.Status = nil, store.ExecutionCancelled
	if err := store.UpdateExecution(ctx, sh.Pool(), got); err != nil {
		t.Fatal(err)
	}
	if again, _ := store.GetExecution(ctx, sh.Pool(), e.ExecutionID); string(again.State) != `{"steps":{}}` || again.Status != store.ExecutionCancelled {
		t.Errorf("nil state: %+v", again)
	}
	if _, err := store.GetExecution(ctx, sh.Pool(), 12345); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing execution: %v", err)
	}
	if err := store.UpdateExecution(ctx, sh.Pool(), store.Execution{ExecutionID: 12345, Status: "RUNNING"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update missing execution: %v", err)
	}
	got.Status = "BOGUS"
	if err := store.UpdateExecution(ctx, sh.Pool(), got); err == nil {
		t.Error("status outside the CHECK accepted")
	}
}

// TestExecutionIdempotencyKey: concurrent executes with one key create one execution
// and all get it back.
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
			errs[i] = pgx.BeginFunc(ctx, sh.Pool(), func(tx pgx.Tx) error {
				id, err := store.AllocateIDs(ctx, tx, sh.Index(), 1)
				if err != nil {
					return err
				}
				out[i], created[i], err = store.InsertExecution(ctx, tx, store.Execution{
					ExecutionID: id[0], CatalogID: 1, Path: "p", Version: 1, Pool: "shared", IdempotencyKey: "key-1"})
				return err
			})
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
			e.Status = []string{store.ExecutionRunning, store.ExecutionCompleted, store.ExecutionFailed}[i%3]
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
		{"status", store.ExecutionFilter{Limit: 4, Status: store.ExecutionFailed}, func(e store.Execution) bool { return e.Status == store.ExecutionFailed }},
		{"path", store.ExecutionFilter{Limit: 5, Path: "path/1"}, func(e store.Execution) bool { return e.Path == "path/1" }},
		{"catalog", store.ExecutionFilter{Limit: 3, CatalogID: 102}, func(e store.Execution) bool { return e.CatalogID == 102 }},
		{"parent", store.ExecutionFilter{Limit: 2, ParentExecutionID: 4242}, func(e store.Execution) bool { return e.ParentExecutionID == 4242 }},
		{"status+path", store.ExecutionFilter{Limit: 2, Status: store.ExecutionRunning, Path: "path/0"},
			func(e store.Execution) bool { return e.Status == store.ExecutionRunning && e.Path == "path/0" }},
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
	inTx(t, sh.Pool(), func(tx pgx.Tx) error {
		if _, err := store.LockExecution(ctx, tx, e.ExecutionID); err != nil {
			return err
		}
		return store.AppendEvents(ctx, tx, batch)
	})
	for i := 1; i < len(batch); i++ {
		if batch[i].CreatedAt.IsZero() || batch[i].CreatedAt.Before(batch[i-1].CreatedAt) {
			t.Fatalf("created_at not filled in order: %v then %v", batch[i-1].CreatedAt, batch[i].CreatedAt)
		}
	}

	// A re-posted worker event is found by its client id.
	id, err := store.FindEventByClientID(ctx, sh.Pool(), e.ExecutionID, "client-1")
	if err != nil || id != eventIDs[3] {
		t.Fatalf("FindEventByClientID = %d, %v; want %d", id, err, eventIDs[3])
	}
	if _, err := store.FindEventByClientID(ctx, sh.Pool(), e.ExecutionID, "client-2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown client id: %v", err)
	}
	dup := mk(5, "call.done", "start")
	dup.ClientEventID = "client-1"
	if err := store.AppendEvents(ctx, sh.Pool(), []store.Event{dup}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("second event with client id client-1: %v, want ErrDuplicate", err)
	}
	if err := store.AppendEvents(ctx, sh.Pool(), []store.Event{mk(4, "call.done", "start")}); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("seq 4 again: %v, want ErrDuplicate", err)
	}

	// created_at never goes back, even when the last event's time is ahead of the clock.
	future := time.Now().UTC().Add(time.Hour).Truncate(time.Microsecond)
	fenced := mk(5, "command.completed", "start")
	fenced.CreatedAt, fenced.Ignored = future, true
	if err := store.AppendEvents(ctx, sh.Pool(), []store.Event{fenced}); err != nil {
		t.Fatal(err)
	}
	next, err := store.NextEventTime(ctx, sh.Pool(), e.ExecutionID)
	if err != nil || next.Before(future) {
		t.Errorf("NextEventTime = %v, %v; want >= %v", next, err, future)
	}
	late := mk(6, "step.exit", "start")
	if err := store.AppendEvents(ctx, sh.Pool(), []store.Event{late}); err != nil {
		t.Fatal(err)
	}

	got, err := store.GetEvent(ctx, sh.Pool(), eventIDs[3])
	if err != nil || got.Result["context"].(map[string]any)["x"] != 1.5 || got.WorkerID != "w1" || got.ParentEventID != eventIDs[2] || got.ClientEventID != "client-1" {
		t.Errorf("GetEvent: %+v %v", got, err)
	}
	if ev, _ := store.GetEvent(ctx, sh.Pool(), eventIDs[4]); !ev.Ignored || !ev.CreatedAt.Equal(future) {
		t.Errorf("fenced event: %+v", ev)
	}
	if ev, _ := store.GetEvent(ctx, sh.Pool(), eventIDs[5]); ev.CreatedAt.Before(future) {
		t.Errorf("event after a future-dated one has created_at %v < %v", ev.CreatedAt, future)
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
	err = store.StreamEvents(ctx, sh.Pool(), store.EventFilter{ExecutionID: e.ExecutionID, AfterSeq: 1}, func(ev *store.Event) error {
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
	if _, err := store.GetEvent(ctx, sh.Pool(), eventIDs[0]); err != nil {
		t.Errorf("after stream: %v", err)
	}
}
