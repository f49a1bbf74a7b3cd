package noetlwire

import (
	"slices"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// StagedResult is the body of PUT /api/result/{execution_id} (NoETL's
// ResultPutRequest): its Rust worker stages a tool result over its inline
// budget (100 KiB) there, as {name: <step>, data: <the tool result>, scope:
// "execution", source_step: <step>}, and posts the reference it gets back in
// call.done's result.reference.
type StagedResult struct {
	Name       string
	Data       any
	Scope      string // step, execution (default), workflow, permanent
	SourceStep string
}

// StageScopes are NoETL's result scopes. Here every staged result lives as
// long as the result store keeps objects (its retention): the scope is
// recorded, not enforced.
var StageScopes = []string{"step", "execution", "workflow", "permanent"}

// ReadStagedResult reads a PUT /api/result body. NoETL's other fields (store,
// ttl, correlation, extracted, compress) are accepted and ignored: the server
// picks its one store.
func ReadStagedResult(m map[string]any) (StagedResult, error) {
	f := jsonx.Fields{M: m}
	var r StagedResult
	var err error
	if r.Name, err = f.Str("name", true); err != nil {
		return r, err
	}
	data, ok := m["data"]
	if !ok {
		return r, jsonx.Refuse("data", "required: the result to stage")
	}
	r.Data = data
	if r.Scope, err = f.Str("scope", false); err != nil {
		return r, err
	}
	if r.Scope == "" {
		r.Scope = "execution"
	}
	if !slices.Contains(StageScopes, r.Scope) {
		return r, jsonx.Refuse("scope", "%q: expected step, execution, workflow or permanent", r.Scope)
	}
	if r.SourceStep, err = f.Str("source_step", false); err != nil {
		return r, err
	}
	return r, nil
}

// ReadJSON reads a PUT /api/result body as a request type (ReadStagedResult).
func (r *StagedResult) ReadJSON(_ string, v any) (err error) {
	m, _ := v.(map[string]any)
	*r, err = ReadStagedResult(m)
	return err
}
