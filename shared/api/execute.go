package api

import (
	"context"
	"strings"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/wire"
)

// POST /api/execute (wire.ExecuteRequest): start an execution of a
// registered playbook, by path (and version) or by catalog_id.
func (a *API) execute(ctx context.Context, c *call, r wire.ExecuteRequest) (wire.Started, error) {
	if err := playbookKind("resource_kind", r.ResourceKind); err != nil {
		return wire.Started{}, err
	}
	if strings.HasPrefix(r.IdempotencyKey, controlplane.ScheduleKeyPrefix) {
		return wire.Started{}, invalid("idempotency_key", "keys starting with %q are the schedules' own (one per due time); choose another", controlplane.ScheduleKeyPrefix)
	}
	st, err := a.svc.Execute(ctx, controlplane.ExecuteRequest{Path: r.Path, CatalogID: int64(r.CatalogID), Version: int(r.Version),
		Payload: r.Payload, ParentExecutionID: int64(r.ParentExecutionID), Pool: r.Pool, IdempotencyKey: r.IdempotencyKey})
	if err != nil {
		return wire.Started{}, err
	}
	c.attrs.setExecution(st.ExecutionID)
	return started(st), nil
}

// started answers an execution started (execute, rerun).
func started(st *controlplane.Started) wire.Started {
	return wire.Started{ExecutionID: wire.ID(st.ExecutionID), Status: "started",
		CommandsGenerated: st.CommandsGenerated, Existing: st.Existing}
}
