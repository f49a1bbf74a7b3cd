package controlplane

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/noetl-go/noetl/shared/engine"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
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
	// Take is how many commands the worker can start now, besides Claims.
	Take   int
	Events []EventInput
	// Claims are commands the worker heard of (their command.issued event
	// ids, from NATS) and claims here, starting each at once as Claim does
	// with start.
	Claims []int64
}

// ReportOutcome answers a Report: one entry per event and per claim, in
// order, and the commands given to the worker.
type ReportOutcome struct {
	Events []ReportedEvent
	Claims []ClaimOutcome
	// Commands are claimed and started for the worker: those of its Claims
	// that it got, those the reported events issued (eager dispatch: no
	// notification, no claim request), and deferred commands of other
	// executions in the slots of those that yielded or to spare
	// (dispatch.go).
	Commands []*CommandBody
}

// ClaimOutcome is one claim's: Err nil means its command is in Commands; else
// why not (ErrNotFound, ErrConflict, *TooEarlyError).
type ClaimOutcome struct {
	EventID int64
	Err     error
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
// can run the next task gets it without a queue hop), or, under load, the
// longest-deferred commands of others (fair dispatch). Each shard's executions
// are handled in one transaction; if that fails, each execution is retried on
// its own, so one bad execution cannot fail the others.
func (s *Service) Report(ctx context.Context, r Report) (*ReportOutcome, error) {
	if r.Pool == "" {
		r.Pool = notify.PoolShared
	}
	out := &ReportOutcome{Events: make([]ReportedEvent, len(r.Events)), Claims: make([]ClaimOutcome, len(r.Claims))}
	// shard → execution → indexes of its events, in request order; shard →
	// indexes of its claims.
	byShard := map[*store.Shard]map[int64][]int{}
	claims := map[*store.Shard][]int{}
	for i, id := range r.Claims {
		out.Claims[i].EventID = id
		sh, err := s.st.ShardFor(id)
		if err != nil {
			out.Claims[i].Err = Errorf(ErrNotFound, "command %d not found", id)
			continue
		}
		claims[sh] = append(claims[sh], i)
		if byShard[sh] == nil {
			byShard[sh] = map[int64][]int{}
		}
	}
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
	yields, served := s.yieldsOf(r, byShard)
	budget := &takeBudget{left: r.Take}
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	runShard := func(sh *store.Shard, execs map[int64][]int) {
		cmds := s.reportShard(ctx, sh, r, report{execs: execs, claims: claims[sh], served: served[sh], yields: yields}, prepared, out, budget)
		mu.Lock()
		out.Commands = append(out.Commands, cmds...)
		mu.Unlock()
	}
	for sh, execs := range byShard {
		if len(byShard) == 1 {
			runShard(sh, execs) // no goroutine to hand the work to and wait for
			break
		}
		wg.Go(func() { runShard(sh, execs) })
	}
	wg.Wait()
	return out, unavailable(out)
}

// unavailable is the error of a report none of whose events and claims could
// be handled because the database is away (store.Transient): the request
// as a whole then fails with it (503 with Retry-After), rather than
// answering each item so.
func unavailable(out *ReportOutcome) error {
	errs := make([]error, 0, len(out.Events)+len(out.Claims))
	for _, e := range out.Events {
		errs = append(errs, e.Err)
	}
	for _, c := range out.Claims {
		errs = append(errs, c.Err)
	}
	for _, err := range errs {
		if !store.Transient(err) {
			return nil
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// report is one shard's part of a Report: its executions' events and its
// claims, by index.
type report struct {
	execs  map[int64][]int
	claims []int
	// served are deferred commands to hand out (yieldsOf); yields, the
	// executions whose next command is deferred.
	served []deferredCmd
	yields map[int64]bool
}

// reportShard handles one shard's part: together, or piece by piece (each
// execution, each claim) when together fails. Outcomes go to out at their
// indexes.
func (s *Service) reportShard(ctx context.Context, sh *store.Shard, r Report, part report, events []store.Event,
	out *ReportOutcome, budget *takeBudget) []*CommandBody {
	ids := make([]int64, 0, len(part.execs))
	for id := range part.execs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	cmds, err := s.reportTx(ctx, sh, r, ids, part, events, out, budget)
	if err == nil {
		return cmds
	}
	if len(part.served) > 0 && !store.Transient(err) {
		// Without the deferred commands it was handed (announced instead).
		part.served = nil
		if len(ids)+len(part.claims) == 0 {
			return nil
		}
		if cmds, err = s.reportTx(ctx, sh, r, ids, part, events, out, budget); err == nil {
			return cmds
		}
	}
	fail := func(ids []int64, claims []int, err error) {
		for _, id := range ids {
			for _, i := range part.execs[id] {
				out.Events[i] = ReportedEvent{Err: err}
			}
		}
		for _, i := range claims {
			out.Claims[i].Err = err
		}
	}
	if len(ids)+len(part.claims) <= 1 || store.Transient(err) {
		// One piece, or the database is away: piece by piece would only
		// fail again.
		fail(ids, part.claims, err)
		return nil
	}
	s.log.WarnContext(ctx, "a report's transaction failed; retrying its executions and claims one by one",
		"executions", len(ids), "claims", len(part.claims), "error", err.Error())
	var all []*CommandBody
	piece := report{execs: part.execs, yields: part.yields} // what was served is announced
	for _, id := range ids {
		cmds, err := s.reportTx(ctx, sh, r, []int64{id}, piece, events, out, budget)
		if err != nil {
			fail([]int64{id}, nil, err)
			continue
		}
		all = append(all, cmds...)
	}
	for _, i := range part.claims {
		cmds, err := s.reportTx(ctx, sh, r, nil, report{claims: []int{i}}, events, out, budget)
		if err != nil {
			fail(nil, []int{i}, err)
			continue
		}
		all = append(all, cmds...)
	}
	return all
}

// reportTx ingests the events of ids and takes the claims of part in one
// transaction, then claims, within the budget, the commands the events
// issued for the reporting worker.
func (s *Service) reportTx(ctx context.Context, sh *store.Shard, r Report, ids []int64, part report,
	events []store.Event, out *ReportOutcome, budget *takeBudget) (_ []*CommandBody, err error) {
	var mine []store.Event
	for _, id := range ids {
		for _, i := range part.execs[id] {
			mine = append(mine, events[i])
		}
	}
	ls := lockSetOf(mine)
	for _, i := range part.claims {
		ls.IssuedEventIDs = append(ls.IssuedEventIDs, r.Claims[i])
	}
	// The served commands: those this txn handed out or found gone (claimed
	// elsewhere, ended) leave the queue once it commits; the rest go back.
	// When it fails, they are announced rather than served again: one of
	// them may be what fails it (reportShard retries without them).
	handedServed := map[int64]bool{}
	defer func() {
		if err != nil {
			if len(part.served) > 0 {
				go s.announceDeferred(slices.Clone(part.served))
			}
			return
		}
		var back []deferredCmd
		for _, c := range part.served {
			if handedServed[c.ev] {
				s.fair.claimed(r.Pool, c.ev) // handed out, or gone: waits no more
				continue
			}
			back = append(back, c)
		}
		if s.fair.putBack(r.Pool, back) {
			time.AfterFunc(idleFor, s.announceStranded)
		}
	}()
	for _, c := range part.served {
		ls.IssuedEventIDs = append(ls.IssuedEventIDs, c.ev)
	}
	outcomes := map[int]ReportedEvent{}
	claimed := map[int]error{}
	var bodies []*CommandBody
	taken, takenBytes := 0, 0
	defer func() {
		if err != nil {
			budget.giveBack(taken, takenBytes)
		}
	}()
	var last *txn // the run that committed
	body := func(t *txn) error {
		// From scratch: withTx may run this again, or run it after an
		// assumed txn that did not commit.
		last = t
		clear(outcomes)
		clear(claimed)
		bodies = nil
		budget.giveBack(taken, takenBytes)
		taken, takenBytes = 0, 0
		for _, id := range ids {
			x, xerr := t.execution(id)
			for _, i := range part.execs[id] {
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
					return err
				default:
					outcomes[i] = ReportedEvent{Ingested: res}
				}
				if outcomes[i].Err != nil && t.assumed {
					return errAssumption // refusals are answered from what the lock reads
				}
			}
		}
		// The claimed commands, as the lock read them or the assumption took
		// them from the cache.
		for _, i := range part.claims {
			k := t.issuedBy(r.Claims[i])
			if k == nil {
				if t.assumed {
					return errAssumption
				}
				claimed[i] = Errorf(ErrNotFound, "command %d not found", r.Claims[i])
				continue
			}
			x, err := t.execution(k.row.ExecutionID)
			if err != nil {
				claimed[i] = err
				continue
			}
			size := commandBytes(k.row)
			if !budget.fits(size) {
				// The answer is full: the worker claims it again in a later report.
				claimed[i] = &TooEarlyError{After: time.Second}
				continue
			}
			takenBytes += size
			body, refusal, err := t.claimStarted(x, k, r.WorkerID)
			if err != nil {
				return err
			}
			claimed[i] = refusal
			if body == nil {
				budget.giveBack(0, size)
				takenBytes -= size
				continue
			}
			bodies = append(bodies, body)
		}
		if err := t.handBackHeld(ids, part.execs, outcomes, r.WorkerID, budget, &bodies, &taken, &takenBytes); err != nil {
			return err
		}
		// The deferred commands served here, claimed and started for the
		// worker as its own claims are; one no longer pending (claimed
		// meanwhile, by this report's claims too, or ended) is dropped from
		// the queue.
		clear(handedServed)
		for _, c := range part.served {
			k := t.issuedBy(c.ev)
			if k == nil && t.assumed {
				return errAssumption
			}
			var x *execution
			if k != nil && k.row.Status == store.CommandPending {
				x = t.execs[k.row.ExecutionID]
			}
			if x == nil {
				handedServed[c.ev] = true // gone
				continue
			}
			size := commandBytes(k.row)
			if !budget.take(size) {
				break
			}
			taken++
			takenBytes += size
			body, _, err := t.claimStarted(x, k, r.WorkerID)
			if err != nil {
				return err
			}
			handedServed[c.ev] = true
			if body == nil {
				budget.giveBack(1, size)
				taken--
				takenBytes -= size
				continue
			}
			bodies = append(bodies, body)
		}
		for _, id := range t.announce {
			k := t.cmds[id]
			x := t.execs[k.row.ExecutionID]
			// New commands only: a retried one was read without its payload,
			// and announcing it is what its backoff expects (R-L7).
			if !k.isNew || x.row.Pool != r.Pool || !lifecycle.Claimable(k.row.Lifecycle(), lifecycle.Clock{Now: t.eventTime(x)}) {
				continue
			}
			if part.yields[x.row.ExecutionID] {
				t.yielded = append(t.yielded, x.row.ExecutionID)
				t.deferred = append(t.deferred, id)
				continue // its burst is spent while others wait: deferred (dispatch.go)
			}
			size := commandBytes(k.row)
			if !budget.take(size) {
				break // a command that does not fit goes by notification and claim
			}
			taken++
			takenBytes += size
			if err := t.claim(x, k, r.WorkerID, true); err != nil {
				return err
			}
			t.handed = append(t.handed, x.row.ExecutionID)
			bodies = append(bodies, bodyOf(k.row))
		}
		return nil
	}
	if err := s.withAssumedOrLocked(ctx, sh, ls, body); err != nil {
		return nil, err
	}
	// The commit may have failed an execution (its state past
	// MaxStateBytes, txn.encodeState), cancelling what it had handed out.
	if last != nil {
		bodies = slices.DeleteFunc(bodies, func(b *CommandBody) bool {
			k := last.cmds[b.CommandID]
			return k != nil && k.row.Status == store.CommandCancelled
		})
	}
	for i, o := range outcomes {
		out.Events[i] = o
	}
	for i, err := range claimed {
		out.Claims[i].Err = err
	}
	return bodies, nil
}

// handBackHeld answers a report posted again after its answer was lost (a
// connection dropped after COMMIT, a 504 while the commit ran, a COMMIT in
// doubt): its events come back duplicates and issue nothing, and the
// commands the lost answer carried are held by this worker, which never got
// them. So the commands of those executions that the worker holds, issued
// after the duplicate event, are handed out again, within the budget (our
// worker runs a command handed twice once). Only a duplicate costs the read.
func (t *txn) handBackHeld(ids []int64, execs map[int64][]int, outcomes map[int]ReportedEvent, workerID string,
	budget *takeBudget, bodies *[]*CommandBody, taken, takenBytes *int) error {
	var after map[int64]int64 // execution → its first duplicate event's id
	var dup []int64
	for _, id := range ids {
		for _, i := range execs[id] {
			o := outcomes[i]
			if o.Err != nil || !o.Duplicate {
				continue
			}
			if after == nil {
				after = map[int64]int64{}
			}
			if a, ok := after[id]; !ok {
				dup = append(dup, id)
				after[id] = o.EventID
			} else {
				after[id] = min(a, o.EventID)
			}
		}
	}
	if len(dup) == 0 {
		return nil
	}
	if t.assumed {
		return errAssumption // a duplicate is answered from what the lock reads
	}
	held, err := store.LockHeldCommands(t.ctx, t.tx, dup, workerID)
	if err != nil {
		return err
	}
	for _, c := range held {
		if t.cmds[c.CommandID] != nil || c.IssuedEventID <= after[c.ExecutionID] {
			continue // named by this report (an event's, a claim's), or held since before the event
		}
		k := t.adoptCommand(c)
		size := commandBytes(k.row)
		if !budget.take(size) {
			break
		}
		*taken++
		*takenBytes += size
		body, _, err := t.claimStarted(t.execs[c.ExecutionID], k, workerID)
		if err != nil {
			return err
		}
		if body == nil { // its lease ended: it runs again as its retry says
			budget.giveBack(1, size)
			*taken--
			*takenBytes -= size
			continue
		}
		*bodies = append(*bodies, body)
	}
	return nil
}

// claimStarted claims k for our worker and starts it (claimOne); in an
// assumed txn a refusal is errAssumption, since refusals are answered from
// what the lock reads.
func (t *txn) claimStarted(x *execution, k *command, workerID string) (*CommandBody, error, error) {
	body, refusal, err := t.claimOne(x, k, workerID, true)
	if err == nil && refusal != nil && t.assumed {
		err = errAssumption
	}
	return body, refusal, err
}

// takeBudget is how many commands a report may still hand out, and how many
// bytes of commands its answer carries so far, shared by its shards'
// transactions. An answer carries commands up to answerCommandBytes, so it
// stays under what the worker's client reads (client.MaxAnswerBytes) and
// what a Lambda may answer; its first command always goes (the engine keeps
// each under engine.MaxCommandBytes).
type takeBudget struct {
	mu    sync.Mutex
	left  int
	bytes int
}

// answerCommandBytes bounds the commands of one report's answer.
const answerCommandBytes = engine.MaxCommandBytes

// take reserves one of the commands and size bytes for one handed out.
func (b *takeBudget) take(size int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left <= 0 || !b.fitsLocked(size) {
		return false
	}
	b.left--
	b.bytes += size
	return true
}

// fits reserves size bytes for a claimed command.
func (b *takeBudget) fits(size int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.fitsLocked(size) {
		return false
	}
	b.bytes += size
	return true
}

func (b *takeBudget) fitsLocked(size int) bool {
	return b.bytes == 0 || b.bytes+size <= answerCommandBytes
}

func (b *takeBudget) giveBack(n, bytes int) {
	b.mu.Lock()
	b.left += n
	b.bytes -= bytes
	b.mu.Unlock()
}

// commandBytes is a command's payload size as JSON, as its answer carries it.
func commandBytes(c store.Command) int {
	b, _ := jsonx.Marshal(c.Context)
	return len(b) + len(c.CommandID) + len(c.Step) + 256 // and its other fields
}
