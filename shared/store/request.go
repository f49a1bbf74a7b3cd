package store

import (
	"context"
	"fmt"
	"time"
)

// RequestKey names an event request by its execution and Idempotency-Key.
type RequestKey struct {
	ExecutionID int64
	Key         string
}

// EventRequest is the first answer an Idempotency-Key got (table event_request).
type EventRequest struct {
	RequestKey
	// Hash identifies the request's body: the same key on another body is refused.
	Hash   string
	Answer []byte // JSON, the caller's own encoding
}

// RequestRetention is how long an Idempotency-Key is remembered.
const RequestRetention = 24 * time.Hour

func insertRequestsStmt(rs []EventRequest) (string, []any) {
	execs, keys, hashes, answers := make([]int64, len(rs)), make([]string, len(rs)), make([]string, len(rs)), make([]string, len(rs))
	for i, r := range rs {
		execs[i], keys[i], hashes[i], answers[i] = r.ExecutionID, r.Key, r.Hash, string(r.Answer)
	}
	return `INSERT INTO event_request (execution_id, idempotency_key, request_hash, answer)
		SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::jsonb[])`, []any{execs, keys, hashes, answers}
}

// DeleteOldRequests deletes up to limit event requests older than olderThan,
// returning how many went.
func DeleteOldRequests(ctx context.Context, q Querier, olderThan time.Duration, limit int) (int64, error) {
	tag, err := q.Exec(ctx, `
		DELETE FROM event_request WHERE (execution_id, idempotency_key) IN (
			SELECT execution_id, idempotency_key FROM event_request
			WHERE created_at < now() - $1::interval LIMIT $2)`, olderThan, limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete old event requests: %w", err)
	}
	return tag.RowsAffected(), nil
}
