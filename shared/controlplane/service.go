// Package controlplane is the control plane's domain layer: registering
// playbooks, starting executions, ingesting worker events with orchestration,
// claims and leases, cancel and finalize, the scheduled drain, and the read
// views. Every state change follows one path (advance): under the execution's
// row lock, append the event, fold it with the engine, write what the engine
// decided (events, commands, stored results, outbox rows) and the new snapshot,
// commit, then publish the notifications.
//
// The HTTP shape lives in shared/api; this package knows nothing of transports.
package controlplane

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/playbook/parser"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/store"
)

// Publisher delivers command notifications (NATS JetStream in production). A nil
// Publisher means notifications are disabled: no outbox rows are written.
type Publisher interface {
	Publish(ctx context.Context, subject, msgID string, data []byte) error
}

// Observer hears how long each orchestration step took: the engine's decision
// for one event, stored values it asked for included (not the writes).
type Observer interface {
	Orchestrated(eventType string, d time.Duration)
}

// Config configures a Service.
type Config struct {
	Store     *store.Store
	Publisher Publisher
	// ServerURL is what notifications tell workers to call back.
	ServerURL string
	// Lease is the claim lease (R-L1); default 60 s.
	Lease time.Duration
	// DeadlineGrace is added to a command's deadline before the sweeper fails it
	// with class timeout (R-L2); default 30 s. No lease lasts past it
	// (lifecycle.LeaseEnd).
	DeadlineGrace time.Duration
	// Reannounce is when a pending command nobody claimed is announced
	// again (lifecycle.ReannounceDue); default lifecycle.DefaultReannounce.
	Reannounce lifecycle.Reannounce
	Engine     engine.Config
	// Results reads worker results posted by reference (result_kind "ref",
	// worker.md §1). Nil means none are accepted: such events answer 422.
	Results resultstore.Store
	// Observer, when set, hears every orchestration's duration.
	Observer Observer
	// PlaybookCache bounds the parsed playbooks kept per process; default
	// 256. PlaybookCacheBytes bounds their estimated memory
	// (playbook.Playbook.Weight); default 128 MiB.
	PlaybookCache      int
	PlaybookCacheBytes int
	// IDBlock is how many event ids one sequence round trip mints; default 256.
	IDBlock int
	// SnapshotCacheBytes bounds the snapshots kept per process, decoded and
	// with their encodings (counted by the encoding's size); default 16 MiB.
	SnapshotCacheBytes int
	// MaxStateBytes bounds an execution's encoded state (its snapshot): a
	// step that takes it past the bound fails the execution, naming it;
	// default DefaultMaxStateBytes.
	MaxStateBytes int
	// WorkerTTL is how long a registered worker stays alive without a
	// register or pool heartbeat (workers.go); default DefaultWorkerTTL.
	WorkerTTL time.Duration
	// StagedGrace is how long a staged event waits for its execution's next
	// transaction before the drain enters it into the log (job_staged_events.go);
	// default DefaultStagedGrace.
	StagedGrace time.Duration
	// Clock is the time schedules fire by; default time.Now. Tests drive
	// it through daylight-saving changes.
	Clock func() time.Time
	// Schedules keeps an outside scheduler in step with the schedules
	// table (EventBridge Scheduler in AWS); nil: none (a local loop fires).
	Schedules ScheduleSync
	Logger    *slog.Logger
}

// DefaultMaxStateBytes is Config.MaxStateBytes's default: far above what
// playbooks keep in ctx, low enough that a step's cost stays bounded.
const DefaultMaxStateBytes = 8 << 20

// Service is the control plane. It is safe for concurrent use.
type Service struct {
	cfg   Config
	st    *store.Store
	eng   *engine.Engine
	log   *slog.Logger
	ids   *idPool
	books *playbookCache
	snaps *snapCache
	// fair is the fair-dispatch view: what waits, and each execution's burst.
	fair *dispatch
	// marks marks each shard's published outbox rows (marks.go).
	marks []*marker
	// limits are the lease rules (lifecycle.Limits): every lease and its
	// end are decided from them.
	limits     lifecycle.Limits
	reannounce lifecycle.Reannounce
	server     string
	// drained is each drain job's last error per shard (drain.go).
	drained drainFailures
}

