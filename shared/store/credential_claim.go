package store

import (
	"context"
	"fmt"

	"github.com/noetl-go/noetl/shared/lifecycle"
)

// The keychain's question to an execution's shard: is a command of it held
// right now, and by whom (issue 33: credential data only to the holder of a
// live claim whose step names the credential). A read of the command table
// kept apart from the command lifecycle's own statements (command.go): it
// writes nothing, and its notion of live is lifecycle.Live (held by a
// worker under a lease that has not run out).

// ClaimAsk is the claim a reader of a credential's data presents; each
// field may be empty (NoETL's Rust worker sends none of them).
type ClaimAsk struct {
	CommandID string
	WorkerID  string
	Attempt   int
}

// ClaimHeld is one live claim: a command held under an unexpired lease.
type ClaimHeld struct {
	CommandID string
	Step      string
	WorkerID  string
	Attempt   int
	// Context is the command's payload (its tool config names credentials).
	Context map[string]any
}

// ClaimsOf is an execution as the keychain sees it: its playbook path, pool
// and status, and its live claims.
type ClaimsOf struct {
	Path, Pool, Status string
	Claims             []ClaimHeld
}

// LiveClaims reads the execution executionID (ErrNotFound when unknown) and
// its live claims, of the one command commandID when it is not empty.
func LiveClaims(ctx context.Context, q Querier, executionID int64, commandID string) (ClaimsOf, error) {
	var out ClaimsOf
	// lifecycle.LiveSQL spells its statuses as literals, so the planner uses
	// the partial index of an execution's active commands; one command by
	// its key when named.
	which, args := "", []any{executionID}
	if commandID != "" {
		which, args = " AND command_id = $2", append(args, commandID)
	}
	rows, err := q.Query(ctx, `SELECT e.path, e.pool, e.status, c.command_id, c.step, c.worker_id, c.attempt, c.context
		FROM execution e LEFT JOIN LATERAL (SELECT command_id, step, worker_id, attempt, context FROM command
			WHERE execution_id = e.execution_id AND `+lifecycle.LiveSQL+which+`) c ON true
		WHERE e.execution_id = $1 ORDER BY c.command_id`, args...)
	if err != nil {
		return out, fmt.Errorf("store: live claims of execution %d: %w", executionID, err)
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		found = true
		var (
			cid, step, worker *string
			attempt           *int
			ctxJSON           []byte
		)
		if err := rows.Scan(&out.Path, &out.Pool, &out.Status, &cid, &step, &worker, &attempt, &ctxJSON); err != nil {
			return out, fmt.Errorf("store: live claims of execution %d: %w", executionID, err)
		}
		if cid == nil {
			continue
		}
		c := ClaimHeld{CommandID: *cid, Step: derefString(step), WorkerID: derefString(worker), Attempt: *attempt}
		if c.Context, err = decodeObject(ctxJSON, "command.context"); err != nil {
			return out, err
		}
		out.Claims = append(out.Claims, c)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("store: live claims of execution %d: %w", executionID, err)
	}
	if !found {
		return out, fmt.Errorf("store: execution %d: %w", executionID, ErrNotFound)
	}
	return out, nil
}
