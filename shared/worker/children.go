package worker

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/tools"
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
	r := client.ExecuteRequest{Path: req.Path, Payload: req.Payload, Pool: req.ExecutionPool}
	var err error
	if req.CatalogID != "" {
		if r.CatalogID, err = strconv.ParseInt(req.CatalogID, 10, 64); err != nil {
			return "", fmt.Errorf("catalog_id %q: %w", req.CatalogID, err)
		}
	}
	if req.Version != "" {
		if r.Version, err = strconv.Atoi(req.Version); err != nil {
			return "", fmt.Errorf("version %q: %w", req.Version, err)
		}
	}
	if req.ParentExecutionID != "" {
		if r.ParentExecutionID, err = strconv.ParseInt(req.ParentExecutionID, 10, 64); err != nil {
			return "", fmt.Errorf("parent execution id %q: %w", req.ParentExecutionID, err)
		}
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
	status, _ := view["status"].(string)
	ctxv, _ := view["context"].(map[string]any)
	if ctxv == nil {
		ctxv = map[string]any{}
	}
	steps := map[string]any{}
	if ss, ok := view["steps"].(map[string]any); ok {
		for name, s := range ss {
			if m, ok := s.(map[string]any); ok {
				steps[name] = m["result"]
			}
		}
	}
	return status, &tools.ChildView{Ctx: ctxv, Steps: steps, Error: view["error"]}, nil
}
