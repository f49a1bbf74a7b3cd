package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/tools"
	"github.com/noetl-go/noetl/shared/wire"
)

// Children starts and waits for child executions over the API, for the playbook
// tool (R-P7). Children land on their parent's shard (R-I3).
type Children struct {
	Client *client.Client
	// Poll is how often Wait asks for the child's status; default 500 ms.
	Poll time.Duration
}

// Start starts a child execution.
func (c *Children) Start(ctx context.Context, req tools.ChildRequest) (string, error) {
	// A key of its own makes the start safe to send again: an answer lost
	// after the server started the child (a dropped connection, a 502)
	// is asked again and answers that child, not a second one.
	key := make([]byte, 16)
	rand.Read(key)
	r := wire.ExecuteRequest{Path: req.Path, Payload: req.Payload, Pool: req.ExecutionPool, IdempotencyKey: "child-" + hex.EncodeToString(key)}
	if req.CatalogID != "" {
		id, err := strconv.ParseInt(req.CatalogID, 10, 64)
		if err != nil {
			return "", fmt.Errorf("catalog_id %q: %w", req.CatalogID, err)
		}
		r.CatalogID = wire.ID(id)
	}
	if req.Version != "" {
		var err error
		n, err := strconv.Atoi(req.Version)
		if err != nil {
			return "", fmt.Errorf("version %q: %w", req.Version, err)
		}
		r.Version = wire.Version(n)
	}
	if req.ParentExecutionID != "" {
		id, err := strconv.ParseInt(req.ParentExecutionID, 10, 64)
		if err != nil {
			return "", fmt.Errorf("parent execution id %q: %w", req.ParentExecutionID, err)
		}
		r.ParentExecutionID = wire.ID(id)
	}
	id, err := c.Client.Execute(ctx, r)
	if err != nil {
		return "", err
	}
	return strconv.FormatInt(id, 10), nil
}

// Wait polls the child until it ends and returns its final view.
func (c *Children) Wait(ctx context.Context, executionID string) (string, any, error) {
	id, err := strconv.ParseInt(executionID, 10, 64)
	if err != nil {
		return "", nil, fmt.Errorf("execution id %q: %w", executionID, err)
	}
	poll := c.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	view, err := c.Client.Wait(ctx, id, poll)
	if err != nil {
		return "", nil, err
	}
	ctxv := map[string]any(view.Context)
	if ctxv == nil {
		ctxv = map[string]any{}
	}
	steps := make(map[string]any, len(view.Steps))
	for name, s := range view.Steps {
		steps[name] = s.Result.V
	}
	var childErr any // null when the child set none, as the API answers
	if view.Error != "" {
		childErr = string(view.Error)
	}
	return view.Status, &tools.ChildView{Ctx: ctxv, Steps: steps, Error: childErr}, nil
}
