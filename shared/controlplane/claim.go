package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/store"
)

// CommandBody is a command as workers receive it (NoETL's claim response shape,
// plus lease_expires_at and attempt).
type CommandBody struct {
	EventID        int64
	ExecutionID    int64
	CommandID      string
	Step           string
	Action         string // tool kind; task_sequence for pipelines
	Context        map[string]any
	Meta           map[string]any
	Status         string // the command row's status
	Attempt        int
	WorkerID       string
	LeaseExpiresAt time.Time
}

func bodyOf(c store.Command) *CommandBody {
	meta := maps.Clone(c.Meta)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["attempt"], meta["attempts"] = int64(c.Attempt), int64(c.Attempt)
	return &CommandBody{EventID: c.IssuedEventID, ExecutionID: c.ExecutionID, CommandID: c.CommandID, Step: c.Step,
		Action: c.ToolKind, Context: c.Context, Meta: meta, Status: c.Status, Attempt: c.Attempt,
		WorkerID: c.WorkerID, LeaseExpiresAt: c.LeaseExpiresAt}
}

// commandByEvent finds the command a command.issued event created; the event id
// names its shard (R-I1), so no shard is scanned.
func (s *Service) commandByEvent(ctx context.Context, eventID int64) (*store.Shard, store.Command, error) {
	sh, err := s.st.ShardFor(eventID)
	if err != nil {
		return nil, store.Command{}, Errorf(ErrNotFound, "command %d not found", eventID)
	}
	c, err := store.GetCommandByIssuedEvent(ctx, sh.Pool(), eventID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, c, Errorf(ErrNotFound, "command %d not found", eventID)
	}
	return sh, c, err
}

// Command returns a command without claiming it.
func (s *Service) Command(ctx context.Context, eventID int64) (*CommandBody, error) {
	_, c, err := s.commandByEvent(ctx, eventID)
	if err != nil {
		return nil, err
	}
	return bodyOf(c), nil
}

// Claim gives a command to a worker under a lease (events.md §4) in one
// transaction that locks the execution row, then the command row (R-L5).
// start says the worker starts the command at once (our worker): the claim
// records the start too, so no command.started request follows. A claim of
// a pending command this process issued is assumed (assume.go): one round
// trip, as a claim in our worker's report; any refusal is answered from
// what the lock path reads.
func (s *Service) Claim(ctx context.Context, eventID int64, workerID string, start bool) (*CommandBody, error) {
	sh, err := s.st.ShardFor(eventID)
	if err != nil {
		return nil, Errorf(ErrNotFound, "command %d not found", eventID)
	}
	var claimed *CommandBody
	var refusal error
	ls := &store.LockSet{IssuedEventIDs: []int64{eventID}}
	// The execution is known when this process issued the command (the
	// common case: the previous step's completion came here): locked by id
	// too, its state is left out of the lock when cached (txn.lock).
	if id, ok := s.snaps.executionOf(eventID); ok {
		ls.Executions = []int64{id}
	}
	body := func(t *txn) error {
		claimed, refusal = nil, nil // from scratch: the lock path may run it after the assumed txn
		k := t.issuedBy(eventID)
		if k == nil {
			if t.assumed {
				return errAssumption
			}
			return Errorf(ErrNotFound, "command %d not found", eventID)
		}
		x, err := t.execution(k.row.ExecutionID)
		if err != nil {
			return err
		}
		// A refusal commits too: what it did first (a lapsed lease's
		// expiry, R-L4) stands.
		claimed, refusal, err = t.claimOne(x, k, workerID, start)
		if err == nil && refusal != nil && t.assumed {
			return errAssumption
		}
		return err
	}
	if err := s.withAssumedOrLocked(ctx, sh, ls, body); err != nil {
		return nil, err
	}
	if refusal != nil {
		return nil, refusal
	}
	s.log.InfoContext(ctx, "command claimed", "execution_id", claimed.ExecutionID, "command_id", claimed.CommandID,
		"worker_id", workerID, "attempt", claimed.Attempt)
	return claimed, nil
}

// issuedBy is the command the txn holds that command.issued event eventID
// created, as the lock read it or the assumption took it from the cache.
func (t *txn) issuedBy(eventID int64) *command {
	for _, k := range t.cmds {
		if k.row.IssuedEventID == eventID {
			return k
		}
	}
	return nil
}

