package api

import (
	"context"

	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/wire"
)

// Execution variables in NoETL's routes (its /api/vars): they are the
// execution's durable context (controlplane/vars.go). Values are served
// masked like the execution view, except to the worker scope, which gets
// them as its steps do (the claim answer is never masked either).

// POST /api/vars/{execution_id}: NoETL's three body shapes (noetlwire.ReadVariables).
func (a *API) setVariables(ctx context.Context, c *call, p setVariablesParams, v noetlwire.Variables) (wire.VariablesSet, error) {
	id := int64(p.ExecutionID)
	eventID, err := a.svc.SetVariables(ctx, id, v, p.WorkerID)
	if err != nil {
		return wire.VariablesSet{}, err
	}
	return wire.VariablesSet{ExecutionID: wire.ID(id), VariablesSet: len(v.Values), VarNames: v.Names(), Status: "ok",
		EventID: wire.ID(eventID)}, nil
}

// maskVars masks a variables answer with the execution view's rules, except
// for the worker scope.
func (c *call) maskVars(workload map[string]any, v any) any {
	if c.auth.scopes.Has(config.ScopeWorker) && !c.auth.open {
		return v
	}
	return maskerFor(workload).Redact(v)
}

// GET /api/vars/{execution_id}: every variable.
func (a *API) listVariables(ctx context.Context, c *call, p executionIDPath) (wire.Variables, error) {
	id := int64(p.ExecutionID)
	vars, workload, err := a.svc.Variables(ctx, id)
	if err != nil {
		return wire.Variables{}, err
	}
	vars = c.maskVars(workload, vars).(map[string]any)
	out := wire.Variables{ExecutionID: wire.ID(id), Variables: make(map[string]wire.VariableValue, len(vars)), Count: len(vars)}
	for k, v := range vars {
		out.Variables[k] = wire.VariableValue{Value: wire.Value{V: v}}
	}
	return out, nil
}

// GET /api/vars/{execution_id}/{var_name}: one variable; 404 when unset.
func (a *API) getVariable(ctx context.Context, c *call, p variablePath) (wire.Variable, error) {
	id, name := int64(p.ExecutionID), p.Name
	v, workload, err := a.svc.Variable(ctx, id, name)
	if err != nil {
		return wire.Variable{}, err
	}
	v = c.maskVars(workload, map[string]any{name: v}).(map[string]any)[name] // the key rule sees the name
	return wire.Variable{ExecutionID: wire.ID(id), VarName: name, Value: wire.Value{V: v}, VarValue: wire.Value{V: v}}, nil
}
