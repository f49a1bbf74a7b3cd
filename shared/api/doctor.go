package api

import (
	"cmp"
	"context"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/wire"
)

// GET /api/doctor?limit=: the executions that break the liveness invariant
// (controlplane.Doctor).
func (a *API) doctor(ctx context.Context, c *call, q doctorQuery) (wire.Doctor, error) {
	found, err := a.svc.Doctor(ctx, int(cmp.Or(q.Limit, 100)))
	if err != nil {
		return wire.Doctor{}, err
	}
	out := wire.Doctor{Stalled: make([]wire.Stalled, 0, len(found)), OverdueSeconds: controlplane.DoctorOverdue.Seconds()}
	for _, f := range found {
		out.Stalled = append(out.Stalled, wire.Stalled{ExecutionID: wire.ID(f.ExecutionID), Path: f.Path, Status: f.Status,
			UpdatedAt: wire.At(f.UpdatedAt), Active: f.Active, Stale: f.Stale, RunningChildren: f.RunningChildren, Reason: f.Reason})
	}
	return out, nil
}
