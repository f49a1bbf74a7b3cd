package api

import (
	"context"

	"github.com/noetl-go/noetl/shared/noetlwire"
	"github.com/noetl-go/noetl/shared/wire"
)

// NoETL's result routes over the result store (controlplane/staged.go): its
// Rust worker stages a tool result over its inline budget with PUT and posts
// the reference; GET /api/result/resolve reads a reference back.

// PUT /api/result/{execution_id} {name, data, scope?, source_step?}.
func (a *API) stageResult(ctx context.Context, c *call, p executionIDPath, r noetlwire.StagedResult) (wire.StagedResult, error) {
	st, err := a.svc.StageResult(ctx, int64(p.ExecutionID), r)
	if err != nil {
		return wire.StagedResult{}, err
	}
	return wire.StagedResult{Ref: st.Ref, Store: st.Store, Scope: st.Scope, Bytes: st.Bytes, Sha256: st.Sha256}, nil
}

// GET /api/result/resolve?ref=: the stored value itself (NoETL's answer is
// the data, not an envelope); 404 when nothing is stored there.
func (a *API) resolveResult(ctx context.Context, c *call, q resolveQuery) (any, error) {
	ref := q.Ref
	if ref == "" {
		return nil, invalid("ref", "required: a noetl://execution/<execution_id>/result/<name>/<id> reference")
	}
	v, err := a.svc.ResolveResult(ctx, ref)
	if err != nil {
		return nil, err
	}
	return wire.Value{V: v}, nil
}
