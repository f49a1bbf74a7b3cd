package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// StepResultWhole is the Index under which a step visit's whole (large) result is
// kept; loop iterations use their index 0.. (R-S1).
const StepResultWhole = -1

// Kinds of stored values.
const (
	KindResult = "result" // a visit's whole result or one iteration's
	KindItem   = "item"   // one item of a loop's collection
)

// StepResultKey names one stored value of an execution. An empty Kind means
// KindResult.
type StepResultKey struct {
	Kind  string
	Step  string
	Visit int
	Index int
}

func (k StepResultKey) kind() string {
	if k.Kind == "" {
		return KindResult
	}
	return k.Kind
}

// StepResult is a stored per-iteration or large step result (any jsonx value).
// ExecutionID is set on results written through Changes.
type StepResult struct {
	StepResultKey
	ExecutionID int64
	Result      any
}

func putStepResultsStmt(results []StepResult) (string, []any, error) {
	n := len(results)
	execIDs := make([]int64, n)
	kinds, steps, values := make([]string, n), make([]string, n), make([]string, n)
	visits, idxs := make([]int32, n), make([]int32, n)
	for i, r := range results {
		b, err := jsonx.Marshal(r.Result)
		if err != nil {
			return "", nil, fmt.Errorf("put %s %s#%d[%d] of execution %d: %w", r.kind(), r.Step, r.Visit, r.Index, r.ExecutionID, err)
		}
		execIDs[i], kinds[i], steps[i], visits[i], idxs[i], values[i] = r.ExecutionID, r.kind(), r.Step, int32(r.Visit), int32(r.Index), string(b)
	}
	return `
		INSERT INTO step_result (execution_id, kind, step, visit, idx, result)
		SELECT execution_id, kind, step, visit, idx, result::jsonb
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::int[], $5::int[], $6::text[])
			AS t(execution_id, kind, step, visit, idx, result)
		ON CONFLICT (execution_id, kind, step, visit, idx) DO UPDATE SET result = excluded.result, created_at = now()`,
		[]any{execIDs, kinds, steps, visits, idxs, values}, nil
}

// GetStepResults reads the values stored under keys; keys with nothing stored are
// absent from the map. Returned keys always carry their Kind.
func GetStepResults(ctx context.Context, q Querier, executionID int64, keys []StepResultKey) (map[StepResultKey]any, error) {
	out := make(map[StepResultKey]any, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	n := len(keys)
	var (
		kinds, steps []string
		visits, idxs []int32
	)
	for _, k := range keys {
		kinds, steps = append(kinds, k.kind()), append(steps, k.Step)
		visits, idxs = append(visits, int32(k.Visit)), append(idxs, int32(k.Index))
	}
	kinds, steps = slices.Compact(slices.Sorted(slices.Values(kinds))), slices.Compact(slices.Sorted(slices.Values(steps)))
	visits, idxs = slices.Compact(slices.Sorted(slices.Values(visits))), slices.Compact(slices.Sorted(slices.Values(idxs)))
	// Each column as an array, all index conditions on the primary key (a
	// superset when keys differ in several columns: kept below only if
	// asked); a join on unnest was planned as a scan of the whole table.
	rows, err := q.Query(ctx, `
		SELECT kind, step, visit, idx, result FROM step_result
		WHERE execution_id = $1 AND kind = ANY($2) AND step = ANY($3) AND visit = ANY($4) AND idx = ANY($5)`,
		executionID, kinds, steps, visits, idxs)
	if err != nil {
		return nil, fmt.Errorf("store: get %d step results of execution %d: %w", n, executionID, err)
	}
	results, err := collectStepResults(rows)
	if err != nil {
		return nil, fmt.Errorf("store: get %d step results of execution %d: %w", n, executionID, err)
	}
	want := make(map[StepResultKey]bool, n)
	for _, k := range keys {
		k.Kind = k.kind()
		want[k] = true
	}
	for _, r := range results {
		if want[r.StepResultKey] {
			out[r.StepResultKey] = r.Result
		}
	}
	return out, nil
}

func collectStepResults(rows pgx.Rows) ([]StepResult, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (StepResult, error) {
		var (
			sr  StepResult
			raw []byte
		)
		if err := r.Scan(&sr.Kind, &sr.Step, &sr.Visit, &sr.Index, &raw); err != nil {
			return sr, err
		}
		if raw != nil {
			v, err := jsonx.Decode(raw)
			if err != nil {
				return sr, fmt.Errorf("decode result: %w", err)
			}
			sr.Result = v
		}
		return sr, nil
	})
}

// IterationResults lists the iterations of a loop visit that have a stored
// result, in index order: those that completed (what a redrive keeps).
func IterationResults(ctx context.Context, q Querier, executionID int64, step string, visit int) ([]int, error) {
	rows, err := q.Query(ctx, `SELECT idx FROM step_result
		WHERE execution_id = $1 AND kind = $2 AND step = $3 AND visit = $4 AND idx >= 0 ORDER BY idx`,
		executionID, KindResult, step, visit)
	if err != nil {
		return nil, err
	}
	idx, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("iteration results of %s#%d of execution %d: %w", step, visit, executionID, err)
	}
	out := make([]int, len(idx))
	for i, n := range idx {
		out[i] = int(n)
	}
	return out, nil
}
