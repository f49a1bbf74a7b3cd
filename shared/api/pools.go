package api

import (
	"cmp"
	"context"
	"math"
	"strings"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/wire"
)

// The worker registry's routes, in NoETL's shapes (its Python server's
// runtime API): workers register, beat and deregister; users and NoETL's
// workers read the registry and the pool status. noetlwire reads what
// NoETL's workers send; controlplane/workers.go owns the lifecycle.

// POST /api/worker/pool/register: NoETL's registration (noetlwire.Registration).
func (a *API) registerPool(ctx context.Context, c *call, reg noetlwire.Registration) (wire.PoolRegistered, error) {
	w, err := a.svc.RegisterWorker(ctx, reg)
	if err != nil {
		return wire.PoolRegistered{}, err
	}
	return registered("ok", w), nil
}

// POST /api/worker/pool/heartbeat {name, registration?}: 404 for a worker
// the registry does not know, unless registration says who it is.
func (a *API) poolHeartbeat(ctx context.Context, c *call, h noetlwire.PoolHeartbeat) (wire.PoolRegistered, error) {
	w, recreated, err := a.svc.WorkerHeartbeat(ctx, h.Name, h.Registration)
	if err != nil {
		return wire.PoolRegistered{}, err
	}
	if recreated {
		return registered("recreated", w), nil
	}
	return registered("ok", w), nil
}

func registered(status string, w *controlplane.Worker) wire.PoolRegistered {
	return wire.PoolRegistered{Status: status, Name: w.Name, RuntimeID: wire.ID(w.RuntimeID), Kind: noetlwire.KindWorkerPool,
		Runtime: w.Runtime, ExpiresAt: wire.At(w.ExpiresAt), LeasesExtended: w.LeasesExtended}
}

// POST or DELETE /api/worker/pool/deregister {name}: the worker is offline.
// An unknown name is not an error (NoETL's Python server answers ok too).
func (a *API) deregisterPool(ctx context.Context, c *call, d noetlwire.Deregistration) (wire.PoolDeregistered, error) {
	found, err := a.svc.DeregisterWorker(ctx, d.Name)
	if err != nil {
		return wire.PoolDeregistered{}, err
	}
	return wire.PoolDeregistered{Status: "ok", Name: d.Name, Kind: noetlwire.KindWorkerPool, Found: found}, nil
}

// GET /api/worker/pools?runtime=&status=&pool=&limit=: the registry.
func (a *API) listWorkerPools(ctx context.Context, c *call, q workerPoolsQuery) (wire.WorkerPools, error) {
	// Runtimes and states are stored lower case (NoETL's server lowers them too).
	ws, err := a.svc.Workers(ctx, controlplane.WorkerQuery{Pool: q.Pool, Runtime: strings.ToLower(q.Runtime),
		State: strings.ToLower(q.Status), Limit: int(cmp.Or(q.Limit, MaxListLimit))})
	if err != nil {
		return wire.WorkerPools{}, err
	}
	out := wire.WorkerPools{Items: make([]wire.WorkerPool, len(ws)), Count: len(ws),
		Runtime: wire.OptString(q.Runtime), Status: wire.OptString(q.Status)}
	for i, w := range ws {
		item := wire.WorkerPool{Name: w.Name, RuntimeID: wire.ID(w.RuntimeID), Runtime: w.Info, Status: w.State,
			Capacity: w.Capacity, Labels: w.Labels, Heartbeat: wire.At(w.LastSeen), CreatedAt: wire.At(w.CreatedAt),
			UpdatedAt: wire.At(w.UpdatedAt), Pool: w.Pool, Alive: w.Alive, InFlight: w.InFlight,
			ExpiresAt: wire.At(w.ExpiresAt), Hostname: wire.OptString(w.Hostname)}
		if w.PID != 0 {
			pid := w.PID
			item.PID = &pid
		}
		out.Items[i] = item
	}
	return out, nil
}

// GET /api/pool/status: NoETL's pool telemetry. Its Python worker backs off
// when utilization passes 0.8, slots_available reaches 0 or requests wait,
// so the numbers are what this process can still take: connections not in
// use (pgx opens them lazily, so idle ones would understate it).
func (a *API) poolStatus(ctx context.Context, _ *call) (wire.PoolStatus, error) {
	p, err := a.svc.PoolStatus(ctx)
	if err != nil {
		return wire.PoolStatus{}, err
	}
	free := max(p.Pools.Max-p.Pools.Acquired, 0)
	util := 0.0
	if p.Pools.Max > 0 {
		util = math.Round(float64(p.Pools.Acquired)/float64(p.Pools.Max)*1e4) / 1e4
	}
	return wire.PoolStatus{PoolMax: p.Pools.Max, PoolSize: p.Pools.Total, PoolAvailable: free, Utilization: util,
		SlotsAvailable: free, Status: "ok",
		Workers: wire.Workers{Alive: p.Alive, Expired: p.Expired, Offline: p.Offline, Capacity: p.Capacity, InFlight: p.InFlight}}, nil
}
