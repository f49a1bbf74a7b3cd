package api

import (
	"context"
	"time"

	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/store"
	"github.com/noetl-go/noetl/shared/wire"
)

// POST /api/whatif {path, version | content, executions | select}: what the
// new version would have done on recorded executions (controlplane.WhatIf);
// pure: no tool runs, nothing is written.
func (a *API) whatIf(ctx context.Context, _ *call, r wire.WhatIfRequest) (wire.WhatIf, error) {
	req := controlplane.WhatIfRequest{Path: r.Path, Version: int(r.Version)}
	if r.Content != "" {
		text, err := a.playbookContentOf(r.Content)
		if err != nil {
			return wire.WhatIf{}, err
		}
		req.Content = text
	}
	for _, id := range r.Executions {
		req.IDs = append(req.IDs, int64(id))
	}
	if sel := r.Select; sel != nil {
		f := &store.ExecutionFilter{Path: sel.Path, Status: sel.Status, Limit: sel.Limit}
		now := time.Now()
		var err error
		if sel.Since != "" {
			if f.StartedSince, err = wire.SinceAgo("select.since", sel.Since, now); err != nil {
				return wire.WhatIf{}, err
			}
		}
		if sel.Until != "" {
			if f.StartedUntil, err = wire.SinceAgo("select.until", sel.Until, now); err != nil {
				return wire.WhatIf{}, err
			}
		}
		if !f.StartedSince.IsZero() && !f.StartedUntil.IsZero() && !f.StartedSince.Before(f.StartedUntil) {
			return wire.WhatIf{}, invalid("select.until", "must be after select.since (%s), got %s",
				f.StartedSince.Format(time.RFC3339), f.StartedUntil.Format(time.RFC3339))
		}
		req.Select = f
	}
	out, err := a.svc.WhatIf(ctx, req)
	if err != nil {
		return wire.WhatIf{}, err
	}
	return *out, nil
}
