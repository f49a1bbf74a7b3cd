package controlplane

import (
	"context"
	"errors"
	"time"

	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/store"
)

// The worker registry: who is alive and how busy (issue 18). This file owns a
// registration's lifecycle; the rows live in the cluster database
// (store/worker.go).
//
//   - A worker registers (POST /api/worker/pool/register) under its worker id,
//     the id it claims commands with. NoETL's Python worker registers again
//     every noetlwire.PoolHeartbeatInterval as its heartbeat; NoETL's Rust worker and
//     ours beat with POST /api/worker/pool/heartbeat {name}.
//   - Expiry: a worker is alive while its last register or heartbeat is younger
//     than the TTL (DefaultWorkerTTL: three missed beats). After that it is
//     expired; once it deregisters it is offline. A beat brings either back.
//     The state is derived when read, against the database's clock; nothing
//     has to run for a worker to expire. A row silent for workerRetention is
//     deleted by a later registration.
//   - Leases: a beat (a heartbeat, or a Python worker's re-registration by the
//     same process) extends the live leases of the commands the worker holds,
//     fenced by holder: the command's worker_id is the worker's name, and the
//     command was claimed since the registering process started (the
//     registration's instance). So a live pool keeps its commands, a dead one
//     loses them within one lease, and a worker id reused by a restarted
//     process does not keep alive what the dead process held.
//     Our worker's beats extend none (selfBeating): it heartbeats each
//     command it runs, so a command it holds but no longer runs (a result
//     it cannot deliver) ends with its lease. No beat keeps a lease past the
//     command's time limit (lifecycle.LeaseEnd).
//   - In flight: the commands a worker holds under a live lease, counted from
//     the command rows (not what the worker says): true whichever worker
//     generation it is, and zero within a lease of a crash.
const (
	// DefaultWorkerTTL is Config.WorkerTTL's default: three missed beats.
	DefaultWorkerTTL = 3 * noetlwire.PoolHeartbeatInterval
	// workerRetention is how long a silent worker's row is kept (the
	// dashboard shows it expired meanwhile).
	workerRetention = 24 * time.Hour
	// instanceSkew allows for the cluster and shard databases' clocks
	// differing when a claim is compared with a registration.
	instanceSkew = time.Second
)

// Worker states besides the status a live worker reports (ready, busy, …).
const (
	WorkerExpired = "expired"
	WorkerOffline = "offline"
)

// Worker is a registry row with what the registry derives from it.
type Worker struct {
	store.Worker
	// State is offline, expired, or the status the worker reported.
	State string
	Alive bool
	// InFlight counts the commands it holds under a live lease.
	InFlight int
	// ExpiresAt is when it expires without another beat.
	ExpiresAt time.Time
	// LeasesExtended is how many leases the beat that answered extended.
	LeasesExtended int64
}

func (s *Service) view(w store.Worker) *Worker {
	v := &Worker{Worker: w, State: w.Status, ExpiresAt: w.LastSeen.Add(s.cfg.WorkerTTL)}
	switch {
	case w.Status == WorkerOffline:
		v.State = WorkerOffline
	case !v.ExpiresAt.After(w.Now):
		v.State = WorkerExpired
	default:
		v.Alive = true
	}
	return v
}

// RegisterWorker records a registration. The same process registering again
// (NoETL's Python worker beats so) extends its commands' leases; a new
// process under a known name starts a new instance, whose beats never extend
// what the previous one held.
func (s *Service) RegisterWorker(ctx context.Context, r noetlwire.Registration) (*Worker, error) {
	row, fresh, err := store.UpsertWorker(ctx, s.st.Cluster(), store.Worker{Name: r.Name, Pool: r.Pool, Runtime: r.Runtime,
		Status: r.Status, Capacity: r.Capacity, Hostname: r.Hostname, PID: r.PID, Labels: r.Labels, Info: r.Info,
		Instance: r.Instance}, workerRetention)
	if err != nil {
		return nil, err
	}
	w := s.view(row)
	if fresh {
		s.log.InfoContext(ctx, "worker registered", "worker_id", r.Name, "pool", r.Pool, "runtime", r.Runtime)
		return w, nil
	}
	w.LeasesExtended = s.extendLeases(ctx, row)
	return w, nil
}

