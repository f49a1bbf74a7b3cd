package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Worker is one row of the worker registry (cluster database).
type Worker struct {
	Name      string
	RuntimeID int64
	Pool      string
	Runtime   string
	// Status is what the worker last said of itself (ready, busy, …), or
	// offline once it deregistered.
	Status   string
	Capacity *int // nil: the worker did not say
	Hostname string
	PID      int64
	Labels   map[string]any
	Info     map[string]any
	// Instance identifies the process registered under Name; InstanceAt is
	// when it first registered.
	Instance   string
	InstanceAt time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
	LastSeen   time.Time
	// Now is the database's clock when the row was read: expiry is judged
	// against it, never against the reader's clock.
	Now time.Time
}

const workerColumns = `name, runtime_id, pool, runtime, status, capacity, hostname, pid, labels, info,
	instance, instance_at, created_at, updated_at, last_seen, now()`

func scanWorker(row pgx.Row) (Worker, error) {
	var (
		w                   Worker
		capacity            *int32
		hostname            *string
		pid                 *int64
		labelsJSON, infoRaw []byte
	)
	err := row.Scan(&w.Name, &w.RuntimeID, &w.Pool, &w.Runtime, &w.Status, &capacity, &hostname, &pid, &labelsJSON, &infoRaw,
		&w.Instance, &w.InstanceAt, &w.CreatedAt, &w.UpdatedAt, &w.LastSeen, &w.Now)
	if err != nil {
		return w, err
	}
	if capacity != nil {
		c := int(*capacity)
		w.Capacity = &c
	}
	w.Hostname = derefString(hostname)
	if pid != nil {
		w.PID = *pid
	}
	w.InstanceAt, w.CreatedAt, w.UpdatedAt, w.LastSeen, w.Now = w.InstanceAt.UTC(), w.CreatedAt.UTC(), w.UpdatedAt.UTC(), w.LastSeen.UTC(), w.Now.UTC()
	if w.Labels, err = decodeObject(labelsJSON, "labels"); err != nil {
		return w, err
	}
	w.Info, err = decodeObject(infoRaw, "info")
	return w, err
}

// UpsertWorker registers a worker or refreshes its registration: every field
// is the new one, last_seen is now, and instance_at is kept while the
// instance is the same (now when it changed). newInstance reports the
// latter, a first registration included. Rows silent for longer than
// retention are deleted on the way (a bounded batch).
func UpsertWorker(ctx context.Context, q Querier, w Worker, retention time.Duration) (Worker, bool, error) {
	labels, err := objectJSONText(w.Labels)
	if err != nil {
		return w, false, fmt.Errorf("store: register worker %s: labels: %w", w.Name, err)
	}
	info, err := objectJSONText(w.Info)
	if err != nil {
		return w, false, fmt.Errorf("store: register worker %s: info: %w", w.Name, err)
	}
	var capacity *int32
	if w.Capacity != nil {
		c := int32(*w.Capacity)
		capacity = &c
	}
	var pid *int64
	if w.PID != 0 {
		pid = &w.PID
	}
	out, err := scanWorker(q.QueryRow(ctx, `
		WITH pruned AS (
			DELETE FROM worker WHERE name = ANY (ARRAY(
				SELECT name FROM worker WHERE last_seen < now() - $11::interval AND name <> $1
				ORDER BY last_seen LIMIT 100)))
		INSERT INTO worker AS w (name, pool, runtime, status, capacity, hostname, pid, labels, info, instance)
		VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce($8::jsonb, '{}'), coalesce($9::jsonb, '{}'), $10)
		ON CONFLICT (name) DO UPDATE SET pool = EXCLUDED.pool, runtime = EXCLUDED.runtime, status = EXCLUDED.status,
			capacity = EXCLUDED.capacity, hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, labels = EXCLUDED.labels,
			info = EXCLUDED.info, instance = EXCLUDED.instance,
			instance_at = CASE WHEN w.instance = EXCLUDED.instance THEN w.instance_at ELSE now() END,
			updated_at = now(), last_seen = now()
		RETURNING `+workerColumns,
		w.Name, w.Pool, w.Runtime, w.Status, capacity, nullString(w.Hostname), pid, labels, info, w.Instance, retention))
	if err != nil {
		return out, false, fmt.Errorf("store: register worker %s: %w", w.Name, err)
	}
	// now() is the transaction's start: equal only when this statement set it.
	return out, out.InstanceAt.Equal(out.Now), nil
}

