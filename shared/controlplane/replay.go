package controlplane

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/redact"
	"github.com/noetl-go/noetl/shared/replay"
	"github.com/noetl-go/noetl/shared/store"
)

// Replayed is the outcome of a replay request.
type Replayed struct {
	State *replay.State
	// Verify is set with verify=true: the full fold against the live snapshot.
	Verify *Verification
	// Diff is set with diff_from: what changed from the earlier cutoff.
	Diff []replay.Change
	// Workload is the execution's (the API masks its secrets).
	Workload map[string]any
}

// Verification compares the fold of the whole log with the live snapshot.
type Verification struct {
	Consistent  bool     `json:"consistent"`
	Differences []string `json:"differences"`
}

// Replay folds an execution's log, streamed in seq order, into the replay
// projections (replay.md). Events stored as ignored (fenced, R-L8, or late,
// R-R10) never changed the execution and are not folded.
func (s *Service) Replay(ctx context.Context, id int64, q replay.Query) (*Replayed, error) {
	row, live, sh, err := s.readExecution(ctx, id)
	if err != nil {
		return nil, err
	}
	out := &Replayed{Workload: row.Workload}
	if out.State, _, err = s.fold(ctx, sh, row, q.Projection, q.Cutoff, q.Limit); err != nil {
		return nil, err
	}
	if q.DiffFrom.Kind != replay.CutoffNone {
		from, _, err := s.fold(ctx, sh, row, q.Projection, q.DiffFrom, q.Limit)
		if err != nil {
			return nil, err
		}
		out.Diff = replay.Diff(from, out.State)
	}
	if q.Verify {
		// Verify folds the whole log: bounded as a limit is.
		if row.LastSeq > replay.MaxLimit {
			return nil, &replay.ParamError{Param: "verify", Msg: fmt.Sprintf(
				"verify folds the whole log, and execution %d has %d events, over the most one replay folds, %d (replay.MaxLimit): leave verify out",
				id, row.LastSeq, replay.MaxLimit)}
		}
		_, folded, err := s.fold(ctx, sh, row, replay.ProjectionStep, replay.Cutoff{}, -1)
		if err != nil {
			return nil, err
		}
		out.Verify = verify(live, folded)
	}
	return out, nil
}

// fold streams the log through a replay.Folder with the engine's own fold as the
// steps projection; it also returns that fold's snapshot. limit < 0: no limit.
func (s *Service) fold(ctx context.Context, sh *store.Shard, row store.Execution, p replay.Projection, cut replay.Cutoff, limit int) (*replay.State, *engine.Snapshot, error) {
	switch {
	case limit < 0:
		limit = int(row.LastSeq) + 1 // the whole log
	case limit == 0:
		limit = replay.DefaultLimit
	}
	steps := replay.NewEngineSteps()
	f := replay.NewFolder(replay.Options{Projection: p, ExecutionID: strconv.FormatInt(row.ExecutionID, 10),
		Cutoff: cut, Limit: limit, Steps: steps})
	// Limit+1 rows, so the fold can tell a truncated log (R-X4).
	filter := store.EventFilter{ExecutionID: row.ExecutionID, Limit: limit + 1}
	err := store.StreamEvents(ctx, sh.Pool(), filter, func(e *store.Event) error {
		if e.Ignored {
			return nil
		}
		return f.Add(rowOf(e))
	})
	if err != nil && !replay.IsStop(err) {
		return nil, nil, fmt.Errorf("replay execution %d: %w", row.ExecutionID, err)
	}
	st, err := f.State()
	if err != nil {
		return nil, nil, err
	}
	return st, steps.Snapshot(), nil
}

// rowOf is an event as the replay fold reads it; stage, frame and aggregate ids of
// external events live in meta.
func rowOf(e *store.Event) replay.Row {
	r := replay.Row{Seq: e.Seq, EventID: e.EventID, EventType: e.EventType, NodeName: e.NodeName, NodeType: e.NodeType,
		Status: e.Status, CommandID: e.CommandID, WorkerID: e.WorkerID, Context: e.Context, Meta: e.Meta,
		Error: e.Error, CreatedAt: e.CreatedAt}
	if e.Result != nil {
		r.Result = e.Result
	}
	r.StageID, _ = e.Meta["stage_id"].(string)
	r.FrameID, _ = e.Meta["frame_id"].(string)
	r.AggregateType, _ = e.Meta["aggregate_type"].(string)
	r.AggregateID, _ = e.Meta["aggregate_id"].(string)
	return r
}

// verify compares the folded snapshot with the live one, field by field, leaving
// out the decision's own memory (Waiting), which Apply never writes.
func verify(live, folded *engine.Snapshot) *Verification {
	a, b := *live, *folded
	a.Waiting, b.Waiting = nil, nil
	la, _ := jsonx.Decode(jsonx.MustMarshal(&a))
	lb, _ := jsonx.Decode(jsonx.MustMarshal(&b))
	v := &Verification{Differences: []string{}}
	compare("", la, lb, &v.Differences)
	v.Consistent = len(v.Differences) == 0
	return v
}

func compare(path string, a, b any, diffs *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			compare(path+"/"+k, am[k], bm[k], diffs)
		}
		return
	}
	if string(jsonx.MustMarshal(a)) != string(jsonx.MustMarshal(b)) {
		*diffs = append(*diffs, fmt.Sprintf("%s: live %s, folded %s", path, shown(path, a), shown(path, b)))
	}
}

// shown is a value as a difference quotes it to users: secrets masked by the
// key rule, including a value whose own key (a segment of path) is secret.
func shown(path string, v any) []byte {
	for _, seg := range strings.Split(path, "/") {
		if redact.SecretKey(seg) && v != nil {
			v = redact.Mask
		}
	}
	return jsonx.MustMarshal(redact.Value(v))
}
