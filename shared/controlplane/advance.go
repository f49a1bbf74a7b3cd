package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/store"
)

// execution is one execution loaded under its row lock, kept current as triggers
// are advanced in the same transaction.
type execution struct {
	row   store.Execution
	shard *store.Shard
	pb    *engine.Playbook
	run   *engine.Run
	// snap is the snapshot in its stored form; every Handle attempt decodes a
	// fresh copy (a NeedResults retry must start from the stored state).
	snap []byte
	// lastSnap is the decoded snapshot after the latest advance.
	lastSnap *engine.Snapshot
}

// lockExecution reads an execution and locks its row (R-L5: always first).
func (s *Service) lockExecution(ctx context.Context, tx pgx.Tx, sh *store.Shard, id int64) (*execution, error) {
	row, err := store.LockExecution(ctx, tx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, Errorf(ErrNotFound, "execution %d not found", id)
	}
	if err != nil {
		return nil, err
	}
	pb, err := s.playbook(ctx, row.CatalogID)
	if err != nil {
		return nil, err
	}
	return &execution{row: row, shard: sh, pb: pb, run: runOf(row), snap: row.State}, nil
}

func runOf(row store.Execution) *engine.Run {
	return &engine.Run{ExecutionID: row.ExecutionID, CatalogID: row.CatalogID, Path: row.Path, Version: row.Version,
		ParentExecutionID: row.ParentExecutionID, Workload: row.Workload}
}

// terminal reports whether an execution status is final.
func terminal(status string) bool {
	switch status {
	case store.ExecutionCompleted, store.ExecutionFailed, store.ExecutionCancelled:
		return true
	}
	return false
}

// advanced is what one advance wrote.
type advanced struct {
	trigger store.Event
	out     *engine.Outcome
	snap    *engine.Snapshot
	outbox  []store.OutboxMessage
}

// advance appends trigger as the execution's next event, folds it with the
// engine and writes everything it decided, in tx: the engine's events, new
// commands, retries and cancellations on command rows, stored results, outbox
// rows for every (re-)issued command, and the execution row with the new
// snapshot. Publishing happens after commit (see finish).
func (s *Service) advance(ctx context.Context, tx pgx.Tx, x *execution, trigger store.Event) (*advanced, error) {
	ids := &idSource{ctx: ctx, q: tx, pool: s.ids, shard: x.shard.Index()}
	trigger.ExecutionID = x.row.ExecutionID
	trigger.Seq = x.row.LastSeq + 1
	if trigger.EventID == 0 {
		trigger.EventID = ids.next()
	}
	if trigger.CreatedAt.IsZero() {
		at, err := store.NextEventTime(ctx, tx, x.row.ExecutionID)
		if err != nil {
			return nil, err
		}
		trigger.CreatedAt = at
	}
	if ids.err != nil {
		return nil, ids.err
	}
	ev := toEngine(trigger)
	in := engine.Inputs{Results: map[engine.ResultKey]any{}, NewID: ids.next}
	var (
		out  *engine.Outcome
		snap *engine.Snapshot
	)
	started := time.Now()
	for round := 0; ; round++ {
		var err error
		if snap, err = engine.UnmarshalSnapshot(x.snap); err != nil {
			return nil, fmt.Errorf("decode the snapshot of execution %d: %w", x.row.ExecutionID, err)
		}
		out, err = s.eng.Handle(x.pb, x.run, snap, ev, in)
		var need *engine.NeedResultsError
		if errors.As(err, &need) && round < 4 {
			if err := s.loadResults(ctx, tx, x.row.ExecutionID, need.Keys, in.Results); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("execution %d: %w", x.row.ExecutionID, err)
		}
		break
	}
	if s.cfg.Observer != nil {
		s.cfg.Observer.Orchestrated(engine.CanonicalType(trigger.EventType), time.Since(started))
	}
	if ids.err != nil {
		return nil, ids.err
	}
	events := make([]store.Event, 0, 1+len(out.Events))
	events = append(events, trigger)
	for _, e := range out.Events {
		events = append(events, toStore(x.row.ExecutionID, e))
	}
	if err := store.AppendEvents(ctx, tx, events); err != nil {
		return nil, err
	}
	adv := &advanced{trigger: events[0], out: out, snap: snap}
	if err := s.writeOutcome(ctx, tx, x, adv); err != nil {
		return nil, err
	}
	b, err := snap.Marshal()
	if err != nil {
		return nil, err
	}
	x.snap, x.lastSnap = b, snap
	x.row.State = b
	x.row.LastSeq = events[len(events)-1].Seq
	x.row.Status = rowStatus(snap.Status)
	x.row.Error = snap.Error
	if terminal(x.row.Status) && x.row.CompletedAt.IsZero() {
		x.row.CompletedAt = events[len(events)-1].CreatedAt
	}
	if err := store.UpdateExecution(ctx, tx, x.row); err != nil {
		return nil, err
	}
	return adv, nil
}

