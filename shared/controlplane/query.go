package controlplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/store"
)

// StepView is one step in an execution view (api.md GET /api/executions/{id}).
type StepView struct {
	Status      string
	Result      any
	Attempts    int
	Visits      int
	StartedAt   time.Time
	CompletedAt time.Time
	Error       string
}

// ExecutionView is an execution with its steps and context, read from the
// execution row alone (events.md §6: never aggregate the event table).
type ExecutionView struct {
	Row     store.Execution
	Steps   map[string]StepView
	Context map[string]any
	// Result equals Context once the execution ended (R-R7); nil before.
	Result any
	Status StatusView
}

// StatusView is GET /api/executions/{id}/status (events.md §6).
type StatusView struct {
	ExecutionID                                                         int64
	Status                                                              string
	CurrentStep                                                         string
	TotalSteps, CompletedSteps, RunningSteps, FailedSteps, SkippedSteps int
	IsCancelled                                                         bool
	// DoneSteps names the completed steps in the order they ended (NoETL's
	// completed_steps).
	DoneSteps []string
	// StartedAt, CompletedAt (zero while running) and Error are the row's.
	StartedAt, CompletedAt time.Time
	Error                  string
	// Workload is the execution's, for masking its secrets in Error.
	Workload map[string]any
}

// readExecution reads an execution row and its decoded snapshot.
func (s *Service) readExecution(ctx context.Context, id int64) (store.Execution, *engine.Snapshot, *store.Shard, error) {
	return s.read(ctx, id, false)
}