// WorkerHeartbeat is a pool heartbeat: the worker is seen now and its
// commands' leases are extended. A worker the registry does not know is
// ErrNotFound, unless the beat carries its registration (NoETL's
// auto-recreation), which is then recorded: recreated says so.
func (s *Service) WorkerHeartbeat(ctx context.Context, name string, reg *noetlwire.Registration) (*Worker, bool, error) {
	row, err := store.TouchWorker(ctx, s.st.Cluster(), name)
	if errors.Is(err, store.ErrNotFound) {
		if reg == nil {
			return nil, false, Errorf(ErrNotFound, "worker %s is not registered: register it first (POST /api/worker/pool/register)", name)
		}
		w, err := s.RegisterWorker(ctx, *reg)
		return w, true, err
	}
	if err != nil {
		return nil, false, err
	}
	w := s.view(row)
	w.LeasesExtended = s.extendLeases(ctx, row)
	return w, false, nil
}

// selfBeating are the runtimes whose workers heartbeat every command they
// run (ours, shared/worker): their pool beats extend no lease, so a lease
// lasts only while its command runs. NoETL's workers keep the pool beat's
// extension: the Rust worker heartbeats no command, and the Python worker's
// registration is its beat (issue 18).
var selfBeating = map[string]bool{"go": true}

// extendLeases extends the leases the worker's current instance holds, on
// every shard. A shard that fails is logged and skipped: the beat still
// counts, and the next one tries again well within the lease.
func (s *Service) extendLeases(ctx context.Context, w store.Worker) int64 {
	if selfBeating[w.Runtime] {
		return 0
	}
	var n int64
	for i := range s.st.NumShards() {
		k, err := store.ExtendHeldLeases(ctx, s.st.Shard(i).Pool(), w.Name, w.InstanceAt.Add(-instanceSkew), s.limits)
		if err != nil {
			s.log.WarnContext(ctx, "extending a worker's leases failed", "worker_id", w.Name, "shard", i, "error", err.Error())
			continue
		}
		n += k
	}
	return n
}

// DeregisterWorker marks a worker offline; false: the registry does not know
// it. The commands it still holds keep their leases until they lapse: a
// worker deregisters as it stops, and may still be reporting its last ones.
func (s *Service) DeregisterWorker(ctx context.Context, name string) (bool, error) {
	found, err := store.MarkWorkerOffline(ctx, s.st.Cluster(), name)
	if err == nil && found {
		s.log.InfoContext(ctx, "worker deregistered", "worker_id", name)
	}
	return found, err
}

// WorkerQuery selects workers: by pool, runtime and state ("alive" for every
// live state), at most Limit (1..1000).
type WorkerQuery struct {
	Pool, Runtime, State string
	Limit                int
}

// Workers lists registered workers by name with their in-flight counts.
func (s *Service) Workers(ctx context.Context, q WorkerQuery) ([]Worker, error) {
	state := q.State
	if state == "alive" {
		state = "" // filtered below: alive is every state but two
	}
	rows, err := store.ListWorkers(ctx, s.st.Cluster(), store.WorkerFilter{Pool: q.Pool, Runtime: q.Runtime, State: state,
		TTL: s.cfg.WorkerTTL, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]Worker, 0, len(rows))
	names := make([]string, 0, len(rows))
	for _, r := range rows {
		w := s.view(r)
		if q.State == "alive" && !w.Alive {
			continue
		}
		out = append(out, *w)
		names = append(names, r.Name)
	}
	if len(names) == 0 {
		return out, nil
	}
	held, err := s.held(ctx, names)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].InFlight = held[out[i].Name]
	}
	return out, nil
}

// held sums the commands each worker holds over every shard (names nil: every
// worker's).
func (s *Service) held(ctx context.Context, names []string) (map[string]int, error) {
	total := map[string]int{}
	read := func(ctx context.Context, q store.Querier) (map[string]int, error) {
		return store.HeldCounts(ctx, q, names)
	}
	err := overShards(ctx, s, read, func(m map[string]int) {
		for k, n := range m {
			total[k] += n
		}
	})
	if err != nil {
		return nil, err
	}
	return total, nil
}

// PoolStatus is NoETL's GET /api/pool/status: the answering process's
// database connection pools (NoETL's Python worker throttles its requests by
// them) and the registry's totals.
type PoolStatus struct {
	Pools store.PoolStats
	store.WorkerTotals
	InFlight int
}

// PoolStatus reads the connection pools, then the registry.
func (s *Service) PoolStatus(ctx context.Context) (*PoolStatus, error) {
	p := &PoolStatus{Pools: s.st.PoolStats()} // before the queries below take connections
	var err error
	if p.WorkerTotals, err = store.CountWorkers(ctx, s.st.Cluster(), s.cfg.WorkerTTL); err != nil {
		return nil, err
	}
	held, err := s.held(ctx, nil)
	if err != nil {
		return nil, err
	}
	for _, n := range held {
		p.InFlight += n
	}
	return p, nil
}
