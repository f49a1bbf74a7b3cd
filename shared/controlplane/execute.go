package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/store"
)

// ExecuteRequest starts an execution (api.md POST /api/execute). Exactly one of
// Path and CatalogID is set; Version picks a version of Path (0: latest).
type ExecuteRequest struct {
	Path              string
	CatalogID         int64
	Version           int
	Payload           map[string]any
	ParentExecutionID int64
	Pool              string
	IdempotencyKey    string
	// ScheduleID and ScheduledAt name the schedule and due time starting
	// the execution (schedule.go, which sets the idempotency key to match).
	ScheduleID  int64
	ScheduledAt time.Time
	// Shard pins the new execution's shard (tests, R-I3); -1 or unset: automatic.
	Shard *int
}

// Started is the outcome of Execute.
type Started struct {
	ExecutionID       int64
	CommandsGenerated int
	// Existing is true when an idempotency key matched an earlier execution.
	Existing bool
}

// Execute records playbook.started for a new execution and issues its first
// commands, in one transaction on the execution's shard.
func (s *Service) Execute(ctx context.Context, req ExecuteRequest) (*Started, error) {
	entry, err := s.resolve(ctx, req)
	if err != nil {
		return nil, err
	}
	pb, err := s.playbook(ctx, nil, nil, entry.CatalogID)
	if err != nil {
		return nil, err
	}
	if err := notify.ValidatePool(req.Pool); req.Pool != "" && err != nil {
		return nil, Errorf(ErrInvalid, "execution_pool: %v", err)
	}
	sh, err := s.shardForNew(ctx, req)
	if err != nil {
		return nil, err
	}
	started, err := s.start(ctx, sh, req, entry, pb)
	if store.IsIdempotencyConflict(err) {
		// Another request with the key committed first.
		prev, err := store.GetExecutionByIdempotencyKey(ctx, sh.Pool(), req.IdempotencyKey)
		if err != nil {
			return nil, err
		}
		started = &Started{ExecutionID: prev.ExecutionID, Existing: true}
	} else if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "execution started", "execution_id", started.ExecutionID, "path", entry.Path,
		"version", entry.Version, "existing", started.Existing)
	return started, nil
}

// start writes the new execution with playbook.started and its first
// commands: one round trip for the clock (and the idempotency key), one for
// everything else with COMMIT.
func (s *Service) start(ctx context.Context, sh *store.Shard, req ExecuteRequest, entry store.CatalogEntry, pb *playbook.Playbook) (*Started, error) {
	var started *Started
	ls := &store.LockSet{IdempotencyKey: req.IdempotencyKey}
	err := s.withTx(ctx, sh, ls, func(t *txn) (err error) {
		if ls.Existing != nil {
			started = &Started{ExecutionID: ls.Existing.ExecutionID, Existing: true}
			return errDiscard
		}
		started, err = t.start(req, entry, pb)
		return err
	})
	if err != nil {
		return nil, err
	}
	return started, nil
}

// start inserts the execution and folds playbook.started, under the lock of
// its idempotency key.
func (t *txn) start(req ExecuteRequest, entry store.CatalogEntry, pb *playbook.Playbook) (*Started, error) {
	id := t.ids.next()
	if t.ids.err != nil {
		return nil, t.ids.err
	}
	at := t.now
	workload, err := pb.PrepareWorkload(id, entry.CatalogID, req.Payload, at)
	if err != nil {
		return nil, Errorf(ErrInvalid, "the playbook's workload cannot render: %v", err)
	}
	row := store.Execution{
		ExecutionID: id, CatalogID: entry.CatalogID, Path: entry.Path, Version: entry.Version,
		ParentExecutionID: req.ParentExecutionID, Status: lifecycle.ExecutionRunning,
		Pool: notify.PoolFor(req.Pool, entry.Path), IdempotencyKey: req.IdempotencyKey,
		Workload: workload, StartedAt: at, UpdatedAt: at, ScheduleID: req.ScheduleID, ScheduledAt: req.ScheduledAt,
	}
	x := &execution{row: row, pb: pb, run: runOf(row), snap: engine.NewSnapshot(), isNew: true}
	t.execs[id], t.order = x, append(t.order, x)
	ctxv := map[string]any{"workload": workload, "path": entry.Path, "version": int64(entry.Version),
		"catalog_id": fmt.Sprint(entry.CatalogID)}
	if req.ParentExecutionID != 0 {
		ctxv["parent_execution_id"] = fmt.Sprint(req.ParentExecutionID)
	}
	if req.ScheduleID != 0 {
		ctxv["schedule_id"] = fmt.Sprint(req.ScheduleID)
		ctxv["scheduled_at"] = req.ScheduledAt.UTC().Format(time.RFC3339Nano)
	}
	out, _, err := t.advance(x, store.Event{EventType: eventtype.PlaybookStarted, Status: "STARTED", Context: ctxv, CreatedAt: at})
	if err != nil {
		return nil, err
	}
	return &Started{ExecutionID: id, CommandsGenerated: len(out.Commands)}, nil
}

// Rerun starts the playbook version an execution ran again, in the same
// pool, with that execution's workload, the keys of workload replacing its
// keys. Workload values the playbook renders at start (templates, R-W5) are
// rendered afresh unless workload gives them: the old run's rendering
// (its execution_id, its time) would be stale.
func (s *Service) Rerun(ctx context.Context, id int64, workload map[string]any) (*Started, error) {
	row, _, _, pb, err := s.readRun(ctx, id, false)
	if err != nil {
		return nil, err
	}
	payload := map[string]any{}
	for k, v := range row.Workload {
		if !pb.RendersAtStart(k) {
			payload[k] = v
		}
	}
	maps.Copy(payload, workload)
	return s.Execute(ctx, ExecuteRequest{CatalogID: row.CatalogID, Payload: payload, Pool: row.Pool})
}

func (s *Service) resolve(ctx context.Context, req ExecuteRequest) (store.CatalogEntry, error) {
	switch {
	case req.Path != "" && req.CatalogID != 0:
		return store.CatalogEntry{}, Errorf(ErrInvalid, "give exactly one of path and catalog_id, not both")
	case req.CatalogID != 0:
		return s.Catalog(ctx, req.CatalogID)
	case req.Path != "":
		return s.CatalogByPath(ctx, req.Path, req.Version)
	}
	return store.CatalogEntry{}, Errorf(ErrInvalid, "path: give the playbook's path or its catalog_id")
}

// shardForNew places a new execution (R-I3): children on their parent's shard, a
// repeated idempotency key where the first one went, otherwise round robin.
func (s *Service) shardForNew(ctx context.Context, req ExecuteRequest) (*store.Shard, error) {
	switch {
	case req.Shard != nil && *req.Shard >= 0:
		if *req.Shard >= s.st.NumShards() {
			return nil, Errorf(ErrInvalid, "shard %d is not configured", *req.Shard)
		}
		return s.st.Shard(*req.Shard), nil
	case req.ParentExecutionID != 0:
		sh, err := s.st.ShardFor(req.ParentExecutionID)
		if err != nil {
			return nil, Errorf(ErrNotFound, "parent execution %d not found", req.ParentExecutionID)
		}
		if _, err := store.GetExecution(ctx, sh.Pool(), req.ParentExecutionID); errors.Is(err, store.ErrNotFound) {
			return nil, Errorf(ErrNotFound, "parent execution %d not found", req.ParentExecutionID)
		} else if err != nil {
			return nil, err
		}
		return sh, nil
	case req.IdempotencyKey != "":
		return s.st.ShardForKey(req.IdempotencyKey), nil
	}
	return s.st.NextShard(), nil
}
