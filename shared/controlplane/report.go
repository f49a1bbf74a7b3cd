package controlplane

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/store"
)

// Report is what our worker posts after running commands (the fast path): the
// events of any number of executions — typically each command's
// command.completed or command.failed carrying its result, so no call.done
// request precedes it (R-R3) — and how many new commands it can start now.
type Report struct {
	WorkerID string
	// Pool is the pool the worker serves; commands of executions in another
	// pool are never given to it.
	Pool string
	// Take is how many commands the worker can start now.
	Take   int
	Events []EventInput
}

// ReportOutcome answers a Report: one entry per event, in order, and the
// commands given to the worker.
type ReportOutcome struct {
	Events []ReportedEvent
	// Commands were issued by the reported events and are already claimed and
	// started for the worker (eager dispatch): no notification, no claim
	// request.
	Commands []*CommandBody
}

// ReportedEvent is one event's outcome; Err is set when it was refused
// (invalid, unknown execution or command, fenced) and nothing of it happened
// but, for a fenced event, its ignored row.
type ReportedEvent struct {
	Ingested
	Err error
}

// Report ingests the events of many executions and hands the worker, within
// Take, the commands they issued (Temporal's eager dispatch: the caller that
// can run the next task gets it without a queue hop). Each shard's executions
// are handled in one transaction; if that fails, each execution is retried on
// its own, so one bad execution cannot fail the others.
func (s *Service) Report(ctx context.Context, r Report) (*ReportOutcome, error) {
	if r.Pool == "" {
		r.Pool = notify.PoolShared
	}
	out := &ReportOutcome{Events: make([]ReportedEvent, len(r.Events))}
	// shard → execution → indexes of its events, in request order.
	byShard := map[*store.Shard]map[int64][]int{}
	prepared := make([]store.Event, len(r.Events))
	for i, in := range r.Events {
		if in.WorkerID == "" {
			in.WorkerID = r.WorkerID
		}
		e, err := s.prepare(in)
		if err != nil {
			out.Events[i].Err = Errorf(ErrInvalid, "%v", err)
			continue
		}
		sh, err := s.st.ShardFor(in.ExecutionID)
		if err != nil {
			out.Events[i].Err = Errorf(ErrNotFound, "execution %d not found", in.ExecutionID)
			continue
		}
		prepared[i] = e
		if byShard[sh] == nil {
			byShard[sh] = map[int64][]int{}
		}
		byShard[sh][in.ExecutionID] = append(byShard[sh][in.ExecutionID], i)
	}
	budget := &takeBudget{left: r.Take}
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	for sh, execs := range byShard {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmds := s.reportShard(ctx, sh, r, execs, prepared, out.Events, budget)
			mu.Lock()
			out.Commands = append(out.Commands, cmds...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out, nil
}

// reportShard handles one shard's executions: together, or one by one when
// together fails. Outcomes go to results at their events' indexes.
func (s *Service) reportShard(ctx context.Context, sh *store.Shard, r Report, execs map[int64][]int,
	events []store.Event, results []ReportedEvent, budget *takeBudget) []*CommandBody {
	ids := make([]int64, 0, len(execs))
	for id := range execs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	cmds, err := s.reportTx(ctx, sh, r, ids, execs, events, results, budget)
	if err == nil {
		return cmds
	}
	if len(ids) == 1 {
		for _, i := range execs[ids[0]] {
			results[i] = ReportedEvent{Err: err}
		}
		return nil
	}
	s.log.WarnContext(ctx, "a report's transaction failed; retrying its executions one by one",
		"executions", len(ids), "error", err.Error())
	var all []*CommandBody
	for _, id := range ids {
		cmds, err := s.reportTx(ctx, sh, r, []int64{id}, execs, events, results, budget)
		if err != nil {
			for _, i := range execs[id] {
				results[i] = ReportedEvent{Err: err}
			}
			continue
		}
		all = append(all, cmds...)
	}
	return all
}

// reportTx ingests the events of ids in one transaction and claims, within
// the budget, the commands they issued for the reporting worker.
func (s *Service) reportTx(ctx context.Context, sh *store.Shard, r Report, ids []int64, execs map[int64][]int,
	events []store.Event, results []ReportedEvent, budget *takeBudget) (_ []*CommandBody, err error) {
	t, err := s.begin(ctx, sh)
	if err != nil {
		return nil, err
	}
	defer t.rollback()
	var mine []store.Event
	for _, id := range ids {
		for _, i := range execs[id] {
			mine = append(mine, events[i])
		}
	}
	if err := t.lock(lockSetOf(mine)); err != nil {
		return nil, err
	}
	outcomes := map[int]ReportedEvent{}
	for _, id := range ids {
		x, xerr := t.execution(id)
		for _, i := range execs[id] {
			if xerr != nil {
				outcomes[i] = ReportedEvent{Err: xerr}
				continue
			}
			res, err := t.ingest(x, events[i])
			var fenced *FencedError
			switch {
			case errors.As(err, &fenced), errors.Is(err, ErrNotFound), errors.Is(err, ErrInvalid):
				// Refused: nothing of it but a fenced event's ignored row.
				outcomes[i] = ReportedEvent{Ingested: res, Err: err}
			case err != nil:
				return nil, err
			default:
				outcomes[i] = ReportedEvent{Ingested: res}
			}
		}
	}
	taken := 0
	defer func() {
		if err != nil {
			budget.giveBack(taken)
		}
	}()
	var bodies []*CommandBody
	for _, id := range t.announce {
		k := t.cmds[id]
		x := t.execs[k.row.ExecutionID]
		if k.row.Status != store.CommandPending || x.row.Pool != r.Pool || k.row.AvailableAt.After(t.eventTime(x)) {
			continue
		}
		if !budget.take() {
			break
		}
		taken++
		if err := t.claim(x, k, r.WorkerID, true); err != nil {
			return nil, err
		}
		bodies = append(bodies, bodyOf(k.row))
	}
	if err := t.commit(); err != nil {
		return nil, err
	}
	for i, o := range outcomes {
		results[i] = o
	}
	return bodies, nil
}

// takeBudget is how many commands a report may still hand out, shared by its
// shards' transactions.
type takeBudget struct {
	mu   sync.Mutex
	left int
}

func (b *takeBudget) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left <= 0 {
		return false
	}
	b.left--
	return true
}

func (b *takeBudget) giveBack(n int) {
	b.mu.Lock()
	b.left += n
	b.mu.Unlock()
}
