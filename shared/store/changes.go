package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/lifecycle"
)

// LockSet is what a transaction locks and reads in its first round trip, in
// the lock order of R-L5: executions first (by id), then commands (by id).
type LockSet struct {
	// IssuedEventIDs lock the commands these command.issued events created,
	// and their executions with the others (a claim knows only the event id).
	IssuedEventIDs []int64
	Executions     []int64
	Commands       []string
	// ClientEvents are looked up: a worker event posted again is found by the
	// client id it carried the first time.
	ClientEvents []ClientEventKey
	// IdempotencyKey looks up the execution an execute request with this key
	// started (not locked).
	IdempotencyKey string
	// Request looks up the first answer of an event request's Idempotency-Key.
	Request *RequestKey
	// KnownStates are executions whose state (snapshot) the caller already
	// has, at the last_seq given: while a row is still at that seq its state
	// is not read (State comes back nil), which spares reading, decompressing
	// and sending it at every step.
	KnownStates map[int64]int64

	// What Lock read.
	ExecutionRows map[int64]Execution
	CommandRows   map[string]Command
	Seen          map[ClientEventKey]int64 // client key → the stored event's id
	Existing      *Execution               // the execution of IdempotencyKey
	Answered      *EventRequest            // the first answer of Request
	// Now is the database clock once the locks are held: the time of the
	// transaction's events (R-S4) and the base of its leases.
	Now time.Time
	// ReachableSince is when the database last became reachable: its start,
	// or the end of an outage a server process saw (MarkReachable). No lease
	// is expired within a lease of it.
	ReachableSince time.Time
	// Staged are the staged events of the locked executions (StageEvents),
	// oldest first, taken out of staging: the transaction enters them into
	// the log, or rolls back and leaves them staged.
	Staged []StagedEvent
}

// ClientEventKey names a worker event by its execution and client id.
type ClientEventKey struct {
	ExecutionID int64
	ClientID    string
}