// read is readExecution; shared says the caller only reads the snapshot,
// never changes it: then one this process committed at the row's seq
// (snapCache) is returned as it is, and the row is read without its state
// (neither read, detoasted, sent nor decoded). The status route, which
// clients poll while they wait (NoETL's CLI, its GUI), reads so.
func (s *Service) read(ctx context.Context, id int64, shared bool) (store.Execution, *engine.Snapshot, *store.Shard, error) {
	sh, err := s.st.ShardFor(id)
	if err != nil {
		return store.Execution{}, nil, nil, Errorf(ErrNotFound, "execution %d not found", id)
	}
	var known snapEntry
	if shared {
		known = s.snaps.pin([]int64{id})[id]
	}
	var row store.Execution
	if known.snap != nil {
		row, err = store.GetExecutionUnlessAt(ctx, sh.Pool(), id, known.seq)
	} else {
		row, err = store.GetExecution(ctx, sh.Pool(), id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return row, nil, nil, Errorf(ErrNotFound, "execution %d not found", id)
	}
	if err != nil {
		return row, nil, nil, err
	}
	if known.snap != nil && row.State == nil && row.LastSeq == known.seq {
		return row, known.snap, sh, nil
	}
	snap, err := engine.UnmarshalSnapshot(row.State)
	if err != nil {
		return row, nil, nil, err
	}
	return row, snap, sh, nil
}

// readRun is read with the playbook the execution runs.
func (s *Service) readRun(ctx context.Context, id int64, shared bool) (store.Execution, *engine.Snapshot, *store.Shard, *playbook.Playbook, error) {
	row, snap, sh, err := s.read(ctx, id, shared)
	if err != nil {
		return row, nil, nil, nil, err
	}
	pb, err := s.playbook(ctx, nil, nil, row.CatalogID)
	if err != nil {
		return row, nil, nil, nil, err
	}
	return row, snap, sh, pb, nil
}

// Execution returns the full view of an execution.
func (s *Service) Execution(ctx context.Context, id int64) (*ExecutionView, error) {
	return s.execution(ctx, id, true)
}

// ExecutionSummary is Execution without the steps (no step result is read):
// status, context, result and error, whatever the size of the steps' results.
func (s *Service) ExecutionSummary(ctx context.Context, id int64) (*ExecutionView, error) {
	return s.execution(ctx, id, false)
}

func (s *Service) execution(ctx context.Context, id int64, steps bool) (*ExecutionView, error) {
	row, snap, sh, pb, err := s.readRun(ctx, id, false)
	if err != nil {
		return nil, err
	}
	v := &ExecutionView{Row: row, Steps: map[string]StepView{}, Context: snap.Ctx, Status: statusOf(row, snap, pb)}
	if lifecycle.ExecutionEnded(row.Status) {
		v.Result = snap.Ctx
	}
	if !steps {
		return v, nil
	}
	var refs []engine.ResultKey
	stored := map[string]string{} // step → the URI of its result in the result store
	for _, step := range pb.Steps {
		st := snap.Steps[step.Name]
		if st == nil {
			v.Steps[step.Name] = StepView{Status: engine.StepPending}
			continue
		}
		v.Steps[step.Name] = StepView{Status: st.Status, Result: st.Result, Attempts: st.Attempts, Visits: st.Visits,
			StartedAt: st.EnteredAt, CompletedAt: st.ExitedAt, Error: st.Error}
		switch {
		case st.ResultRef == nil:
		case st.ResultRef.Kind == engine.KindReference && s.cfg.Results == nil:
			// A function without the result store (AWS: only ingest reads
			// it) shows where the result is, as NoETL shows a result by
			// reference.
			sv := v.Steps[step.Name]
			sv.Result = map[string]any{"_ref": pipeline.RefOf(st.ResultRef.URI)}
			v.Steps[step.Name] = sv
		case st.ResultRef.Kind == engine.KindReference:
			stored[step.Name] = st.ResultRef.URI
		default:
			refs = append(refs, *st.ResultRef)
		}
	}
	for name, uri := range stored {
		if err := s.viewStored(ctx, id, name, uri, v); err != nil {
			return nil, err
		}
	}
	if len(refs) > 0 {
		// The latest visit's result, kept in Postgres (R-S1, R-W7).
		got := map[engine.ResultKey]any{}
		if err := s.loadResults(ctx, sh.Pool(), id, refs, got); err != nil {
			return nil, err
		}
		for k, val := range got {
			sv := v.Steps[k.Step]
			sv.Result = val
			v.Steps[k.Step] = sv
		}
	}
	return v, nil
}

// viewStored sets the view's result of step name, stored by reference at
// uri, to its value, read as the execution's own steps read it: a parent's
// return_step takes a child's step result from the view, and NoETL hands it
// whole. A result the view cannot show as a value (outside this server's
// store, another execution's, over resultstore's limits, not JSON, holding a
// NUL, a fragment pointing at nothing) is shown as NoETL shows a result by
// reference, {_ref: {kind: result_ref, ref, uri}}, so the rest of the view
// still answers; only a failed read (the store unreachable) fails it.
func (s *Service) viewStored(ctx context.Context, id int64, name, uri string, v *ExecutionView) error {
	val, err := resultstore.ReadJSON(ctx, s.cfg.Results, uri, id)
	if resultstore.IsUnread(err) {
		return fmt.Errorf("execution %d: step %s: %w", id, name, err)
	}
	if err != nil {
		val = map[string]any{"_ref": pipeline.RefOf(uri)}
	}
	sv := v.Steps[name]
	sv.Result = val
	v.Steps[name] = sv
	return nil
}

// Status returns progress and the current step (events.md §6), O(steps).
// It only reads the snapshot (read's shared).
func (s *Service) Status(ctx context.Context, id int64) (*StatusView, error) {
	row, snap, _, pb, err := s.readRun(ctx, id, true)
	if err != nil {
		return nil, err
	}
	v := statusOf(row, snap, pb)
	return &v, nil
}

func statusOf(row store.Execution, snap *engine.Snapshot, pb *playbook.Playbook) StatusView {
	v := StatusView{ExecutionID: row.ExecutionID, Status: row.Status, TotalSteps: len(pb.Steps),
		IsCancelled: row.Status == lifecycle.ExecutionCancelled, DoneSteps: []string{},
		StartedAt: row.StartedAt, CompletedAt: row.CompletedAt, Error: row.Error, Workload: row.Workload}
	var latest int64
	for name, st := range snap.Steps {
		switch st.Status {
		case engine.StepCompleted:
			v.CompletedSteps++
			v.DoneSteps = append(v.DoneSteps, name)
		case engine.StepRunning:
			v.RunningSteps++
			// R-A8: the most recently entered step still running.
			if st.EnterSeq > latest {
				latest, v.CurrentStep = st.EnterSeq, name
			}
		case engine.StepFailed:
			v.FailedSteps++
		case engine.StepSkipped:
			v.SkippedSteps++
		}
	}
	slices.SortFunc(v.DoneSteps, func(a, b string) int {
		return cmp.Or(snap.Steps[a].ExitedAt.Compare(snap.Steps[b].ExitedAt), cmp.Compare(a, b))
	})
	return v
}

// ListExecutions merges one page across shards in (started_at DESC, id DESC)
// order with keyset pagination: each shard returns at most limit rows after the
// cursor, so the cost does not depend on how many executions exist.
func (s *Service) ListExecutions(ctx context.Context, f store.ExecutionFilter) ([]store.Execution, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	want := f.Limit
	sf := f
	sf.Limit += f.Offset // any shard may hold every row before the offset
	var all []store.Execution
	for i := range s.st.NumShards() {
		page, err := store.ListExecutions(ctx, s.st.Shard(i).Pool(), sf)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].StartedAt.Equal(all[j].StartedAt) {
			return all[i].StartedAt.After(all[j].StartedAt)
		}
		return all[i].ExecutionID > all[j].ExecutionID
	})
	all = all[min(f.Offset, len(all)):]
	if len(all) > want {
		all = all[:want]
	}
	return all, nil
}

