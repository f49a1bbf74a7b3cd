package store

import (
	"fmt"
	"time"
)

// Assumption is what a transaction takes as read without reading it: the
// state its process committed last (the executions at their seqs, the
// commands as it wrote them), no staged event, no client id seen, and a
// clock no earlier than the executions' last writes. Assume queues the
// guards that check it under the executions' locks, to travel with the
// writes and COMMIT in one round trip: if any part does not hold — another
// writer moved an execution or a command, a worker re-posted, events were
// staged — a guard fails with an error, the transaction does not commit, and
// the caller takes the locked path (LockSet) instead.
type Assumption struct {
	Executions []int64 // in id order
	Seqs       []int64 // each execution's last_seq
	Commands   []Command
	// ClientEvents are the client ids the writes carry.
	ClientEvents []ClientEventKey
	// Now is the clock the transaction's events are stamped with.
	Now time.Time
}

// Assume queues a's guards (see Assumption) after BEGIN. A command given
// with its payload (Context not nil: a claim hands it out from the cache) is
// also checked to hold that payload still.
func (t *Tx) Assume(a Assumption) error {
	n := len(a.Commands)
	ids, statuses, workers, attempts := make([]string, n), make([]string, n), make([]string, n), make([]int32, n)
	contexts, metas := make([]*string, n), make([]*string, n)
	for i, c := range a.Commands {
		ids[i], statuses[i], workers[i], attempts[i] = c.CommandID, c.Status, c.WorkerID, int32(c.Attempt)
		if c.Context == nil {
			continue
		}
		var err error
		if contexts[i], err = objectJSONText(c.Context); err == nil {
			metas[i], err = objectJSONText(c.Meta)
		}
		if err != nil {
			return fmt.Errorf("store: assume command %s: %w", c.CommandID, err)
		}
	}
	// Locks in id order (R-L5), each row only if still at its seq and not
	// written after Now; a count short of all fails the statement. The
	// failing branch divides a count, not a constant, so the planner cannot
	// fold it into an error at plan time.
	t.Queue(`SELECT CASE WHEN count(*) = cardinality($1::bigint[]) THEN 1 ELSE count(*) / 0 END FROM (
			SELECT 1 FROM execution
			WHERE execution_id = ANY($1::bigint[]) AND updated_at <= $3
				AND EXISTS (SELECT 1 FROM unnest($1::bigint[], $2::bigint[]) AS u(id, seq)
					WHERE u.id = execution.execution_id AND u.seq = execution.last_seq)
			ORDER BY execution_id FOR UPDATE) AS locked`, a.Executions, a.Seqs, a.Now)
	clients := make([]string, 0, len(a.ClientEvents))
	for _, k := range a.ClientEvents {
		clients = append(clients, k.ClientID)
	}
	// After the locks (a statement of its own, so it reads what the lock
	// holders before it committed): every writer of a command's status,
	// holder or attempt holds its execution's lock. Nothing in the server
	// writes a payload after the insert; the check sees an edit by hand.
	t.Queue(`SELECT CASE WHEN
			(SELECT count(*) FROM command c
				JOIN unnest($1::text[], $2::text[], $3::text[], $4::int[], $7::text[], $8::text[]) AS u(id, status, worker, attempt, context, meta)
				ON c.command_id = u.id AND c.status = u.status AND coalesce(c.worker_id, '') = u.worker AND c.attempt = u.attempt
					AND (u.context IS NULL OR (c.context = u.context::jsonb AND c.meta = coalesce(u.meta::jsonb, '{}')))
				WHERE c.command_id = ANY($1::text[])) = cardinality($1::text[])
			AND NOT EXISTS (SELECT 1 FROM staged_event WHERE execution_id = ANY($5::bigint[]))
			AND NOT EXISTS (SELECT 1 FROM event WHERE execution_id = ANY($5::bigint[]) AND client_event_id = ANY($6::text[]))
		THEN 1 ELSE (SELECT count(*) FROM command WHERE command_id = ANY($1::text[])) / 0 END`,
		ids, statuses, workers, attempts, a.Executions, clients, contexts, metas)
	return nil
}
