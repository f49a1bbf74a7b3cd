package controlplane

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/notify"
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
	pb, err := s.playbook(ctx, entry.CatalogID)
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
	var started *Started
	err = s.inTx(ctx, sh, func(tx pgx.Tx) ([]store.OutboxMessage, error) {
		if req.IdempotencyKey != "" {
			prev, err := store.GetExecutionByIdempotencyKey(ctx, tx, req.IdempotencyKey)
			if err == nil {
				started = &Started{ExecutionID: prev.ExecutionID, Existing: true}
				return nil, nil
			}
			if !errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
		}
		ids, err := s.ids.take(ctx, tx, sh.Index(), 1)
		if err != nil {
			return nil, err
		}
		id := ids[0]
		at, err := store.NextEventTime(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		workload, err := pb.PrepareWorkload(id, entry.CatalogID, req.Payload, at)
		if err != nil {
			return nil, Errorf(ErrInvalid, "the playbook's workload cannot render: %v", err)
		}
		row, created, err := store.InsertExecution(ctx, tx, store.Execution{
			ExecutionID: id, CatalogID: entry.CatalogID, Path: entry.Path, Version: entry.Version,
			ParentExecutionID: req.ParentExecutionID, Status: store.ExecutionRunning,
			Pool: notify.PoolFor(req.Pool, entry.Path), IdempotencyKey: req.IdempotencyKey,
			Workload: workload, StartedAt: at,
		})
		if err != nil {
			return nil, err
		}
		if !created {
			started = &Started{ExecutionID: row.ExecutionID, Existing: true}
			return nil, nil
		}
		x := &execution{row: row, shard: sh, pb: pb, run: runOf(row)}
		ctxv := map[string]any{"workload": workload, "path": entry.Path, "version": int64(entry.Version),
			"catalog_id": fmt.Sprint(entry.CatalogID)}
		if req.ParentExecutionID != 0 {
			ctxv["parent_execution_id"] = fmt.Sprint(req.ParentExecutionID)
		}
		adv, err := s.advance(ctx, tx, x, store.Event{EventType: engine.EvPlaybookStarted, Status: "STARTED",
			Context: ctxv, CreatedAt: at})
		if err != nil {
			return nil, err
		}
		started = &Started{ExecutionID: id, CommandsGenerated: len(adv.out.Commands)}
		return adv.outbox, nil
	})
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "execution started", "execution_id", started.ExecutionID, "path", entry.Path,
		"version", entry.Version, "existing", started.Existing)
	return started, nil
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
