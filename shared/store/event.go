package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Event is one row of an execution's log.
type Event struct {
	ExecutionID   int64
	Seq           int64 // 1-based, contiguous per execution (R-S4)
	EventID       int64 // from AllocateIDs on the execution's shard
	EventType     string
	NodeName      string // step
	NodeType      string // tool kind on command.issued
	Status        string
	Context       map[string]any
	Meta          map[string]any
	Result        map[string]any
	Error         string
	WorkerID      string
	CommandID     string
	ParentEventID int64  // 0: none
	ClientEventID string // the worker's own id, for idempotent re-posts; "": none
	Ignored       bool   // fenced (R-L8): stored, not folded
	CreatedAt     time.Time
	// RawOutput is not stored: ingest's note that Result's data is a NoETL
	// worker's tool output still to fit to the command's tool (noetlwire.Fit).
	RawOutput bool
}

const eventColumns = `execution_id, seq, event_id, event_type, node_name, node_type, status, context, meta,
	result, error, worker_id, command_id, parent_event_id, client_event_id, ignored, created_at`

// scanEvent reads an event row and says how many bytes of JSON and text its
// values were (context, meta, result, error): what holding
// the event costs, before it is decoded, so a reader can budget by bytes.
func scanEvent(row pgx.Row, ev *Event) (int, error) {
	var (
		nodeName, nodeType, status, errText, workerID, commandID, clientID *string
		ctxJSON, meta, result                                              []byte
		parent                                                             *int64
	)
	if err := row.Scan(&ev.ExecutionID, &ev.Seq, &ev.EventID, &ev.EventType, &nodeName, &nodeType, &status,
		&ctxJSON, &meta, &result, &errText, &workerID, &commandID, &parent, &clientID, &ev.Ignored, &ev.CreatedAt); err != nil {
		return 0, err
	}
	size := len(ctxJSON) + len(meta) + len(result)
	if errText != nil {
		size += len(*errText)
	}
	ev.NodeName, ev.NodeType, ev.Status = derefString(nodeName), derefString(nodeType), derefString(status)
	ev.Error, ev.WorkerID, ev.CommandID = derefString(errText), derefString(workerID), derefString(commandID)
	ev.ClientEventID, ev.ParentEventID = derefString(clientID), derefInt64(parent)
	ev.CreatedAt = ev.CreatedAt.UTC()
	var err error
	if ev.Context, err = decodeObject(ctxJSON, "context"); err != nil {
		return 0, err
	}
	if ev.Meta, err = decodeObject(meta, "meta"); err != nil {
		return 0, err
	}
	ev.Result, err = decodeObject(result, "result")
	return size, err
}

// appendEventsStmt is the one INSERT of events (created_at set).
func appendEventsStmt(events []Event) (string, []any, error) {
	for _, ev := range events {
		if ev.ExecutionID <= 0 || ev.Seq <= 0 || ev.EventID <= 0 || ev.EventType == "" {
			return "", nil, fmt.Errorf("append event %d (seq %d) of execution %d: execution_id, seq, event_id and event_type are required",
				ev.EventID, ev.Seq, ev.ExecutionID)
		}
	}
	args, err := eventArrays(events)
	if err != nil {
		return "", nil, err
	}
	return `
		INSERT INTO event (` + eventColumns + `)
		SELECT execution_id, seq, event_id, event_type, node_name, node_type, status, context::jsonb, meta::jsonb,
			result::jsonb, error, worker_id, command_id, parent_event_id, client_event_id, ignored, created_at
		FROM ` + eventsUnnest, args, nil
}

// eventsUnnest reads the arrays of eventArrays as rows, in order (ord).
const eventsUnnest = `unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[],
			$8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::bigint[], $15::text[],
			$16::boolean[], $17::timestamptz[]) WITH ORDINALITY
			AS t(execution_id, seq, event_id, event_type, node_name, node_type, status, context, meta,
			result, error, worker_id, command_id, parent_event_id, client_event_id, ignored, created_at, ord)`

