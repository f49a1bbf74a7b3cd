package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Outbox statuses (R-A6). FAILED exists for NoETL compatibility; command
// notifications never end there: a failed publish goes back to PENDING.
const (
	OutboxPending   = "PENDING"
	OutboxInFlight  = "IN_FLIGHT"
	OutboxPublished = "PUBLISHED"
	OutboxFailed    = "FAILED"
)

// Outbox timings of R-A6.
const (
	// OutboxMinAge: the drain leaves rows this young to the post-commit publisher.
	OutboxMinAge = 5 * time.Second
	// OutboxInFlightTimeout: an IN_FLIGHT row locked longer ago was abandoned by a
	// publisher that died; the drain takes it over.
	OutboxInFlightTimeout = 60 * time.Second
	// OutboxRetention: PUBLISHED rows older than this are deleted.
	OutboxRetention = 24 * time.Hour
	// OutboxMaxBatch is the largest claim.
	OutboxMaxBatch = 1000
)

// OutboxMessage is one notification to publish.
type OutboxMessage struct {
	OutboxID    int64 // composed id with the shard bits (next_id())
	ExecutionID int64
	EventID     int64 // the command.issued (or command.retry) event it announces
	Subject     string
	MsgID       string // Nats-Msg-Id for JetStream de-duplication
	Payload     json.RawMessage
	Status      string
	Attempts    int
	AvailableAt time.Time
	LockedAt    time.Time
	PublishedAt time.Time
	LastError   string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

const outboxColumns = `outbox_id, execution_id, event_id, subject, msg_id, payload, status, attempts,
	available_at, locked_at, published_at, last_error, created_at, updated_at`

func scanOutbox(row pgx.CollectableRow) (OutboxMessage, error) {
	var (
		m                 OutboxMessage
		payload           []byte
		locked, published *time.Time
		lastErr           *string
	)
	err := row.Scan(&m.OutboxID, &m.ExecutionID, &m.EventID, &m.Subject, &m.MsgID, &payload, &m.Status,
		&m.Attempts, &m.AvailableAt, &locked, &published, &lastErr, &m.CreatedAt, &m.UpdatedAt)
	m.Payload = json.RawMessage(payload)
	m.LockedAt, m.PublishedAt, m.LastError = derefTime(locked), derefTime(published), derefString(lastErr)
	m.AvailableAt, m.CreatedAt, m.UpdatedAt = m.AvailableAt.UTC(), m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	return m, err
}

func insertOutboxStmt(msgs []OutboxMessage) (string, []any, error) {
	n := len(msgs)
	outboxIDs, execIDs, eventIDs := make([]int64, n), make([]int64, n), make([]int64, n)
	subjects, msgIDs, payloads := make([]string, n), make([]string, n), make([]string, n)
	available := make([]*time.Time, n)
	for i, m := range msgs {
		if m.ExecutionID <= 0 || m.Subject == "" || m.MsgID == "" || len(m.Payload) == 0 {
			return "", nil, fmt.Errorf("insert outbox row for event %d: execution_id, subject, msg_id and payload are required", m.EventID)
		}
		outboxIDs[i], execIDs[i], eventIDs[i], subjects[i], msgIDs[i], payloads[i] = m.OutboxID, m.ExecutionID, m.EventID, m.Subject, m.MsgID, string(m.Payload)
		available[i] = nullTime(m.AvailableAt)
	}
	return `
		INSERT INTO outbox (outbox_id, execution_id, event_id, subject, msg_id, payload, available_at)
		SELECT coalesce(nullif(outbox_id, 0), next_id()), execution_id, event_id, subject, msg_id, payload::jsonb,
			coalesce(available_at, now())
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::timestamptz[])
			WITH ORDINALITY AS t(outbox_id, execution_id, event_id, subject, msg_id, payload, available_at, ord)
		ORDER BY ord`, []any{outboxIDs, execIDs, eventIDs, subjects, msgIDs, payloads, available}, nil
}

// ClaimOutbox is the drain's claim (R-A6): up to limit (1..1000) rows that are PENDING
// with available_at <= now() and older than OutboxMinAge, or IN_FLIGHT and locked more
// than OutboxInFlightTimeout ago, become IN_FLIGHT with locked_at = now(). Concurrent
// drains get disjoint rows (FOR UPDATE SKIP LOCKED). No ORDER BY: it would walk the
// primary key past a day of PUBLISHED rows instead of OR-ing the two partial indexes;
// every claimable row is taken within a few runs anyway.
func ClaimOutbox(ctx context.Context, q Querier, limit int) ([]OutboxMessage, error) {
	return claimOutbox(ctx, q, limit, OutboxMinAge, OutboxInFlightTimeout)
}

// ClaimOutboxForPublisher is POST /api/internal/outbox/claim's claim for an
// outside publisher (NoETL's system/outbox_publisher playbook): ClaimOutbox's
// rows, with attempts + 1 on each, as NoETL counts a publish attempt at claim.
// Such a publisher reports a failure with MarkOutboxFailedAfter, which leaves
// attempts alone.
func ClaimOutboxForPublisher(ctx context.Context, q Querier, limit int) ([]OutboxMessage, error) {
	return claimOutboxBump(ctx, q, limit, OutboxMinAge, OutboxInFlightTimeout, true)
}

func claimOutbox(ctx context.Context, q Querier, limit int, minAge, inFlightTimeout time.Duration) ([]OutboxMessage, error) {
	return claimOutboxBump(ctx, q, limit, minAge, inFlightTimeout, false)
}

func claimOutboxBump(ctx context.Context, q Querier, limit int, minAge, inFlightTimeout time.Duration, bump bool) ([]OutboxMessage, error) {
	if limit < 1 || limit > OutboxMaxBatch {
		return nil, fmt.Errorf("store: claim outbox: limit %d outside 1..%d", limit, OutboxMaxBatch)
	}
	rows, err := q.Query(ctx, `
		WITH picked AS (
			SELECT outbox_id FROM outbox
			WHERE (status = 'PENDING' AND available_at <= now() AND created_at < now() - $2::interval)
			   OR (status = 'IN_FLIGHT' AND locked_at < now() - $3::interval)
			LIMIT $1
			FOR UPDATE SKIP LOCKED
		)
		UPDATE outbox o SET status = 'IN_FLIGHT', locked_at = now(), updated_at = now(),
			attempts = o.attempts + CASE WHEN $4 THEN 1 ELSE 0 END
		FROM picked WHERE o.outbox_id = picked.outbox_id
		RETURNING `+prefixed("o.", outboxColumns), limit, minAge, inFlightTimeout, bump)
	if err != nil {
		return nil, fmt.Errorf("store: claim outbox: %w", err)
	}
	msgs, err := pgx.CollectRows(rows, scanOutbox)
	if err != nil {
		return nil, fmt.Errorf("store: claim outbox: %w", err)
	}
	return msgs, nil
}

// MarkOutboxPublished marks rows PUBLISHED, only those still PENDING or IN_FLIGHT (a
// post-commit publisher and a drain may both publish one row; JetStream drops the
// duplicate). It returns the number of rows changed.
func MarkOutboxPublished(ctx context.Context, q Querier, outboxIDs []int64) (int64, error) {
	if len(outboxIDs) == 0 {
		return 0, nil
	}
	tag, err := q.Exec(ctx, `
		UPDATE outbox SET status = 'PUBLISHED', published_at = now(), locked_at = NULL, updated_at = now()
		WHERE outbox_id = ANY($1) AND status IN ('PENDING', 'IN_FLIGHT')`, outboxIDs)
	if err != nil {
		return 0, fmt.Errorf("store: mark %d outbox rows published: %w", len(outboxIDs), err)
	}
	return tag.RowsAffected(), nil
}

// outboxBackoff is the rule for a failed publish's delay, in seconds, as SQL:
// after the n-th failure, min(cap, 2^min(8, n-1)); a cap <= 0 means none below
// 256 s. Both marks below use it, so the rule is written once.
func outboxBackoff(n, capSeconds string) string {
	return `least(CASE WHEN ` + capSeconds + ` > 0 THEN ` + capSeconds + ` ELSE 256 END, ` +
		`power(2, least(8, greatest(0, (` + n + `) - 1))))`
}

// MarkOutboxFailed records a failed publish of a PENDING or IN_FLIGHT row: attempts +
// 1, back to PENDING, available again after outboxBackoff(new attempts, maxDelay),
// last_error truncated to 2000 characters. It returns the delay; a row in another
// state (already PUBLISHED) is ErrConflict, a missing one ErrNotFound.
func MarkOutboxFailed(ctx context.Context, q Querier, outboxID int64, publishErr string, maxDelay time.Duration) (time.Duration, error) {
	var delaySeconds float64
	capSeconds := maxDelay.Seconds()
	err := q.QueryRow(ctx, `
		UPDATE outbox SET status = 'PENDING', attempts = attempts + 1, locked_at = NULL, updated_at = now(),
			last_error = left($2, 2000),
			available_at = now() + make_interval(secs => `+outboxBackoff("attempts + 1", "$3::float8")+`)
		WHERE outbox_id = $1 AND status IN ('PENDING', 'IN_FLIGHT')
		RETURNING extract(epoch FROM available_at - now())::float8`,
		outboxID, publishErr, capSeconds).Scan(&delaySeconds)
	if err != nil {
		return 0, markFailedError(ctx, q, outboxID, err)
	}
	return time.Duration(delaySeconds * float64(time.Second)).Round(time.Millisecond), nil
}

// MarkOutboxFailedAfter is NoETL's mark-failed for an outside publisher that
// claimed with ClaimOutboxForPublisher: the row goes back to PENDING, available
// outboxBackoff(attempts, maxDelay), where attempts is the
// caller's count or, when 0, the row's (already counted at claim); attempts
// itself is not changed again. Errors as MarkOutboxFailed.
func MarkOutboxFailedAfter(ctx context.Context, q Querier, outboxID int64, publishErr string, attempts int, maxDelay time.Duration) (time.Duration, error) {
	var delaySeconds float64
	err := q.QueryRow(ctx, `
		UPDATE outbox SET status = 'PENDING', locked_at = NULL, updated_at = now(),
			last_error = left($2, 2000),
			available_at = now() + make_interval(secs => `+outboxBackoff("coalesce(nullif($4::int, 0), attempts)", "$3::float8")+`)
		WHERE outbox_id = $1 AND status IN ('PENDING', 'IN_FLIGHT')
		RETURNING (`+outboxBackoff("coalesce(nullif($4::int, 0), attempts)", "$3::float8")+`)::float8`,
		outboxID, publishErr, maxDelay.Seconds(), attempts).Scan(&delaySeconds)
	if err != nil {
		return 0, markFailedError(ctx, q, outboxID, err)
	}
	return time.Duration(delaySeconds * float64(time.Second)), nil
}

// ClaimableOutboxCount counts what a claim would take now: PENDING rows with
// available_at <= now() (NoETL's pending-count, what its autoscaler reads;
// rows in flight or backing off are not counted).
func ClaimableOutboxCount(ctx context.Context, q Querier) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE status = 'PENDING' AND available_at <= now()`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: count claimable outbox rows: %w", err)
	}
	return n, nil
}

// PendingOutboxCount counts rows not yet published (PENDING, IN_FLIGHT, FAILED): what
// an autoscaler reads.
func PendingOutboxCount(ctx context.Context, q Querier) (int64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE status <> 'PUBLISHED'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("store: count pending outbox rows: %w", err)
	}
	return n, nil
}

// DeletePublishedOutbox deletes up to limit PUBLISHED rows published more than
// olderThan ago (OutboxRetention for R-A6), returning how many went.
func DeletePublishedOutbox(ctx context.Context, q Querier, olderThan time.Duration, limit int) (int64, error) {
	if limit < 1 {
		return 0, fmt.Errorf("store: delete published outbox rows: limit %d < 1", limit)
	}
	tag, err := q.Exec(ctx, `
		DELETE FROM outbox WHERE outbox_id IN (
			SELECT outbox_id FROM outbox
			WHERE status = 'PUBLISHED' AND published_at < now() - $1::interval
			LIMIT $2)`, olderThan, limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete published outbox rows: %w", err)
	}
	return tag.RowsAffected(), nil
}

// prefixed qualifies a column list with a table alias.
func prefixed(alias, columns string) string {
	var out []byte
	start := true
	for i := 0; i < len(columns); i++ {
		c := columns[i]
		if start && c != ' ' && c != '\t' && c != '\n' {
			out = append(out, alias...)
			start = false
		}
		out = append(out, c)
		if c == ',' {
			start = true
		}
	}
	return string(out)
}

// outboxLagSQL is answered from the outbox_unpublished index (migration 0003).
const outboxLagSQL = `
	SELECT extract(epoch FROM now() - min(created_at))::float8 FROM outbox WHERE status <> 'PUBLISHED'`

// OutboxLag is how long the oldest row not yet published has waited: the lag the
// outbox alarm watches. Zero when everything is published.
func OutboxLag(ctx context.Context, q Querier) (time.Duration, error) {
	var secs *float64
	err := q.QueryRow(ctx, outboxLagSQL).Scan(&secs)
	if err != nil {
		return 0, fmt.Errorf("store: outbox lag: %w", err)
	}
	if secs == nil || *secs < 0 {
		return 0, nil
	}
	return time.Duration(*secs * float64(time.Second)), nil
}

// markFailedError says why a mark-failed changed no row: the row is gone
// (ErrNotFound) or already published (ErrConflict).
func markFailedError(ctx context.Context, q Querier, outboxID int64, err error) error {
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("store: mark outbox %d failed: %w", outboxID, err)
	}
	var status string
	if err := q.QueryRow(ctx, `SELECT status FROM outbox WHERE outbox_id = $1`, outboxID).Scan(&status); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("store: mark outbox %d failed: %w", outboxID, ErrNotFound)
		}
		return fmt.Errorf("store: mark outbox %d failed: %w", outboxID, err)
	}
	return fmt.Errorf("store: mark outbox %d failed: %w: status %s", outboxID, ErrConflict, status)
}