// Events returns a page of an execution's log.
func (s *Service) Events(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	_, evs, err := s.ExecutionEvents(ctx, f)
	return evs, err
}

// ExecutionEvents returns a page of an execution's log with the execution's
// row (the API masks the workload's secrets in what it serves).
func (s *Service) ExecutionEvents(ctx context.Context, f store.EventFilter) (store.Execution, []store.Event, error) {
	row, evs, _, err := s.EventPage(ctx, f)
	return row, evs, err
}

// EventPage is ExecutionEvents that also says whether f.MaxBytes ended the
// page early (store.ListEventPage).
func (s *Service) EventPage(ctx context.Context, f store.EventFilter) (store.Execution, []store.Event, bool, error) {
	sh, err := s.st.ShardFor(f.ExecutionID)
	if err != nil {
		return store.Execution{}, nil, false, Errorf(ErrNotFound, "execution %d not found", f.ExecutionID)
	}
	row, err := store.GetExecution(ctx, sh.Pool(), f.ExecutionID)
	if errors.Is(err, store.ErrNotFound) {
		return row, nil, false, Errorf(ErrNotFound, "execution %d not found", f.ExecutionID)
	} else if err != nil {
		return row, nil, false, err
	}
	evs, full, err := store.ListEventPage(ctx, sh.Pool(), f)
	return row, evs, full, err
}

// EventSeq is the seq of an execution's event, by its event_id (ErrNotFound
// when the execution has no such event).
func (s *Service) EventSeq(ctx context.Context, executionID, eventID int64) (int64, error) {
	sh, err := s.st.ShardFor(executionID)
	if err != nil {
		return 0, Errorf(ErrNotFound, "execution %d not found", executionID)
	}
	seq, err := store.EventSeq(ctx, sh.Pool(), executionID, eventID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, Errorf(ErrNotFound, "event %d is not an event of execution %d", eventID, executionID)
	}
	return seq, err
}

// StartMarks lists the start events (step.enter, command.claimed,
// command.started) of an execution with seq in (afterSeq, untilSeq]: what
// the durations of later end events are measured from.
func (s *Service) StartMarks(ctx context.Context, executionID, afterSeq, untilSeq int64) ([]store.StartMark, error) {
	sh, err := s.st.ShardFor(executionID)
	if err != nil {
		return nil, Errorf(ErrNotFound, "execution %d not found", executionID)
	}
	return store.StartMarks(ctx, sh.Pool(), executionID, afterSeq, untilSeq)
}

// Workload returns an execution's merged workload.
func (s *Service) Workload(ctx context.Context, id int64) (map[string]any, error) {
	row, _, _, err := s.readExecution(ctx, id)
	return row.Workload, err
}