// rowStatus maps the snapshot status to the execution row's.
func rowStatus(s string) string {
	if s == "" {
		return store.ExecutionRunning
	}
	return s
}

// appendIgnored stores an event that must not be folded (fenced, R-L8, or late
// for an ended execution, R-R10): it keeps its place in the log and nothing else.
func (s *Service) appendIgnored(ctx context.Context, tx pgx.Tx, x *execution, e store.Event) (store.Event, error) {
	ids, err := s.ids.take(ctx, tx, x.shard.Index(), 1)
	if err != nil {
		return e, err
	}
	e.ExecutionID, e.Seq, e.EventID, e.Ignored = x.row.ExecutionID, x.row.LastSeq+1, ids[0], true
	events := []store.Event{e}
	if err := store.AppendEvents(ctx, tx, events); err != nil {
		return e, err
	}
	x.row.LastSeq = e.Seq
	if err := store.UpdateExecution(ctx, tx, x.row); err != nil {
		return e, err
	}
	return events[0], nil
}

// writeOutcome writes the command rows, stored results and outbox rows of an
// outcome.
func (s *Service) writeOutcome(ctx context.Context, tx pgx.Tx, x *execution, adv *advanced) error {
	out := adv.out
	if f := out.Finished; f != nil {
		status := store.CommandCompleted
		switch {
		case f.OK:
		case f.Class == engine.ClassExpired:
			status = store.CommandExpired
		default:
			status = store.CommandFailed
		}
		if _, err := store.SetCommandStatus(ctx, tx, f.CommandID, status); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	if len(out.Writes) > 0 {
		rs := make([]store.StepResult, len(out.Writes))
		for i, w := range out.Writes {
			rs[i] = store.StepResult{StepResultKey: storeKey(w.Key), Result: w.Value}
		}
		if err := store.PutStepResults(ctx, tx, x.row.ExecutionID, rs); err != nil {
			return err
		}
	}
	if len(out.Commands) > 0 {
		cmds := make([]store.Command, len(out.Commands))
		for i, c := range out.Commands {
			cmds[i] = store.Command{
				CommandID: c.ID, ExecutionID: x.row.ExecutionID, IssuedEventID: c.IssuedEventID, Step: c.Step,
				ToolKind: c.ToolKind, Status: store.CommandPending, Attempt: c.Attempt, MaxAttempts: c.MaxAttempts,
				TimeoutSeconds: c.Timeout, AvailableAt: c.AvailableAt, Context: c.Payload, Meta: c.Meta,
			}
		}
		if err := store.InsertCommands(ctx, tx, cmds); err != nil {
			return err
		}
	}
	for _, r := range out.Retries {
		if _, err := store.RetryCommand(ctx, tx, r.CommandID, r.Attempt, r.AvailableAt); err != nil {
			return err
		}
	}
	for _, id := range out.Cancelled {
		if _, err := store.SetCommandStatus(ctx, tx, id, store.CommandCancelled); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	if s.cfg.Publisher == nil {
		return nil
	}
	var msgs []store.OutboxMessage
	for _, c := range out.Commands {
		msgs = append(msgs, s.notification(x, c.ID, c.IssuedEventID, c.Step, c.Attempt))
	}
	for _, r := range out.Retries {
		// R-L7: retry notifications are published at commit; an early claim is
		// answered 429 and the worker waits.
		if c := adv.snap.Commands[r.CommandID]; c != nil {
			msgs = append(msgs, s.notification(x, r.CommandID, c.EventID, c.Step, r.Attempt))
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	ids, err := store.InsertOutbox(ctx, tx, msgs)
	if err != nil {
		return err
	}
	for i := range msgs {
		msgs[i].OutboxID = ids[i]
	}
	adv.outbox = msgs
	return nil
}

// body is the NATS notification (events.md §5; NoETL's integers, R-I2).
type body struct {
	ExecutionID   int64  `json:"execution_id"`
	EventID       int64  `json:"event_id"`
	CommandID     string `json:"command_id"`
	Step          string `json:"step"`
	ServerURL     string `json:"server_url"`
	ExecutionPool string `json:"execution_pool"`
}

func (s *Service) notification(x *execution, commandID string, issuedEventID int64, step string, attempt int) store.OutboxMessage {
	pool := x.row.Pool
	if pool == "" {
		pool = notify.PoolFor("", x.row.Path)
	}
	payload, _ := json.Marshal(body{ExecutionID: x.row.ExecutionID, EventID: issuedEventID, CommandID: commandID,
		Step: step, ServerURL: s.server, ExecutionPool: pool})
	return store.OutboxMessage{
		ExecutionID: x.row.ExecutionID, EventID: issuedEventID, Subject: notify.Subject(pool, x.row.ExecutionID),
		MsgID: notify.MsgID(commandID, attempt), Payload: payload,
	}
}

// loadResults fetches stored values the engine asked for (R-S2).
func (s *Service) loadResults(ctx context.Context, q store.Querier, executionID int64, keys []engine.ResultKey, into map[engine.ResultKey]any) error {
	stored := keys[:0:0]
	for _, k := range keys {
		if k.Kind != engine.KindReference {
			stored = append(stored, k)
			continue
		}
		v, err := s.readReference(ctx, k.URI)
		if err != nil {
			return fmt.Errorf("execution %d: %w", executionID, err)
		}
		into[k] = v
	}
	keys = stored
	sk := make([]store.StepResultKey, len(keys))
	for i, k := range keys {
		sk[i] = storeKey(k)
	}
	got, err := store.GetStepResults(ctx, q, executionID, sk)
	if err != nil {
		return err
	}
	for i, k := range keys {
		v, ok := got[sk[i]]
		if !ok {
			return fmt.Errorf("execution %d: stored %s is missing", executionID, k)
		}
		into[k] = v
	}
	return nil
}

// readReference reads a result a worker stored by reference (worker.md §1).
// It runs under the execution's row lock, only when a decision needs the value;
// a failure aborts the ingest (the worker re-posts, or the lease expires and
// the command is retried), so nothing is decided on a missing result.
func (s *Service) readReference(ctx context.Context, uri string) (any, error) {
	if s.cfg.Results == nil {
		return nil, fmt.Errorf("the result at %s was stored by reference, but this server has no result store (set NOETL_RESULT_STORE)", uri)
	}
	b, err := s.cfg.Results.Get(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("read the result stored by reference at %s: %w", uri, err)
	}
	v, err := jsonx.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("the result stored at %s is not JSON: %w", uri, err)
	}
	return v, nil
}

func storeKey(k engine.ResultKey) store.StepResultKey {
	kind := store.KindResult
	if k.Kind == engine.KindLoopItem {
		kind = store.KindItem
	}
	return store.StepResultKey{Kind: kind, Step: k.Step, Visit: k.Visit, Index: k.Index}
}

// inTx runs fn in a transaction on a shard; fn's outbox rows are published after
// commit.
func (s *Service) inTx(ctx context.Context, sh *store.Shard, fn func(tx pgx.Tx) ([]store.OutboxMessage, error)) error {
	tx, err := sh.Pool().Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin on shard %d: %w", sh.Index(), err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after commit
	outbox, err := fn(tx)
	if err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit on shard %d: %w", sh.Index(), err)
	}
	s.publish(ctx, sh, outbox)
	return nil
}

// publish sends committed notifications and marks them published. A failure only
// leaves rows PENDING for the drain (R-A6): Postgres is the truth, NATS a doorbell.
func (s *Service) publish(ctx context.Context, sh *store.Shard, msgs []store.OutboxMessage) {
	if s.cfg.Publisher == nil || len(msgs) == 0 {
		return
	}
	var done []int64
	for _, m := range msgs {
		if err := s.cfg.Publisher.Publish(ctx, m.Subject, m.MsgID, m.Payload); err != nil {
			s.log.WarnContext(ctx, "publish after commit failed; the outbox drain will retry",
				"execution_id", m.ExecutionID, "msg_id", m.MsgID, "error", err.Error())
			continue
		}
		done = append(done, m.OutboxID)
	}
	if len(done) == 0 {
		return
	}
	if _, err := store.MarkOutboxPublished(ctx, sh.Pool(), done); err != nil {
		s.log.WarnContext(ctx, "mark outbox published failed; rows will be re-published (de-duplicated by JetStream)", "error", err.Error())
	}
}

// dbNow is the database clock, the one leases are written with.
func dbNow(ctx context.Context, q store.Querier) (time.Time, error) {
	var t time.Time
	err := q.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t)
	return t, err
}

func toEngine(e store.Event) engine.Event {
	ev := engine.Event{Seq: e.Seq, ID: e.EventID, Type: e.EventType, Step: e.NodeName, NodeType: e.NodeType,
		Status: e.Status, Context: e.Context, Meta: e.Meta, Error: e.Error, WorkerID: e.WorkerID,
		CommandID: e.CommandID, Time: e.CreatedAt}
	if e.Result != nil {
		ev.Result = e.Result
	}
	return ev
}

func toStore(executionID int64, e engine.Event) store.Event {
	out := store.Event{ExecutionID: executionID, Seq: e.Seq, EventID: e.ID, EventType: e.Type, NodeName: e.Step,
		NodeType: e.NodeType, Status: e.Status, Context: e.Context, Meta: e.Meta, Error: e.Error,
		WorkerID: e.WorkerID, CommandID: e.CommandID, CreatedAt: e.Time}
	if m, ok := e.Result.(map[string]any); ok {
		out.Result = m
	}
	return out
}