// claimOne decides a claim under both locks: the body to answer, or why not.
// start is our worker's claim, which starts the command at once: its holder
// may claim it again (a report re-posted after a lost answer). Any other claim
// of a held command is refused active_claim, its holder's too: NoETL's worker
// subscribes twice by default (legacy and shared consumers both receive a
// notification) and must run the command once.
func (t *txn) claimOne(x *execution, k *command, workerID string, start bool) (*CommandBody, error, error) {
	if x.row.Status == lifecycle.ExecutionCancelled {
		return nil, refuse(ClaimExecutionCancelled, "Execution has been cancelled"), nil
	}
	if lifecycle.ExecutionEnded(x.row.Status) {
		return nil, refuse(ClaimTerminal, "Execution is already %s", x.row.Status), nil
	}
	if lifecycle.Ended(k.row.Lifecycle(), t.clock(), t.s.limits) {
		// R-L4: a claim on a lease that ended runs the sweep transition first.
		if _, err := t.endLease(x, k); err != nil {
			return nil, nil, err
		}
	}
	switch {
	case lifecycle.Held(k.row.Lifecycle()):
		if k.row.WorkerID == workerID && start {
			return bodyOf(k.row), nil, nil // idempotent: our worker asks again
		}
		if k.row.WorkerID == workerID {
			return nil, refuse(ClaimActive, "Command is being claimed: %s already holds it (a second notification of one command)", workerID), nil
		}
		return nil, refuse(ClaimActive, "Command already claimed by %s", k.row.WorkerID), nil
	case k.row.Status == store.CommandPending:
	case k.row.Status == store.CommandExpired:
		return nil, refuse(ClaimTerminal, "command %s lease expired and no attempt is left", k.row.CommandID), nil
	default:
		return nil, refuse(ClaimTerminal, "command %s is %s", k.row.CommandID, k.row.Status), nil
	}
	// The retry is due from the expiry event's time, which may be after now.
	if at := t.eventTime(x); !lifecycle.Claimable(k.row.Lifecycle(), lifecycle.Clock{Now: at}) {
		return nil, &TooEarlyError{After: k.row.AvailableAt.Sub(at)}, nil // R-L7
	}
	if err := t.claim(x, k, workerID, start); err != nil {
		return nil, nil, err
	}
	return bodyOf(k.row), nil, nil
}

// endLease is the sweep transition of a held command whose lease ended
// (lifecycle.Ended), for the lease job and a claim on it (R-L4): past its
// deadline and grace it fails with class timeout (R-L2), otherwise it
// expires; the engine then applies the step's retry policy (R-L3). The txn
// holds both locks.
func (t *txn) endLease(x *execution, k *command) (timedOut bool, err error) {
	c := k.row
	meta := map[string]any{"command_id": c.CommandID, "attempt": int64(c.Attempt), "worker_id": c.WorkerID}
	ev := store.Event{EventType: eventtype.CommandExpired, NodeName: c.Step, Status: "EXPIRED", CommandID: c.CommandID,
		WorkerID: c.WorkerID, Meta: meta}
	if timedOut = lifecycle.TimedOut(c.Lifecycle(), t.clock(), t.s.limits); timedOut {
		meta["class"] = playbook.ClassTimeout
		ev.EventType, ev.Status = eventtype.CommandFailed, "FAILED"
		ev.Error = fmt.Sprintf("the command ran past its timeout of %ds", c.TimeoutSeconds)
	}
	status := store.CommandExpired
	if timedOut {
		status = store.CommandFailed
	}
	// Written whatever the engine makes of the event: the row leaves its
	// holder now.
	t.changeCommand(c.CommandID, store.CommandChange{Status: status}, lifecycle.Sweep)
	t.cause = lifecycle.Sweep
	defer func() { t.cause = "" }()
	_, _, err = t.advance(x, ev)
	return timedOut, err
}

// clock is what the lifecycle's guards compare with in this txn.
func (t *txn) clock() lifecycle.Clock {
	return lifecycle.Clock{Now: t.now, ReachableSince: t.reachableSince}
}

// Heartbeat extends the lease of a command the worker holds (R-L1: no event),
// named by its command.issued event.
func (s *Service) Heartbeat(ctx context.Context, eventID int64, workerID string, attempt int) (time.Time, error) {
	sh, c, err := s.commandByEvent(ctx, eventID)
	if err != nil {
		return time.Time{}, err
	}
	return s.extendLease(ctx, sh, c.ExecutionID, c.CommandID, workerID, attempt)
}

// extendLease is the one lease extension, fenced by holder and attempt (0: any).
func (s *Service) extendLease(ctx context.Context, sh *store.Shard, executionID int64, commandID, workerID string, attempt int) (time.Time, error) {
	exec, err := store.GetExecution(ctx, sh.Pool(), executionID)
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, Errorf(ErrNotFound, "execution %d not found", executionID)
	}
	if err != nil {
		return time.Time{}, err
	}
	if lifecycle.ExecutionEnded(exec.Status) {
		return time.Time{}, Errorf(ErrConflict, "execution %d is already %s", exec.ExecutionID, exec.Status)
	}
	until, err := store.ExtendLease(ctx, sh.Pool(), commandID, workerID, attempt, s.limits)
	switch {
	case errors.Is(err, store.ErrConflict):
		return time.Time{}, Errorf(ErrConflict, "command %s is not held by %s (attempt %d), or ran past its time limit; stop and drop the result", commandID, workerID, attempt)
	case errors.Is(err, store.ErrNotFound):
		return time.Time{}, Errorf(ErrNotFound, "command %s not found", commandID)
	case err != nil:
		return time.Time{}, fmt.Errorf("heartbeat %s: %w", commandID, err)
	}
	return until, nil
}
