package store_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/dev/devstack/devstacktest"
	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/store/storetest"
)

// TestExecModes runs one pass over every kind of statement with the pgx modes that
// avoid named prepared statements (what a deployment behind RDS Proxy configures):
// parameter types are then inferred differently, so each query must still bind.
func TestExecModes(t *testing.T) {
	for name, mode := range map[string]pgx.QueryExecMode{
		"exec":   pgx.QueryExecModeExec,
		"simple": pgx.QueryExecModeSimpleProtocol,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			pg := devstacktest.Postgres(t, 0)
			cfg := store.Config{ClusterDSN: pg.ClusterDSN, ExecMode: mode}
			if err := store.Migrate(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			s, err := store.Open(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sh := s.NextShard()
			db := sh.Pool()

			cat, _, err := store.RegisterCatalog(ctx, s.Cluster(), "m/p", "Playbook", "x")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.ListCatalog(ctx, s.Cluster(), store.CatalogFilter{After: &store.CatalogCursor{Path: "a", Version: 1}}); err != nil {
				t.Fatal(err)
			}
			idList, err := store.AllocateIDs(ctx, sh.Pool(), sh.Index(), 4)
			if err != nil {
				t.Fatal(err)
			}
			mustWrite(t, sh, &store.Changes{NewExecutions: []store.Execution{{ExecutionID: idList[0], CatalogID: cat.CatalogID, Path: "m/p",
				Version: 1, Pool: "shared", IdempotencyKey: "k", Workload: map[string]any{"a": int64(1)}}}})
			e, err := store.GetExecution(ctx, db, idList[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := write(ctx, sh, &store.Changes{NewExecutions: []store.Execution{{ExecutionID: idList[1], CatalogID: 1, Path: "m/p",
				Version: 1, Pool: "shared", IdempotencyKey: "k"}}}); !store.IsIdempotencyConflict(err) {
				t.Fatalf("insert with a taken idempotency key: %v, want the conflict", err)
			}
			c := e.Cursor()
			if _, err := store.ListExecutions(ctx, db, store.ExecutionFilter{Status: "RUNNING", CatalogID: 1, After: &c}); err != nil {
				t.Fatal(err)
			}
			cmdID := engine.CommandID(e.ExecutionID, "start", idList[2], -1)
			ls := &store.LockSet{Executions: []int64{e.ExecutionID}}
			tx := lock(t, sh, ls)
			locked := ls.ExecutionRows[e.ExecutionID]
			locked.LastSeq, locked.State = 1, json.RawMessage(`{"x":1}`)
			if err := tx.Write(&store.Changes{
				Events: []store.Event{{ExecutionID: e.ExecutionID, Seq: 1, EventID: idList[2], EventType: "command.issued", NodeName: "start",
					Meta: map[string]any{"command_id": cmdID}, ClientEventID: "c1", CreatedAt: ls.Now}},
				NewCommands: []store.Command{{CommandID: cmdID, ExecutionID: e.ExecutionID, IssuedEventID: idList[2], Step: "start", ToolKind: "noop"}},
				Outbox: []store.OutboxMessage{{OutboxID: idList[3], ExecutionID: e.ExecutionID, EventID: idList[2],
					Subject: "noetl.commands.shared.1", MsgID: cmdID + ":1", Payload: json.RawMessage(`{"a":1}`)}},
				Results:    []store.StepResult{{StepResultKey: store.StepResultKey{Step: "start", Visit: 1}, ExecutionID: e.ExecutionID, Result: "r"}},
				Executions: []store.Execution{locked},
			}); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := store.ListEvents(ctx, db, store.EventFilter{ExecutionID: e.ExecutionID, Before: time.Now().Add(time.Hour), EventType: "command.issued"}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.GetStepResults(ctx, db, e.ExecutionID, []store.StepResultKey{{Step: "start", Visit: 1}}); err != nil {
				t.Fatal(err)
			}
			if err := write(ctx, sh, &store.Changes{Commands: []store.CommandChange{{CommandID: cmdID, Status: store.CommandClaimed,
				Hold: true, WorkerID: "w", LeaseExpiresAt: time.Now().Add(time.Minute), DeadlineAt: time.Now().Add(time.Hour)}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.ExtendLease(ctx, db, cmdID, "w", 1, lifecycle.Limits{Lease: time.Minute, Grace: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if err := write(ctx, sh, &store.Changes{Commands: []store.CommandChange{{CommandID: cmdID, Status: store.CommandPending,
				Attempt: 2, AvailableAt: time.Now().Add(-time.Second), Release: true}}}); err != nil {
				t.Fatal(err)
			}
			err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
				if _, err := store.LockReannounceDue(ctx, tx, lifecycle.DefaultReannounce, nil, 10); err != nil {
					return err
				}
				_, err := store.LockEndedLeases(ctx, tx, lifecycle.Limits{Grace: time.Minute}, nil, 10)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			mustExec(t, db, `UPDATE outbox SET created_at = now() - interval '1 minute'`)
			rows, err := store.ClaimOutbox(ctx, db, 10)
			if err != nil || len(rows) != 1 {
				t.Fatalf("claim outbox: %d %v", len(rows), err)
			}
			if d, err := store.MarkOutboxFailed(ctx, db, rows[0].OutboxID, "e", 30*time.Second); err != nil || d != time.Second {
				t.Fatalf("mark failed: %v %v", d, err)
			}
			if _, err := store.MarkOutboxPublished(ctx, db, []int64{rows[0].OutboxID}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.DeletePublishedOutbox(ctx, db, time.Hour, 10); err != nil {
				t.Fatal(err)
			}
			pipelined(t, sh, e, cat.CatalogID, cmdID, idList[2])
		})
	}
}

// pipelined runs the hot paths' transaction: every lock and read in one
// batch, every kind of write with COMMIT in another.
func pipelined(t *testing.T, sh *store.Shard, e store.Execution, catalogID int64, cmdID string, issued int64) {
	ctx := testContext(t)
	db := sh.Pool()
	more, err := store.AllocateIDs(ctx, db, sh.Index(), 3)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := sh.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ls := &store.LockSet{Executions: []int64{e.ExecutionID}, Commands: []string{cmdID}, IssuedEventIDs: []int64{issued},
		ClientEvents:   []store.ClientEventKey{{ExecutionID: e.ExecutionID, ClientID: "c1"}, {ExecutionID: e.ExecutionID, ClientID: "c2"}},
		IdempotencyKey: "k"}
	if err := tx.Lock(ctx, ls); err != nil {
		t.Fatal(err)
	}
	if _, ok := ls.ExecutionRows[e.ExecutionID]; !ok || ls.CommandRows[cmdID].CommandID != cmdID || ls.Seen[ls.ClientEvents[0]] != issued ||
		len(ls.Seen) != 1 || ls.Existing == nil || ls.Existing.ExecutionID != e.ExecutionID || ls.Now.IsZero() {
		t.Fatalf("lock read %+v", ls)
	}
	next := engine.CommandID(e.ExecutionID, "next", more[1], -1)
	ch := &store.Changes{
		NewExecutions: []store.Execution{{ExecutionID: more[0], CatalogID: catalogID, Path: "m/p", Version: 1, Pool: "shared", StartedAt: ls.Now}},
		Events: []store.Event{{ExecutionID: e.ExecutionID, Seq: 2, EventID: more[1], EventType: "command.issued", NodeName: "next",
			Meta: map[string]any{"command_id": next}, CreatedAt: ls.Now}},
		NewCommands: []store.Command{{CommandID: next, ExecutionID: e.ExecutionID, IssuedEventID: more[1], Step: "next", ToolKind: "noop",
			Status: store.CommandRunning, WorkerID: "w", LeaseExpiresAt: ls.Now.Add(time.Minute), DeadlineAt: ls.Now.Add(time.Hour)}},
		Commands: []store.CommandChange{{CommandID: cmdID, Status: store.CommandCompleted}},
		Results: []store.StepResult{{StepResultKey: store.StepResultKey{Step: "next", Visit: 1, Index: -1}, ExecutionID: e.ExecutionID,
			Result: map[string]any{"x": int64(1)}}},
		Outbox: []store.OutboxMessage{{OutboxID: more[2], ExecutionID: e.ExecutionID, EventID: more[1], Subject: "noetl.commands.shared.1",
			MsgID: next + ":1", Payload: json.RawMessage(`{"b":2}`)}},
		Executions: []store.Execution{{ExecutionID: e.ExecutionID, Status: lifecycle.ExecutionRunning, LastSeq: 2, State: json.RawMessage(`{"y":2}`)}},
	}
	if err := tx.Write(ch); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if c, err := storetest.Command(ctx, db, next); err != nil || c.Status != store.CommandRunning || c.WorkerID != "w" || c.DeadlineAt.IsZero() {
		t.Fatalf("new command %+v %v", c, err)
	}
	if c, _ := storetest.Command(ctx, db, cmdID); c.Status != store.CommandCompleted || c.Attempt != 2 {
		t.Fatalf("changed command %+v", c)
	}
	if x, err := store.GetExecution(ctx, db, e.ExecutionID); err != nil || x.LastSeq != 2 || string(x.State) != `{"y":2}` {
		t.Fatalf("execution %+v %v", x, err)
	}
	if _, err := store.GetExecution(ctx, db, more[0]); err != nil {
		t.Fatalf("new execution: %v", err)
	}
	knownStates(t, sh, e.ExecutionID, 2, `{"y":2}`)
}

// knownStates checks that Lock leaves out the state of an execution the
// caller holds at its current seq and reads it at any other seq, and so
// does GetExecutionUnlessAt.
func knownStates(t *testing.T, sh *store.Shard, id, seq int64, want string) {
	ctx := testContext(t)
	for _, at := range []int64{seq, seq - 1, -1} {
		row, err := store.GetExecutionUnlessAt(ctx, sh.Pool(), id, at)
		omitted := at == seq
		if err != nil || row.LastSeq != seq || (row.State == nil) != omitted || (!omitted && string(row.State) != want) {
			t.Errorf("GetExecutionUnlessAt at %d: state %q at seq %d (%v), want omitted=%v", at, row.State, row.LastSeq, err, omitted)
		}
	}
	if _, err := store.GetExecutionUnlessAt(ctx, sh.Pool(), id+1000, seq); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetExecutionUnlessAt of a missing execution: %v, want ErrNotFound", err)
	}
	for _, tc := range []struct {
		known   map[int64]int64
		omitted bool
	}{
		{map[int64]int64{id: seq}, true},
		{map[int64]int64{id: seq - 1}, false},
		{map[int64]int64{id + 1000: seq}, false},
		{nil, false},
	} {
		tx, err := sh.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ls := &store.LockSet{Executions: []int64{id}, KnownStates: tc.known}
		if err := tx.Lock(ctx, ls); err != nil {
			t.Fatal(err)
		}
		row := ls.ExecutionRows[id]
		if row.LastSeq != seq || (row.State == nil) != tc.omitted || (!tc.omitted && string(row.State) != want) {
			t.Errorf("known %v: state %q at seq %d, want omitted=%v", tc.known, row.State, row.LastSeq, tc.omitted)
		}
		tx.Rollback(ctx)
	}
}
