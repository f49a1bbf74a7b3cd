package controlplane

import (
	"context"
	"strings"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/store"
)

// Execution variables (NoETL's /api/vars): here they are the execution's
// durable context, the values a playbook's set: ctx.x writes. Setting them
// appends a ctx.updated event, folded like the engine's own, so replay and
// time travel see every set, and later steps read them as NoETL's playbooks
// do: {{ ctx.x }}, {{ x }}, or the older {{ vars.x }}.

// MaxVariablesBytes bounds the values one request sets (their JSON).
const MaxVariablesBytes = 256 << 10

// SetVariables records variables of a running execution in one ctx.updated
// event (meta: the var_type, source and worker) and returns its id. Names
// follow the set-key rules; an ended execution is a conflict (R-R10: nothing
// would read them).
func (s *Service) SetVariables(ctx context.Context, executionID int64, v noetlwire.Variables, workerID string) (int64, error) {
	values := make(map[string]any, len(v.Values))
	for _, name := range v.Names() {
		path, err := playbook.ContextKey(name)
		if err != nil {
			return 0, Errorf(ErrInvalid, "variables: %v", err)
		}
		if _, dup := values[path]; dup {
			return 0, Errorf(ErrInvalid, "variables: %q is set twice", path)
		}
		values[path] = v.Values[name]
	}
	if b, err := jsonx.Marshal(values); err != nil {
		return 0, err
	} else if len(b) > MaxVariablesBytes {
		return 0, Errorf(ErrInvalid, "variables: %d bytes of JSON; one request sets at most %d (MaxVariablesBytes): keep large values in step results", len(b), MaxVariablesBytes)
	}
	meta := map[string]any{"source": "vars", "var_type": v.Type}
	if workerID != "" {
		meta["worker_id"] = workerID
	}
	var eventID int64
	err := s.withExecution(ctx, executionID, nil, func(t *txn, x *execution) error {
		if lifecycle.ExecutionEnded(x.row.Status) {
			return Errorf(ErrConflict, "execution %d is already %s: its variables can no longer be set", executionID, x.row.Status)
		}
		_, ev, err := t.advance(x, store.Event{EventType: eventtype.CtxUpdated, Status: "CONTEXT", NodeName: v.SourceStep,
			WorkerID: workerID, Context: map[string]any{"step": v.SourceStep, "values": values}, Meta: meta})
		if err != nil {
			return err
		}
		// A set that would take the state past its bound is refused here,
		// rather than failing the execution as a step's set would.
		if b, err := x.snap.Marshal(); err != nil {
			return err
		} else if len(b) > s.cfg.MaxStateBytes {
			return Errorf(ErrInvalid, "variables: the execution's state would grow to %d bytes, over the limit of %d (MaxStateBytes)", len(b), s.cfg.MaxStateBytes)
		}
		eventID = ev.EventID
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.log.InfoContext(ctx, "variables set", "execution_id", executionID, "names", v.Names(), "var_type", v.Type)
	return eventID, nil
}

// Variables returns an execution's variables (its durable context) and its
// workload, whose secret values the caller masks.
func (s *Service) Variables(ctx context.Context, executionID int64) (vars, workload map[string]any, err error) {
	row, snap, _, err := s.readExecution(ctx, executionID)
	if err != nil {
		return nil, nil, err
	}
	if snap.Ctx == nil {
		return map[string]any{}, row.Workload, nil
	}
	return snap.Ctx, row.Workload, nil
}

// Variable returns one variable (a dotted path reads inside an object) and
// the execution's workload; an unset one is ErrNotFound.
func (s *Service) Variable(ctx context.Context, executionID int64, name string) (value any, workload map[string]any, err error) {
	path, err := playbook.ContextKey(name)
	if err != nil {
		return nil, nil, Errorf(ErrInvalid, "var_name: %v", err)
	}
	vars, workload, err := s.Variables(ctx, executionID)
	if err != nil {
		return nil, nil, err
	}
	var cur any = vars
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, nil, Errorf(ErrNotFound, "variable %q is not set for execution %d", name, executionID)
		}
		if cur, ok = m[part]; !ok {
			return nil, nil, Errorf(ErrNotFound, "variable %q is not set for execution %d", name, executionID)
		}
	}
	return cur, workload, nil
}
