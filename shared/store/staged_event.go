package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/noetl-go/noetl/shared/lifecycle"
)

// A worker event that decides nothing — a command.started, a call.done, the
// copy of a server-owned event NoETL's workers post — needs no decision
// under the execution's lock when it arrives: it is staged (StageEvents), one
// statement that commits on its own, and the execution's next transaction
// enters it into the log (LockSet.Staged): its seq, its fencing against the
// command as it then is, its fold. So NoETL's workers' command.started and
// call.done cost no locked transaction (docs/step-path.md).

// Stage is what StageEvents writes: events of one execution, and the first
// answer of the request's Idempotency-Key, if it has one.
type Stage struct {
	ExecutionID int64
	// Events have EventID set (CreatedAt is the database's clock).
	Events []Event
	// Raw marks the events whose result is a NoETL worker's tool output still
	// to fit (Event.RawOutput), kept for the fold.
	Raw []bool
	// Holds are the commands the events report on, each with the worker and
	// attempt (0: any) that must hold it (lifecycle.HeldBy).
	Holds []Hold
	// Request, when set, is stored with the events.
	Request *EventRequest
}

// Hold is a command its holder reports on.
type Hold struct {
	CommandID, WorkerID string
	Attempt             int
}

// StageEvents stores st in one statement, without the execution's lock,
// when nothing about it needs one: the execution has not ended, every
// command in Holds is held by its worker, and neither a client id of the
// events nor the request's key was seen before. It says whether it did; when
// not (or when a concurrent repeat got there first), nothing was written and
// the caller takes the locked path, which answers each of those cases.
func StageEvents(ctx context.Context, q Querier, st Stage) (bool, error) {
	args, err := eventArrays(st.Events)
	if err != nil {
		return false, fmt.Errorf("store: stage events: %w", err)
	}
	cmds, workers, attempts := make([]string, len(st.Holds)), make([]string, len(st.Holds)), make([]int32, len(st.Holds))
	for i, h := range st.Holds {
		cmds[i], workers[i], attempts[i] = h.CommandID, h.WorkerID, int32(h.Attempt)
	}
	var clients []string
	for _, e := range st.Events {
		if e.ClientEventID != "" {
			clients = append(clients, e.ClientEventID)
		}
	}
	raw := make([]bool, len(st.Events))
	copy(raw, st.Raw)
	key, hash, answer := "", "", "{}"
	if r := st.Request; r != nil {
		key, hash, answer = r.Key, r.Hash, string(r.Answer)
	}
	n := len(args)
	args = append(args, st.ExecutionID, cmds, workers, attempts, nonNilStrings(clients), key, hash, answer, raw)
	p := func(i int) string { return fmt.Sprintf("$%d", n+i) }
	var staged bool
	err = q.QueryRow(ctx, `
		WITH ok AS (
			SELECT 1 FROM execution WHERE execution_id = `+p(1)+`
				AND status NOT IN ('`+lifecycle.ExecutionCompleted+`', '`+lifecycle.ExecutionFailed+`', '`+lifecycle.ExecutionCancelled+`')
				AND NOT EXISTS (SELECT 1 FROM unnest(`+p(2)+`::text[], `+p(3)+`::text[], `+p(4)+`::int[]) AS h(cmd, wkr, att)
					WHERE NOT EXISTS (SELECT 1 FROM command WHERE command_id = h.cmd AND execution_id = `+p(1)+`
						AND `+lifecycle.HeldBySQL("h.wkr", "h.att")+`))
				AND NOT EXISTS (SELECT 1 FROM event WHERE execution_id = `+p(1)+` AND client_event_id = ANY(`+p(5)+`))
				AND NOT EXISTS (SELECT 1 FROM staged_event WHERE execution_id = `+p(1)+` AND client_event_id = ANY(`+p(5)+`))
				AND NOT EXISTS (SELECT 1 FROM event_request WHERE execution_id = `+p(1)+` AND idempotency_key = `+p(6)+`)
		), staged AS (
			INSERT INTO staged_event (execution_id, event_id, event_type, node_name, node_type, status, context, meta,
				result, error, worker_id, command_id, parent_event_id, client_event_id, ignored, raw_output, created_at)
			SELECT execution_id, event_id, event_type, node_name, node_type, status, context::jsonb, meta::jsonb,
				result::jsonb, error, worker_id, command_id, parent_event_id, client_event_id, ignored, (`+p(9)+`::boolean[])[ord],
				clock_timestamp()
			FROM `+eventsUnnest+`
			WHERE EXISTS (SELECT 1 FROM ok) ORDER BY ord
			RETURNING 1
		), request AS (
			INSERT INTO event_request (execution_id, idempotency_key, request_hash, answer)
			SELECT `+p(1)+`, `+p(6)+`, `+p(7)+`, `+p(8)+`::jsonb WHERE `+p(6)+` <> '' AND EXISTS (SELECT 1 FROM ok)
			RETURNING 1
		)
		SELECT EXISTS (SELECT 1 FROM ok) AND (SELECT count(*) FROM staged) = `+fmt.Sprint(len(st.Events)), args...).Scan(&staged)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return false, nil // a concurrent repeat of a client id or key: the locked path answers it
	}
	if err != nil {
		return false, fmt.Errorf("store: stage events of execution %d: %w", st.ExecutionID, err)
	}
	return staged, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// StagedEvent is a staged event read back by the transaction that enters it