// TouchWorker is a pool heartbeat: last_seen becomes now and the status
// ready (as NoETL's server does; a deregistered worker that beats again is
// back). ErrNotFound: no worker has that name.
func TouchWorker(ctx context.Context, q Querier, name string) (Worker, error) {
	w, err := scanWorker(q.QueryRow(ctx, `
		UPDATE worker SET last_seen = now(), updated_at = now(), status = 'ready'
		WHERE name = $1 RETURNING `+workerColumns, name))
	return found(w, err, "heartbeat of worker %s", name)
}

// MarkWorkerOffline records a deregistration; false: no worker has that name.
func MarkWorkerOffline(ctx context.Context, q Querier, name string) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE worker SET status = 'offline', updated_at = now() WHERE name = $1`, name)
	if err != nil {
		return false, fmt.Errorf("store: deregister worker %s: %w", name, err)
	}
	return tag.RowsAffected() > 0, nil
}

// WorkerFilter selects registry rows. State compares the state the registry
// derives (WorkerState), not the stored status.
type WorkerFilter struct {
	Pool, Runtime, State string
	// TTL is the expiry the state is derived with.
	TTL   time.Duration
	Limit int // 1..1000
}

// WorkerState is the state a worker is in: offline once deregistered,
// expired when last seen ttl ago or more, else the status it reported.
const workerState = `CASE WHEN status = 'offline' THEN 'offline'
	WHEN last_seen <= now() - $1::interval THEN 'expired' ELSE status END`

// ListWorkers returns registry rows by name.
func ListWorkers(ctx context.Context, q Querier, f WorkerFilter) ([]Worker, error) {
	if f.Limit < 1 || f.Limit > 1000 {
		return nil, fmt.Errorf("store: list workers: limit %d outside 1..1000", f.Limit)
	}
	return queryRows(ctx, q, "list workers", scanWorker, `
		SELECT `+workerColumns+` FROM worker
		WHERE ($2 = '' OR pool = $2) AND ($3 = '' OR runtime = $3) AND ($4 = '' OR `+workerState+` = $4)
		ORDER BY name LIMIT $5`, f.TTL, f.Pool, f.Runtime, f.State, f.Limit)
}

// WorkerTotals sums the registry by state: how many workers are alive (and
// the capacity they declared), expired and offline.
type WorkerTotals struct {
	Alive, Expired, Offline int
	Capacity                int
}

// CountWorkers reads the registry's totals with expiry ttl. It reads every
// row through the last_seen index (the range covers them all): without seq
// scans (store.Open) a plain scan is planned at a cost that makes Postgres
// JIT-compile the query, 80 ms on every call.
func CountWorkers(ctx context.Context, q Querier, ttl time.Duration) (WorkerTotals, error) {
	var t WorkerTotals
	err := q.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE state NOT IN ('offline', 'expired')),
			count(*) FILTER (WHERE state = 'expired'), count(*) FILTER (WHERE state = 'offline'),
			coalesce(sum(capacity) FILTER (WHERE state NOT IN ('offline', 'expired')), 0)
		FROM (SELECT capacity, `+workerState+` AS state FROM worker WHERE last_seen >= '-infinity') s`, ttl).Scan(&t.Alive, &t.Expired, &t.Offline, &t.Capacity)
	if err != nil {
		return t, fmt.Errorf("store: count workers: %w", err)
	}
	return t, nil
}