// Lock queues the locks and reads of ls and sends them with whatever is
// queued (BEGIN first) in one round trip.
func (t *Tx) Lock(ctx context.Context, ls *LockSet) error {
	ls.ExecutionRows, ls.CommandRows, ls.Seen, ls.Existing, ls.Answered = map[int64]Execution{}, map[string]Command{}, map[ClientEventKey]int64{}, nil, nil
	keepExecution := func(rows pgx.Rows) error {
		for rows.Next() {
			e, err := scanExecution(rows)
			if err != nil {
				return err
			}
			ls.ExecutionRows[e.ExecutionID] = e
		}
		return rows.Err()
	}
	keepCommand := func(rows pgx.Rows) error {
		for rows.Next() {
			c, err := scanCommand(rows)
			if err != nil {
				return err
			}
			ls.CommandRows[c.CommandID] = c
		}
		return rows.Err()
	}
	// One statement each for executions and commands: locks taken in id
	// order never deadlock with another transaction's.
	if len(ls.Executions) > 0 || len(ls.IssuedEventIDs) > 0 {
		knownIDs, knownSeqs := make([]int64, 0, len(ls.KnownStates)), make([]int64, 0, len(ls.KnownStates))
		for id, seq := range ls.KnownStates {
			knownIDs, knownSeqs = append(knownIDs, id), append(knownSeqs, seq)
		}
		t.Queue(`SELECT `+executionStateUnlessKnown("$3", "$4")+` FROM execution
			WHERE execution_id = ANY($1)
			   OR execution_id = ANY(ARRAY(SELECT execution_id FROM command WHERE issued_event_id = ANY($2)))
			ORDER BY execution_id FOR UPDATE`, nonNil(ls.Executions), nonNil(ls.IssuedEventIDs), knownIDs, knownSeqs).Query(keepExecution)
	}
	// Commands reported on are read without their payload and without a
	// row lock: every writer of a command's status, holder or attempt holds
	// its execution's lock, taken above (R-L5); a heartbeat changes only
	// the lease of a held command, which fencing does not read. Commands
	// claimed by event id are locked (a lapsed lease is expired first,
	// R-L4) and read whole (the claim answers with the payload).
	if len(ls.Commands) > 0 {
		t.Queue(`SELECT `+commandStateColumns+` FROM command WHERE command_id = ANY($1)`, ls.Commands).Query(keepCommand)
	}
	if len(ls.IssuedEventIDs) > 0 {
		t.Queue(`SELECT `+commandColumns+` FROM command WHERE issued_event_id = ANY($1)
			ORDER BY command_id FOR UPDATE`, ls.IssuedEventIDs).Query(keepCommand)
	}
	if len(ls.ClientEvents) > 0 {
		// Both columns as arrays (a superset: pairs are matched below), so
		// the plan is an index scan whatever it estimates; a join on
		// unnest was planned as a scan of the whole table.
		execIDs, clients := make([]int64, len(ls.ClientEvents)), make([]string, len(ls.ClientEvents))
		want := map[ClientEventKey]bool{}
		for i, k := range ls.ClientEvents {
			execIDs[i], clients[i] = k.ExecutionID, k.ClientID
			want[k] = true
		}
		t.Queue(`SELECT execution_id, client_event_id, event_id FROM event
			WHERE execution_id = ANY($1) AND client_event_id = ANY($2)`, execIDs, clients).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var k ClientEventKey
				var id int64
				if err := rows.Scan(&k.ExecutionID, &k.ClientID, &id); err != nil {
					return err
				}
				if want[k] {
					ls.Seen[k] = id
				}
			}
			return rows.Err()
		})
	}
	if ls.IdempotencyKey != "" {
		t.Queue(`SELECT `+executionColumns+` FROM execution WHERE idempotency_key = $1`, ls.IdempotencyKey).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					e, err := scanExecution(rows)
					if err != nil {
						return err
					}
					ls.Existing = &e
				}
				return rows.Err()
			})
	}
	if r := ls.Request; r != nil {
		t.Queue(`SELECT request_hash, answer FROM event_request WHERE execution_id = $1 AND idempotency_key = $2`,
			r.ExecutionID, r.Key).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				a := EventRequest{RequestKey: *r}
				if err := rows.Scan(&a.Hash, &a.Answer); err != nil {
					return err
				}
				ls.Answered = &a
			}
			return rows.Err()
		})
	}
	// Read after the locks are held: the clock of this transaction's events,
	// and since when the database is reachable (see reachableFor).
	// With executions locked, the same statement takes their staged events
	// (a statement of its own after the locks: it sees every event staged
	// before them).
	clock := `SELECT clock_timestamp(), ` + lifecycle.ReachableSinceSQL + `, '[]'::json`
	var clockArgs []any
	if len(ls.Executions) > 0 || len(ls.IssuedEventIDs) > 0 {
		clock = `WITH ` + stagedSQL + ` SELECT clock_timestamp(), ` + lifecycle.ReachableSinceSQL + `, ` + stagedJSON
		clockArgs = []any{nonNil(ls.Executions), nonNil(ls.IssuedEventIDs)}
	}
	ls.Staged = nil
	t.Queue(clock, clockArgs...).QueryRow(func(row pgx.Row) error {
		var staged []byte
		if err := row.Scan(&ls.Now, &ls.ReachableSince, &staged); err != nil {
			return err
		}
		ls.Now, ls.ReachableSince = ls.Now.UTC(), ls.ReachableSince.UTC()
		var err error
		ls.Staged, err = decodeStaged(staged)
		return err
	})
	if err := t.Flush(ctx); err != nil {
		return fmt.Errorf("store: lock on shard %d: %w", t.shard, err)
	}
	return nil
}

// nonNil sends an empty array, not NULL, for an empty list.
func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

// CommandChange is what a transaction changes on an existing command row.
// Changes of one command in one transaction are merged by Merge before
// writing, so each row is written once.
type CommandChange struct {
	CommandID string
	Status    string
	// Attempt and AvailableAt, when set, replace the row's (a retry, R-L6).
	Attempt     int
	AvailableAt time.Time
	// Hold gives the command to WorkerID until LeaseExpiresAt, with its
	// deadline (a claim, R-L2); Release clears holder, lease and deadline (a
	// retry). Neither keeps them.
	Hold, Release  bool
	WorkerID       string
	LeaseExpiresAt time.Time
	DeadlineAt     time.Time
	// AnnouncedAt, when set, records an announcement again
	// (lifecycle.ReannounceDue); Release clears it.
	AnnouncedAt time.Time
}

