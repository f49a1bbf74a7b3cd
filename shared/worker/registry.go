package worker

import (
	"context"
	"fmt"
	"net/http"
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
		refused := "" // the last refusal logged, so a lasting one is said once
		wait := time.Duration(0)
		for {
			if wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			// The registry shares the worker's one backoff for the server: while
			// it is away, another request probes it and this beat is skipped.
			tk, _, ok := w.server.admit()
			wait = every
			if !ok {
				continue
			}
			var err error
			if registered {
				_, err = w.cfg.Client.WorkerHeartbeat(ctx, w.cfg.WorkerID)
			} else if _, err = w.cfg.Client.RegisterWorker(ctx, reg); err == nil {
				registered = true
			}
			switch {
			case ctx.Err() != nil:
				w.server.abandoned(tk)
				return
			case client.Unavailable(err) || client.StatusOf(err) >= 500:
				w.server.failed(tk, fmt.Errorf("worker registry: %w", err), client.RetryAfterOf(err))
			case registered && client.StatusOf(err) == http.StatusNotFound:
				w.server.succeeded(tk)
				registered = false
				w.log.WarnContext(ctx, "the server lost this worker's registration; registering again")
				wait = 0
			case err != nil:
				w.server.succeeded(tk)
				if err.Error() != refused {
					refused = err.Error()
					w.log.WarnContext(ctx, "the server refused the worker registry call; retrying every beat", "error", refused, "retry_in", every.String())
				}
			default:
				w.server.succeeded(tk)
				refused = ""
			}
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