// eventArrays are events as the 17 arrays eventsUnnest reads, in the order
// of eventColumns.
func eventArrays(events []Event) ([]any, error) {
	n := len(events)
	var (
		execIDs, seqs, eventIDs, parents = make([]int64, n), make([]int64, n), make([]int64, n), make([]*int64, n)
		types                            = make([]string, n)
		nodeNames, nodeTypes, statuses   = make([]*string, n), make([]*string, n), make([]*string, n)
		contexts, metas, results         = make([]*string, n), make([]*string, n), make([]*string, n)
		errs, workers, commands, clients = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		ignored                          = make([]bool, n)
		created                          = make([]time.Time, n)
	)
	for i, ev := range events {
		var err error
		execIDs[i], seqs[i], eventIDs[i], parents[i] = ev.ExecutionID, ev.Seq, ev.EventID, nullInt64(ev.ParentEventID)
		types[i], nodeNames[i], nodeTypes[i], statuses[i] = ev.EventType, nullString(ev.NodeName), nullString(ev.NodeType), nullString(ev.Status)
		if contexts[i], err = objectJSONText(ev.Context); err == nil {
			if metas[i], err = objectJSONText(ev.Meta); err == nil {
				results[i], err = objectJSONText(ev.Result)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("event %d of execution %d: %w", ev.EventID, ev.ExecutionID, err)
		}
		errs[i], workers[i], commands[i], clients[i] = nullString(ev.Error), nullString(ev.WorkerID), nullString(ev.CommandID), nullString(ev.ClientEventID)
		ignored[i], created[i] = ev.Ignored, ev.CreatedAt
	}
	return []any{execIDs, seqs, eventIDs, types, nodeNames, nodeTypes, statuses, contexts, metas, results,
		errs, workers, commands, parents, clients, ignored, created}, nil
}

// EventFilter selects events of one execution in seq order.
type EventFilter struct {
	ExecutionID int64
	AfterSeq    int64     // events with seq > AfterSeq
	UntilSeq    int64     // 0, or events with seq <= UntilSeq
	Before      time.Time // zero, or events with created_at <= Before (a seq prefix, R-S4)
	EventType   string    // "": all types
	Step        string    // "": all steps (node_name)
	Limit       int       // ListEvents: 1..1000, 0 means 100; StreamEvents: 0 means all
	Desc        bool      // newest first: the page ends at UntilSeq (or the last event), not after AfterSeq
	// MaxBytes, when positive, ends a ListEventPage page before the event
	// that would take its values (context, meta, result, error) past this
	// many bytes, holding one event at least: a command.issued carries its
	// whole command, so a page of many is bounded by bytes, not count.
	MaxBytes int
}

func (f EventFilter) query(limit int) (string, []any) {
	args := []any{f.ExecutionID, f.AfterSeq}
	where := []string{"execution_id = $1", "seq > $2"}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	if f.UntilSeq > 0 {
		where = append(where, "seq <= "+arg(f.UntilSeq))
	}
	if !f.Before.IsZero() {
		where = append(where, "created_at <= "+arg(f.Before))
	}
	if f.EventType != "" {
		where = append(where, "event_type = "+arg(f.EventType))
	}
	if f.Step != "" {
		where = append(where, "node_name = "+arg(f.Step))
	}
	sql := `SELECT ` + eventColumns + ` FROM event WHERE ` + strings.Join(where, " AND ") + ` ORDER BY seq`
	if f.Desc {
		sql += " DESC"
	}
	if limit > 0 {
		sql += " LIMIT " + arg(limit)
	}
	return sql, args
}

// ListEvents returns a page of an execution's events in seq order (newest
// first with Desc); the next page starts after the last returned seq (before
// it with Desc).
func ListEvents(ctx context.Context, q Querier, f EventFilter) ([]Event, error) {
	out, _, err := ListEventPage(ctx, q, f)
	return out, err
}

// ListEventPage is ListEvents that also says whether f.MaxBytes ended the
// page early: then more events may follow the last one returned, though
// fewer than f.Limit were. Rows past the budget are never read.
func ListEventPage(ctx context.Context, q Querier, f EventFilter) ([]Event, bool, error) {
	limit, err := pageLimit(f.Limit)
	if err != nil {
		return nil, false, fmt.Errorf("store: list events of execution %d: %w", f.ExecutionID, err)
	}
	sql, args := f.query(limit)
	var (
		out  = []Event{}
		size int
		full bool
	)
	err = streamEvents(ctx, q, fmt.Sprintf("events of execution %d", f.ExecutionID), sql, args, func(ev *Event, n int) error {
		if f.MaxBytes > 0 && len(out) > 0 && size+n > f.MaxBytes {
			full = true
			return errPageFull
		}
		size += n
		out = append(out, *ev)
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, false, fmt.Errorf("store: list events of execution %d: %w", f.ExecutionID, err)
	}
	return out, full, nil
}

// errPageFull stops a ListEventPage read at its byte budget.
var errPageFull = errors.New("store: the page is full")

// StreamEvents calls fn for each matching event in seq order as rows arrive, holding
// one row at a time (replay folds logs of any length in O(projection) memory, R-X4).
// The *Event is reused between calls: copy what you keep. An error from fn stops the
// stream and is returned as is.
func StreamEvents(ctx context.Context, q Querier, f EventFilter, fn func(*Event) error) error {
	if f.Limit < 0 {
		return fmt.Errorf("store: stream events of execution %d: negative limit", f.ExecutionID)
	}
	sql, args := f.query(f.Limit)
	return streamEvents(ctx, q, fmt.Sprintf("events of execution %d", f.ExecutionID), sql, args,
		func(ev *Event, _ int) error { return fn(ev) })
}

// streamEvents runs a query of events and calls fn for each row as it
// arrives, reusing one Event, with the row's size (scanEvent); what names
// the events in errors.
func streamEvents(ctx context.Context, q Querier, what, sql string, args []any, fn func(*Event, int) error) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("store: stream %s: %w", what, err)
	}
	defer rows.Close()
	var ev Event
	for rows.Next() {
		ev = Event{}
		size, err := scanEvent(rows, &ev)
		if err != nil {
			return fmt.Errorf("store: stream %s: %w", what, err)
		}
		if err := fn(&ev, size); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: stream %s: %w", what, err)
	}
	return nil
}