// New returns a Service over an opened store.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("controlplane: Config.Store is required")
	}
	if cfg.Results != nil && cfg.Engine.PartRef == nil {
		cfg.Engine.PartRef = partRef // large commands go in parts (parts.go)
	}
	cfg.Lease = positiveOr(cfg.Lease, 60*time.Second)
	cfg.DeadlineGrace = positiveOr(cfg.DeadlineGrace, 30*time.Second)
	cfg.Reannounce.First = positiveOr(cfg.Reannounce.First, lifecycle.DefaultReannounce.First)
	if cfg.Reannounce.Max < cfg.Reannounce.First {
		cfg.Reannounce.Max = max(cfg.Reannounce.First, lifecycle.DefaultReannounce.Max)
	}
	cfg.PlaybookCache = positiveOr(cfg.PlaybookCache, 256)
	cfg.PlaybookCacheBytes = positiveOr(cfg.PlaybookCacheBytes, 128<<20)
	cfg.IDBlock = positiveOr(cfg.IDBlock, defaultIDBlock)
	cfg.SnapshotCacheBytes = positiveOr(cfg.SnapshotCacheBytes, 16<<20)
	cfg.MaxStateBytes = positiveOr(cfg.MaxStateBytes, DefaultMaxStateBytes)
	cfg.StagedGrace = positiveOr(cfg.StagedGrace, DefaultStagedGrace)
	cfg.WorkerTTL = positiveOr(cfg.WorkerTTL, DefaultWorkerTTL)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Service{
		cfg: cfg, st: cfg.Store, eng: engine.New(cfg.Engine), log: cfg.Logger,
		ids: newIDPool(cfg.IDBlock), books: newPlaybookCache(cfg.PlaybookCache, cfg.PlaybookCacheBytes), snaps: newSnapCache(cfg.SnapshotCacheBytes), fair: newDispatch(), marks: newMarkers(cfg.Store),
		limits: lifecycle.Limits{Lease: cfg.Lease, Grace: cfg.DeadlineGrace}, reannounce: cfg.Reannounce, server: cfg.ServerURL,
	}, nil
}

// positiveOr is v, or def when v is zero or negative: a setting left unset
// (or set below one) gets its default, as it always has.
func positiveOr[T ~int | ~int64](v, def T) T { return cmp.Or(max(v, 0), def) }

// Store is the store the service writes to.
func (s *Service) Store() *store.Store { return s.st }

// Lease is the configured claim lease.
func (s *Service) Lease() time.Duration { return s.limits.Lease }

// defaultIDBlock is how many ids one refill takes from a shard's sequence.
// Unused ids of a block are simply never used: the space is 2^53 per shard
// (R-I1).
const defaultIDBlock = 256

// idPool hands out event ids per shard from blocks taken in one round trip, so
// a transaction does not pay a sequence call per event. A refill runs on the
// caller's own transaction and never under the mutex: taking a second
// connection while holding the execution lock would deadlock once every
// pooled connection is inside such a transaction.
type idPool struct {
	block  int
	mu     sync.Mutex
	blocks map[int][]int64
}

func newIDPool(block int) *idPool { return &idPool{block: block, blocks: map[int][]int64{}} }

// take returns n ids of a shard; q is a connection or transaction on it.
func (p *idPool) take(ctx context.Context, q store.Querier, shard int, n int) ([]int64, error) {
	p.mu.Lock()
	if have := p.blocks[shard]; len(have) >= n {
		p.blocks[shard] = have[n:]
		p.mu.Unlock()
		return have[:n:n], nil
	}
	p.mu.Unlock()
	block, err := store.AllocateIDs(ctx, q, shard, max(p.block, n))
	if err != nil {
		return nil, fmt.Errorf("allocate ids on shard %d: %w", shard, err)
	}
	p.mu.Lock()
	p.blocks[shard] = append(p.blocks[shard], block[n:]...)
	p.mu.Unlock()
	return block[:n:n], nil
}

// idSource adapts the pool to engine.Inputs.NewID for one decision. The engine
// has no error path for ids, so a failed refill is remembered and reported
// after.
type idSource struct {
	ctx   context.Context
	q     store.Querier
	pool  *idPool
	shard int
	err   error
}

func (s *idSource) next() int64 {
	if s.err != nil {
		return 0
	}
	ids, err := s.pool.take(s.ctx, s.q, s.shard, 1)
	if err != nil {
		s.err = err
		return 0
	}
	return ids[0]
}

// playbook returns the parsed playbook of a catalog entry. Inside a
// transaction on a shard that is also the cluster database, the catalog is
// read through that transaction (tx): taking a second connection of the same
// pool while holding locks could wait for a connection that waits for us.
func (s *Service) playbook(ctx context.Context, tx store.Querier, sh *store.Shard, catalogID int64) (*playbook.Playbook, error) {
	if pb := s.books.get(catalogID); pb != nil {
		return pb, nil
	}
	var q store.Querier = s.st.Cluster()
	if tx != nil && sh != nil && sh.Pool() == s.st.Cluster() {
		q = tx
	}
	entry, err := store.GetCatalog(ctx, q, catalogID)
	if err != nil {
		return nil, fmt.Errorf("load playbook %d: %w", catalogID, err)
	}
	pb, diags := parser.Parse([]byte(entry.Content))
	if pb == nil {
		// Content stored before a rule tightened (the expansion limits): the entry is
		// invalid, not the server.
		return nil, Errorf(ErrInvalid, "catalog entry %d no longer parses: %v", catalogID, diags.Err())
	}
	s.books.put(catalogID, pb)
	return pb, nil
}

// PublisherFunc adapts a function to Publisher.
type PublisherFunc func(ctx context.Context, subject, msgID string, data []byte) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, subject, msgID string, data []byte) error {
	return f(ctx, subject, msgID, data)
}
