package tools

import (
	"context"
	"fmt"
	"maps"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/lifecycle"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// Children starts and waits child executions for the playbook tool.
type Children interface {
	// Start starts a child execution and returns its id.
	Start(ctx context.Context, req ChildRequest) (executionID string, err error)
	// Wait polls until the execution is terminal and returns its status (COMPLETED,
	// FAILED or CANCELLED) and its result: a ChildView (or *ChildView), which also
	// carries step results for return_step. Any other value is taken as the child's
	// final ctx (return_step then fails). Wait must return when ctx is done.
	Wait(ctx context.Context, executionID string) (status string, result any, err error)
}

// ChildRequest is what the playbook tool asks Children.Start for.
type ChildRequest struct {
	ParentExecutionID string         // the calling execution (WithCall / _execution_id)
	ParentStep        string         // the calling step
	Path              string         // catalog path; Path or CatalogID is set
	CatalogID         string         //
	Version           string         // optional catalog version (config `version`)
	Payload           map[string]any // the child's workload input (R-P7); never nil
	ExecutionPool     string         // optional worker pool for the child's commands
	ReturnStep        string         // optional; informative (Wait answers with every step)
}

// ChildView is a terminal child execution as Wait reports it.
type ChildView struct {
	// Ctx is the child's final durable ctx (the playbook.completed result); nil counts
	// as {}.
	Ctx map[string]any
	// Steps maps step name → that step's latest result (R-W7), for return_step.
	Steps map[string]any
	// Error is the child's failure (playbook.failed error) when it failed; it goes into
	// the tool's error message.
	Error any
}

// runPlaybook starts a child execution and, unless `wait: false`, waits for it.
//
// Decisions where the spec is silent are in the package doc.
func (r *Registry) runPlaybook(ctx context.Context, it pipeline.Item) toolresult.Envelope {
	cfg := it.Config
	if r.children == nil {
		return failure(toolresult.KindTool, "playbook: this worker cannot start child executions (no Children configured)")
	}
	var req ChildRequest
	if err := stringFields(cfg,
		stringKey{keyNames(toolkind.Playbook, "path"), &req.Path},
		stringKey{keyNames(toolkind.Playbook, "catalog_id"), &req.CatalogID},
		stringKey{keyNames(toolkind.Playbook, "version"), &req.Version},
		stringKey{keyNames(toolkind.Playbook, "return_step"), &req.ReturnStep},
		stringKey{keyNames(toolkind.Playbook, "execution_pool"), &req.ExecutionPool}); err != nil {
		return failure(toolresult.KindTool, "playbook: "+err.Error())
	}
	if req.Path == "" && req.CatalogID == "" {
		return failure(toolresult.KindTool, "playbook: path or catalog_id is required")
	}
	wait, err := boolField(cfg, true, keyNames(toolkind.Playbook, "wait")...)
	if err != nil {
		return failure(toolresult.KindTool, "playbook: "+err.Error())
	}
	payload, err := mapField(cfg, keyNames(toolkind.Playbook, "payload")...)
	if err != nil {
		return failure(toolresult.KindTool, "playbook: "+err.Error())
	}
	req.Payload = jsonx.Clone(it.Input).(map[string]any)
	maps.Copy(req.Payload, jsonx.Clone(payload).(map[string]any))
	call := callFor(ctx, it)
	req.ParentExecutionID, req.ParentStep = call.ExecutionID, call.Step

	ctx, cancel, _, err := withToolTimeout(ctx, cfg)
	if err != nil {
		return failure(toolresult.KindTool, "playbook: "+err.Error())
	}
	defer cancel()

	name := req.Path
	if name == "" {
		name = "catalog_id " + req.CatalogID
	}
	id, err := r.children.Start(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return ctxEnvelope(ctx, "playbook: start "+name)
		}
		return failure(toolresult.KindTool, fmt.Sprintf("playbook: start %s: %v", name, err))
	}
	if id == "" {
		return failure(toolresult.KindTool, fmt.Sprintf("playbook: start %s: no execution id returned", name))
	}
	r.log.Debug("playbook: child started", "execution_id", id, "parent", req.ParentExecutionID, "path", req.Path)
	if !wait {
		return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: map[string]any{"execution_id": id, "status": lifecycle.ExecutionRunning}}
	}

	status, result, err := r.children.Wait(ctx, id)
	if err != nil {
		if ctx.Err() != nil {
			out := ctxEnvelope(ctx, fmt.Sprintf("playbook: waiting for child execution %s (%s)", id, name))
			out.Data = map[string]any{"execution_id": id, "status": lifecycle.ExecutionRunning}
			return out
		}
		return failure(toolresult.KindTool, fmt.Sprintf("playbook: wait for child execution %s (%s): %v", id, name, err))
	}
	status = strings.ToUpper(strings.TrimSpace(status))
	if status == "CANCELED" {
		status = lifecycle.ExecutionCancelled
	}
	view, isView := asChildView(result)
	data := map[string]any{"execution_id": id, "status": status}
	switch {
	case req.ReturnStep != "" && !isView:
		return failure(toolresult.KindTool, fmt.Sprintf("playbook: return_step %q: the child's step results are not available from this worker's Children", req.ReturnStep))
	case req.ReturnStep != "":
		ret := view.Steps[req.ReturnStep]
		data["result"] = ret
		// NoETL's playbooks read the returned step's fields on the tool's result
		// ({{ sub.profile_score }}): they are at the top too, execution_id, status
		// and result keeping their meaning here.
		if m, ok := ret.(map[string]any); ok {
			for k, v := range m {
				if _, ours := data[k]; !ours {
					data[k] = v
				}
			}
		}
	case view.Ctx == nil:
		data["result"] = map[string]any{}
	default:
		data["result"] = view.Ctx
	}
	switch status {
	case lifecycle.ExecutionCompleted:
		return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: data}
	case lifecycle.ExecutionFailed, lifecycle.ExecutionCancelled:
		msg := fmt.Sprintf("playbook: child execution %s (%s) %s", id, name, status)
		if e := errorText(view.Error); e != "" {
			msg += ": " + e
		}
		return toolresult.Envelope{Status: toolresult.StatusError, Data: data, Error: &toolresult.ErrorInfo{Message: msg, Kind: toolresult.KindTool}}
	default:
		return toolresult.Envelope{Status: toolresult.StatusError, Data: data, Error: &toolresult.ErrorInfo{
			Message: fmt.Sprintf("playbook: child execution %s (%s) ended with unexpected status %q", id, name, status),
			Kind:    toolresult.KindTool,
		}}
	}
}

// asChildView reads Wait's result; any other value is the final ctx.
func asChildView(result any) (ChildView, bool) {
	switch v := result.(type) {
	case ChildView:
		return v, true
	case *ChildView:
		if v == nil {
			return ChildView{}, true
		}
		return *v, true
	case nil:
		return ChildView{}, false
	case map[string]any:
		return ChildView{Ctx: v}, false
	default:
		n, _ := jsonx.Normalize(v).(map[string]any)
		return ChildView{Ctx: n}, false
	}
}

// errorText is a one-line description of a child's error value.
func errorText(v any) string {
	switch x := v.(type) {
	case error:
		return x.Error()
	case map[string]any:
		if m, ok := x["message"].(string); ok && m != "" {
			return m
		}
	}
	return tmpl.Text(jsonx.Normalize(v))
}