// into the log, with the command it reports on as it is under the
// execution's lock (nil: none, or no such command).
type StagedEvent struct {
	Event
	Raw     bool
	Command *Command
}

// stagedSQL deletes the staged events of the executions a LockSet locks and
// returns them; $1 and $2 are the lock's executions and issued event ids.
const stagedSQL = `staged AS (
		DELETE FROM staged_event WHERE execution_id = ANY($1::bigint[] ||
			ARRAY(SELECT execution_id FROM command WHERE issued_event_id = ANY($2::bigint[])))
		RETURNING *)`

// stagedJSON is stagedSQL's events, oldest first, each with its command's
// state (no payload), as one JSON array: they ride with the statement that
// reads the clock, after the locks, and need no statement of their own.
const stagedJSON = `(SELECT coalesce(json_agg(json_build_object('execution_id', s.execution_id, 'event_id', s.event_id,
		'event_type', s.event_type, 'node_name', s.node_name, 'node_type', s.node_type, 'status', s.status, 'context', s.context,
		'meta', s.meta, 'result', s.result, 'error', s.error, 'worker_id', s.worker_id, 'command_id', s.command_id,
		'parent_event_id', s.parent_event_id, 'client_event_id', s.client_event_id, 'ignored', s.ignored,
		'raw_output', s.raw_output, 'created_at', s.created_at,
		'command', (SELECT json_build_object('command_id', c.command_id, 'execution_id', c.execution_id,
			'issued_event_id', c.issued_event_id, 'step', c.step, 'tool_kind', c.tool_kind, 'status', c.status,
			'attempt', c.attempt, 'max_attempts', c.max_attempts, 'worker_id', c.worker_id,
			'lease_expires_at', c.lease_expires_at, 'deadline_at', c.deadline_at, 'timeout_seconds', c.timeout_seconds,
			'available_at', c.available_at, 'announced_at', c.announced_at, 'created_at', c.created_at,
			'updated_at', c.updated_at) FROM command c WHERE c.command_id = s.command_id AND c.execution_id = s.execution_id))
		ORDER BY s.arrival), '[]') FROM staged s)`

