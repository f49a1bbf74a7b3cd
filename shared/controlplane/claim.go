package controlplane

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/engine"
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

// Claim gives a command to a worker under a lease (events.md §4): one
// transaction, execution row then command row (R-L5).
func (s *Service) Claim(ctx context.Context, eventID int64, workerID string) (*CommandBody, error) {
	sh, c, err := s.commandByEvent(ctx, eventID)
	if err != nil {
		return nil, err
	}
	var (
		claimed  *CommandBody
		refusal  error
		tooEarly time.Duration
	)
	err = s.inTx(ctx, sh, func(tx pgx.Tx) ([]store.OutboxMessage, error) {
		x, err := s.lockExecution(ctx, tx, sh, c.ExecutionID)
		if err != nil {
			return nil, err
		}
		if x.row.Status == store.ExecutionCancelled {
			refusal = Errorf(ErrConflict, "Execution has been cancelled")
			return nil, nil
		}
		if terminal(x.row.Status) {
			refusal = Errorf(ErrConflict, "Execution is already %s", x.row.Status)
			return nil, nil
		}
		cmd, err := store.LockCommand(ctx, tx, c.CommandID)
		if err != nil {
			return nil, err
		}
		now, err := dbNow(ctx, tx)
		if err != nil {
			return nil, err
		}
		var outbox []store.OutboxMessage
		if (cmd.Status == store.CommandClaimed || cmd.Status == store.CommandRunning) && !cmd.LeaseExpiresAt.After(now) {
			// R-L4: a claim on an expired lease runs the sweep transition first.
			adv, err := s.expire(ctx, tx, x, cmd)
			if err != nil {
				return nil, err
			}
			outbox = adv.outbox
			if cmd, err = store.LockCommand(ctx, tx, c.CommandID); err != nil {
				return nil, err
			}
			// The retry is due from the expiry event's time, which is after now.
			if now, err = dbNow(ctx, tx); err != nil {
				return nil, err
			}
		}
		switch cmd.Status {
		case store.CommandClaimed, store.CommandRunning:
			if cmd.WorkerID == workerID {
				claimed = bodyOf(cmd) // idempotent: the same worker asks again
				return outbox, nil
			}
			refusal = Errorf(ErrConflict, "Command already claimed by %s", cmd.WorkerID)
			return outbox, nil
		case store.CommandPending:
		case store.CommandExpired:
			refusal = Errorf(ErrConflict, "command %s lease expired and no attempt is left", cmd.CommandID)
			return outbox, nil
		default:
			refusal = Errorf(ErrConflict, "command %s is %s", cmd.CommandID, cmd.Status)
			return outbox, nil
		}
		if cmd.AvailableAt.After(now) {
			tooEarly = cmd.AvailableAt.Sub(now) // R-L7
			return outbox, nil
		}
		cmd, err = store.ClaimCommand(ctx, tx, cmd.CommandID, workerID, s.lease)
		if err != nil {
			return nil, err
		}
		adv, err := s.advance(ctx, tx, x, store.Event{EventType: engine.EvCommandClaimed, NodeName: cmd.Step,
			Status: "CLAIMED", WorkerID: workerID, CommandID: cmd.CommandID,
			Meta: map[string]any{"command_id": cmd.CommandID, "attempt": int64(cmd.Attempt), "worker_id": workerID,
				"lease_expires_at": cmd.LeaseExpiresAt.UTC().Format(time.RFC3339Nano)}})
		if err != nil {
			return nil, err
		}
		claimed = bodyOf(cmd)
		return append(outbox, adv.outbox...), nil
	})
	switch {
	case err != nil:
		return nil, err
	case refusal != nil:
		return nil, refusal
	case tooEarly > 0:
		return nil, &TooEarlyError{After: tooEarly}
	}
	s.log.InfoContext(ctx, "command claimed", "execution_id", claimed.ExecutionID, "command_id", claimed.CommandID,
		"worker_id", workerID, "attempt", claimed.Attempt)
	return claimed, nil
}

// expire records a lease expiry and lets the engine decide: a retry (attempt + 1)
// or the step's failure (R-L3). The caller holds both locks.
func (s *Service) expire(ctx context.Context, tx pgx.Tx, x *execution, cmd store.Command) (*advanced, error) {
	if _, err := store.SetCommandStatus(ctx, tx, cmd.CommandID, store.CommandExpired); err != nil {
		return nil, err
	}
	return s.advance(ctx, tx, x, store.Event{EventType: engine.EvCommandExpired, NodeName: cmd.Step, Status: "EXPIRED",
		CommandID: cmd.CommandID, WorkerID: cmd.WorkerID,
		Meta: map[string]any{"command_id": cmd.CommandID, "attempt": int64(cmd.Attempt), "worker_id": cmd.WorkerID}})
}

// Heartbeat extends the lease of a command the worker holds (R-L1: no event).
func (s *Service) Heartbeat(ctx context.Context, eventID int64, workerID string, attempt int) (time.Time, error) {
	sh, c, err := s.commandByEvent(ctx, eventID)
	if err != nil {
		return time.Time{}, err
	}
	exec, err := store.GetExecution(ctx, sh.Pool(), c.ExecutionID)
	if err != nil {
		return time.Time{}, err
	}
	if terminal(exec.Status) {
		return time.Time{}, Errorf(ErrConflict, "execution %d is already %s", exec.ExecutionID, exec.Status)
	}
	until, err := store.ExtendLease(ctx, sh.Pool(), c.CommandID, workerID, attempt, s.lease)
	if errors.Is(err, store.ErrConflict) {
		return time.Time{}, Errorf(ErrConflict, "command %s is not held by %s (attempt %d); stop and drop the result", c.CommandID, workerID, attempt)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("heartbeat %s: %w", c.CommandID, err)
	}
	return until, nil
}
