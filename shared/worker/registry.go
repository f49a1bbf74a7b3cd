package worker

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/wire"
)

// The worker keeps itself in the server's worker registry, as NoETL's
// workers do (controlplane/workers.go): it registers when it starts, beats
// every noetlwire.PoolHeartbeatInterval (a beat also extends the leases of
// the commands it holds), registers again when the server lost it (a 404),
// and deregisters when it stops. The registry is for people and NoETL's
// clients, not for running commands: a server that refuses it is logged and
// retried, never a reason to stop.

// registration is what the worker registers: NoETL's fields, runtime "go",
// its pool in labels.pool_name, and meta.started_at, which makes each process
// a new instance of its id.
func (w *Worker) registration(started time.Time) wire.PoolRegistration {
	host, _ := os.Hostname()
	return wire.PoolRegistration{Name: w.cfg.WorkerID, ComponentType: noetlwire.KindWorkerPool, Runtime: "go", Status: "ready",
		Capacity: w.cfg.Concurrency, PID: os.Getpid(), Hostname: host,
		Labels: wire.Object{"pool_name": w.cfg.Pool},
		Meta:   wire.Object{"started_at": started.UTC().Format(time.RFC3339Nano)}}
}

// keepRegistered runs the registration until the returned stop is called;
// stop waits for it, then deregisters (bounded by a few seconds).
func (w *Worker) keepRegistered(ctx context.Context, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	reg := w.registration(time.Now())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		registered := false
		backoff := time.Duration(0)
		for ctx.Err() == nil {
			var err error
			if registered {
				_, err = w.cfg.Client.WorkerHeartbeat(ctx, w.cfg.WorkerID)
				if client.StatusOf(err) == 404 {
					registered = false
					w.log.WarnContext(ctx, "the server lost this worker's registration; registering again")
					continue
				}
			} else if _, err = w.cfg.Client.RegisterWorker(ctx, reg); err == nil {
				registered = true
			}
			wait := every
			if err != nil && ctx.Err() == nil {
				backoff = min(max(2*backoff, time.Second), every)
				wait = backoff
				w.log.WarnContext(ctx, "worker registry call failed; retrying", "error", err.Error(), "retry_in", wait.String())
			} else {
				backoff = 0
			}
			sleep(ctx, wait)
		}
	}()
	return func() {
		cancel()
		wg.Wait()
		dctx, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		if err := w.cfg.Client.DeregisterWorker(dctx, w.cfg.WorkerID); err != nil {
			w.log.Warn("deregistering the worker failed; the registry expires it", "error", err.Error())
		}
	}
}