// StreamLogs calls fn for each event of the given executions (of one
// shard), in execution id order and seq order within each: one round trip
// for many logs (the what-if reads its recorded executions in chunks), with
// each event's size (the bytes of its values, as scanEvent counts them)
// so the reader can stop at a budget. The *Event is reused between calls:
// copy what you keep.
func StreamLogs(ctx context.Context, q Querier, executionIDs []int64, fn func(*Event, int) error) error {
	return streamEvents(ctx, q, fmt.Sprintf("the logs of %d executions", len(executionIDs)),
		`SELECT `+eventColumns+` FROM event WHERE execution_id = ANY($1) ORDER BY execution_id, seq`, []any{executionIDs}, fn)
}

// EventSeq is the seq of an execution's event with the given event_id;
// ErrNotFound when the execution has no such event.
func EventSeq(ctx context.Context, q Querier, executionID, eventID int64) (int64, error) {
	return eventInt(ctx, q, executionID, eventID, `SELECT seq FROM event WHERE event_id = $1 AND execution_id = $2`)
}

// eventInt reads one number of an execution's event, which the statement
// selects by $1 (the event's id, or its seq: at names it) and $2 (the
// execution); ErrNotFound when there is no such event.
func eventInt(ctx context.Context, q Querier, executionID, at int64, sql string) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, sql, at, executionID).Scan(&n)
	return found(n, err, "event %d of execution %d", at, executionID)
}

// StartMark is an event that starts something an end event's duration is
// measured from: a step.enter (its step and visit), a command.claimed or a
// command.started (its command).
type StartMark struct {
	Seq       int64
	EventType string
	Step      string
	Visit     string // context.visit as text
	CommandID string
	CreatedAt time.Time
}

// StartMarks lists an execution's start events with seq in (afterSeq,
// untilSeq], in seq order, reading a few columns of each.
func StartMarks(ctx context.Context, q Querier, executionID, afterSeq, untilSeq int64) ([]StartMark, error) {
	rows, err := q.Query(ctx, `
		SELECT seq, event_type, coalesce(node_name, ''), coalesce(context->>'visit', ''),
		       coalesce(command_id, meta->>'command_id', ''), created_at
		FROM event WHERE execution_id = $1 AND seq > $2 AND seq <= $3
		  AND event_type IN ('step.enter', 'command.claimed', 'command.started')
		ORDER BY seq`, executionID, afterSeq, untilSeq)
	if err != nil {
		return nil, fmt.Errorf("store: start events of execution %d: %w", executionID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StartMark, error) {
		var m StartMark
		err := r.Scan(&m.Seq, &m.EventType, &m.Step, &m.Visit, &m.CommandID, &m.CreatedAt)
		m.CreatedAt = m.CreatedAt.UTC()
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: start events of execution %d: %w", executionID, err)
	}
	return out, nil
}

// EventIDAt is the id of an execution's event at seq, ErrNotFound when the
// log has none there: after a COMMIT whose answer was lost, whether the
// transaction's last event is there says whether it committed.
func EventIDAt(ctx context.Context, q Querier, executionID, seq int64) (int64, error) {
	return eventInt(ctx, q, executionID, seq, `SELECT event_id FROM event WHERE seq = $1 AND execution_id = $2`)
}