// stagedRow is one element of stagedJSON.
type stagedRow struct {
	ExecutionID   int64           `json:"execution_id"`
	EventID       int64           `json:"event_id"`
	EventType     string          `json:"event_type"`
	NodeName      *string         `json:"node_name"`
	NodeType      *string         `json:"node_type"`
	Status        *string         `json:"status"`
	Context       json.RawMessage `json:"context"`
	Meta          json.RawMessage `json:"meta"`
	Result        json.RawMessage `json:"result"`
	Error         *string         `json:"error"`
	WorkerID      *string         `json:"worker_id"`
	CommandID     *string         `json:"command_id"`
	ParentEventID *int64          `json:"parent_event_id"`
	ClientEventID *string         `json:"client_event_id"`
	Ignored       bool            `json:"ignored"`
	RawOutput     bool            `json:"raw_output"`
	CreatedAt     time.Time       `json:"created_at"`
	Command       *struct {
		CommandID      string     `json:"command_id"`
		ExecutionID    int64      `json:"execution_id"`
		IssuedEventID  int64      `json:"issued_event_id"`
		Step           string     `json:"step"`
		ToolKind       string     `json:"tool_kind"`
		Status         string     `json:"status"`
		Attempt        int        `json:"attempt"`
		MaxAttempts    int        `json:"max_attempts"`
		WorkerID       *string    `json:"worker_id"`
		LeaseExpiresAt *time.Time `json:"lease_expires_at"`
		DeadlineAt     *time.Time `json:"deadline_at"`
		TimeoutSeconds int        `json:"timeout_seconds"`
		AvailableAt    time.Time  `json:"available_at"`
		AnnouncedAt    *time.Time `json:"announced_at"`
		CreatedAt      time.Time  `json:"created_at"`
		UpdatedAt      time.Time  `json:"updated_at"`
	} `json:"command"`
}

// decodeStaged reads stagedJSON's array.
func decodeStaged(b []byte) ([]StagedEvent, error) {
	var rows []stagedRow
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("read staged events: %w", err)
	}
	out := make([]StagedEvent, len(rows))
	for i, r := range rows {
		e := Event{ExecutionID: r.ExecutionID, EventID: r.EventID, EventType: r.EventType, NodeName: derefString(r.NodeName),
			NodeType: derefString(r.NodeType), Status: derefString(r.Status), Error: derefString(r.Error),
			WorkerID: derefString(r.WorkerID), CommandID: derefString(r.CommandID), ParentEventID: derefInt64(r.ParentEventID),
			ClientEventID: derefString(r.ClientEventID), Ignored: r.Ignored, CreatedAt: r.CreatedAt.UTC()}
		var err error
		if e.Context, err = decodeObject(nullJSON(r.Context), "context"); err != nil {
			return nil, err
		}
		if e.Meta, err = decodeObject(nullJSON(r.Meta), "meta"); err != nil {
			return nil, err
		}
		if e.Result, err = decodeObject(nullJSON(r.Result), "result"); err != nil {
			return nil, err
		}
		out[i] = StagedEvent{Event: e, Raw: r.RawOutput}
		if c := r.Command; c != nil {
			out[i].Command = &Command{CommandID: c.CommandID, ExecutionID: c.ExecutionID, IssuedEventID: c.IssuedEventID,
				Step: c.Step, ToolKind: c.ToolKind, Status: c.Status, Attempt: c.Attempt, MaxAttempts: c.MaxAttempts,
				WorkerID: derefString(c.WorkerID), LeaseExpiresAt: derefTime(c.LeaseExpiresAt),
				DeadlineAt: derefTime(c.DeadlineAt), TimeoutSeconds: c.TimeoutSeconds, AvailableAt: c.AvailableAt.UTC(),
				AnnouncedAt: derefTime(c.AnnouncedAt), CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC()}
		}
	}
	return out, nil
}

// nullJSON is a JSON null as no value (decodeObject's NULL column).
func nullJSON(b json.RawMessage) []byte {
	if string(b) == "null" {
		return nil
	}
	return b
}

// StagedExecutions lists up to limit executions with events staged longer
// than olderThan ago: their next transaction has not come (the execution
// ended as they were staged, or its worker went away), so the drain enters
// them into the log.
func StagedExecutions(ctx context.Context, q Querier, olderThan time.Duration, limit int) ([]int64, error) {
	return queryRows(ctx, q, "staged executions", func(r pgx.Row) (int64, error) {
		var id int64
		return id, r.Scan(&id)
	}, `SELECT DISTINCT execution_id FROM staged_event WHERE created_at < clock_timestamp() - $1::interval LIMIT $2`, olderThan, limit)
}