// Merge applies a later change of the same command onto c.
func (c *CommandChange) Merge(later CommandChange) {
	c.Status = later.Status
	if later.Attempt > 0 {
		c.Attempt = later.Attempt
	}
	if !later.AvailableAt.IsZero() {
		c.AvailableAt = later.AvailableAt
	}
	if later.Hold || later.Release {
		c.Hold, c.Release = later.Hold, later.Release
		c.WorkerID, c.LeaseExpiresAt, c.DeadlineAt = later.WorkerID, later.LeaseExpiresAt, later.DeadlineAt
		c.AnnouncedAt = time.Time{}
	}
	if !later.AnnouncedAt.IsZero() {
		c.AnnouncedAt = later.AnnouncedAt
	}
}

// Apply applies the change to a row held in memory (a command created in the
// same transaction, or one read under its lock).
func (c CommandChange) Apply(row *Command) {
	row.Status = c.Status
	if c.Attempt > 0 {
		row.Attempt = c.Attempt
	}
	if !c.AvailableAt.IsZero() {
		row.AvailableAt = c.AvailableAt
	}
	switch {
	case c.Hold:
		row.WorkerID, row.LeaseExpiresAt, row.DeadlineAt, row.AnnouncedAt = c.WorkerID, c.LeaseExpiresAt, c.DeadlineAt, time.Time{}
	case c.Release:
		row.WorkerID, row.LeaseExpiresAt, row.DeadlineAt, row.AnnouncedAt = "", time.Time{}, time.Time{}, time.Time{}
	}
	if !c.AnnouncedAt.IsZero() {
		row.AnnouncedAt = c.AnnouncedAt
	}
}

// updateCommandsStmt writes each change to its row. The key is also matched
// with = ANY: a join on unnest alone may be planned as a scan of the whole
// table (the planner guesses its length), ANY keeps it on the index.
func updateCommandsStmt(changes []CommandChange) (string, []any) {
	n := len(changes)
	ids, statuses, workers := make([]string, n), make([]string, n), make([]*string, n)
	attempts := make([]int32, n)
	available, leases, deadlines, announced := make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
	hold, release := make([]bool, n), make([]bool, n)
	for i, c := range changes {
		ids[i], statuses[i], attempts[i] = c.CommandID, c.Status, int32(c.Attempt)
		available[i], hold[i], release[i] = nullTime(c.AvailableAt), c.Hold, c.Release
		workers[i], leases[i], deadlines[i] = nullString(c.WorkerID), nullTime(c.LeaseExpiresAt), nullTime(c.DeadlineAt)
		announced[i] = nullTime(c.AnnouncedAt)
	}
	return `
		UPDATE command c SET status = u.status,
			attempt = CASE WHEN u.attempt > 0 THEN u.attempt ELSE c.attempt END,
			available_at = coalesce(u.available_at, c.available_at),
			worker_id = CASE WHEN u.hold THEN u.worker_id WHEN u.release THEN NULL ELSE c.worker_id END,
			lease_expires_at = CASE WHEN u.hold THEN u.lease WHEN u.release THEN NULL ELSE c.lease_expires_at END,
			deadline_at = CASE WHEN u.hold THEN u.deadline WHEN u.release THEN NULL ELSE c.deadline_at END,
			announced_at = CASE WHEN u.announced IS NOT NULL THEN u.announced WHEN u.hold OR u.release THEN NULL ELSE c.announced_at END,
			updated_at = now()
		FROM unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::boolean[], $6::boolean[],
			$7::text[], $8::timestamptz[], $9::timestamptz[], $10::timestamptz[])
			AS u(command_id, status, attempt, available_at, hold, release, worker_id, lease, deadline, announced)
		WHERE c.command_id = u.command_id AND c.command_id = ANY($1)`,
		[]any{ids, statuses, attempts, available, hold, release, workers, leases, deadlines, announced}
}

// Changes is what one transaction writes. Write queues it as a few multi-row
// statements, in this order, to travel with COMMIT.
type Changes struct {
	NewExecutions []Execution
	Events        []Event // CreatedAt set
	NewCommands   []Command
	Commands      []CommandChange // one per command
	Results       []StepResult    // ExecutionID set
	Outbox        []OutboxMessage // OutboxID set (from the shard's id sequence)
	Executions    []Execution     // rows to write back: status, state (nil keeps it), last_seq, completed_at, error
	Requests      []EventRequest  // first answers of Idempotency-Keys
}

// Empty reports whether there is nothing to write.
func (ch *Changes) Empty() bool {
	return len(ch.NewExecutions)+len(ch.Events)+len(ch.NewCommands)+len(ch.Commands)+len(ch.Results)+
		len(ch.Outbox)+len(ch.Executions)+len(ch.Requests) == 0
}

// Write queues the changes on t; they are sent by the next Flush or Commit.
func (t *Tx) Write(ch *Changes) error {
	queue := func(what string, sql string, args []any, err error) error {
		if err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		t.Queue(sql, args...)
		return nil
	}
	for _, e := range ch.NewExecutions {
		sql, args, err := insertExecutionStmt(e)
		if err := queue(fmt.Sprintf("insert execution %d", e.ExecutionID), sql, args, err); err != nil {
			return err
		}
	}
	if len(ch.Events) > 0 {
		for _, e := range ch.Events {
			if e.CreatedAt.IsZero() {
				return fmt.Errorf("store: event %d of execution %d has no created_at", e.EventID, e.ExecutionID)
			}
		}
		sql, args, err := appendEventsStmt(ch.Events)
		if err := queue("append events", sql, args, err); err != nil {
			return err
		}
	}
	if len(ch.NewCommands) > 0 {
		sql, args, err := insertCommandsStmt(ch.NewCommands)
		if err := queue("insert commands", sql, args, err); err != nil {
			return err
		}
	}
	if len(ch.Commands) > 0 {
		sql, args := updateCommandsStmt(ch.Commands)
		t.Queue(sql, args...)
	}
	if len(ch.Results) > 0 {
		sql, args, err := putStepResultsStmt(ch.Results)
		if err := queue("put step results", sql, args, err); err != nil {
			return err
		}
	}
	if len(ch.Outbox) > 0 {
		for _, m := range ch.Outbox {
			if m.OutboxID == 0 {
				return errors.New("store: an outbox row without its id")
			}
		}
		sql, args, err := insertOutboxStmt(ch.Outbox)
		if err := queue("insert outbox rows", sql, args, err); err != nil {
			return err
		}
	}
	if len(ch.Requests) > 0 {
		sql, args := insertRequestsStmt(ch.Requests)
		t.Queue(sql, args...)
	}
	if len(ch.Executions) > 0 {
		// Each row's updated_at comes back into ch.Executions: the database
		// clock stamps it, and a later txn that assumes the row must know
		// it (Assumption.Now).
		sql, args := updateExecutionsStmt(ch.Executions)
		t.Queue(sql, args...).Query(func(rows pgx.Rows) error {
			at := make(map[int64]int, len(ch.Executions))
			for i, e := range ch.Executions {
				at[e.ExecutionID] = i
			}
			changed := 0
			for rows.Next() {
				var id int64
				var updated time.Time
				if err := rows.Scan(&id, &updated); err != nil {
					return fmt.Errorf("store: update executions: %w", err)
				}
				if i, ok := at[id]; ok {
					ch.Executions[i].UpdatedAt = updated.UTC()
					changed++
				}
			}
			if err := rows.Err(); err != nil {
				return err
			}
			if changed != len(ch.Executions) {
				return fmt.Errorf("store: update %d executions: %d rows changed: %w", len(ch.Executions), changed, ErrNotFound)
			}
			return nil
		})
	}
	return nil
}
