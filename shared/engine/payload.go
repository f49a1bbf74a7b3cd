package engine

import (
	"fmt"
	"maps"
	"slices"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/playbook"
	"github.com/noetl-go/noetl/shared/tmpl"
)

// commandPayload builds the context of a command.issued event: what the worker
// needs, in NoETL's shape {tool_config, args, render_context} so its workers can
// read it too.
//
// A single tool ships fully rendered except `code` (R-S3; code is never rendered).
// A pipeline, or a single tool with spec.policy, ships its items raw with the values
// their templates read, as NoETL's task_sequence {tasks: [{name, kind, …}],
// remaining_actions}, and the worker renders item by item against its running
// context (R-S3, worker.md §3).
//
// The stored values its input, config and code context read are asked for at
// once.
func (d *decider) commandPayload(step *playbook.Step, visit int, b *bindings) (map[string]any, error) {
	d.gather()
	p, err := d.payload(step, visit, b)
	d.flush()
	return p, err
}

func (d *decider) payload(step *playbook.Step, visit int, b *bindings) (map[string]any, error) {
	args := map[string]any{}
	if step.Input != nil {
		in, err := d.renderValue(step.Input, b)
		if err != nil && !d.short() {
			return nil, fmt.Errorf("input: %w", err)
		}
		if m, ok := in.(map[string]any); ok {
			args = m
		}
	}
	p := map[string]any{"step": step.Name, "visit": int64(visit), "timeout_seconds": int64(step.Timeout)}
	if b.iter != nil {
		p["iteration"] = map[string]any{"index": int64(b.iter.index), "total": int64(b.iter.total),
			"iterator": b.iter.iterator, "item": b.iter.item}
	}
	if !step.UsesPolicy() {
		cfg, err := d.renderValue(step.Tool.Config, b)
		if err != nil && !d.short() {
			return nil, err
		}
		tc, _ := cfg.(map[string]any)
		if tc == nil {
			tc = map[string]any{}
		}
		// Step-level input is merged under the tool's own (the tool wins).
		merged := maps.Clone(args)
		if own, ok := tc["input"].(map[string]any); ok {
			maps.Copy(merged, own)
		}
		delete(tc, "input")
		if b.iter != nil {
			// NoETL workers find the iteration in args; explicit input wins.
			for k, v := range b.iter.vars() {
				if _, set := merged[k]; !set {
					merged[k] = v
				}
			}
		}
		tc["args"] = merged
		if code, ok := step.Tool.Raw["code"]; ok && !tmpl.Renders(step.Tool.Code) {
			tc["code"] = code
		}
		p["tool_config"] = tc
		p["args"] = merged
		if rc := d.codeContext(step.Tool.CodeNames, b); len(rc) > 0 {
			p["render_context"] = rc
		}
		return p, nil
	}
	items := step.Pipeline
	single := false
	if step.Tool != nil {
		items, single = []*playbook.PipelineItem{{Label: step.Tool.Label(step.Name), Tool: step.Tool}}, true
	}
	tasks := make([]any, len(items))
	roots := map[string]bool{}
	for i, it := range items {
		raw := jsonx.Clone(it.Tool.Raw).(map[string]any)
		raw["kind"] = it.Tool.Kind
		raw["name"] = it.Label
		tasks[i] = raw
		for _, r := range it.Tool.Roots {
			roots[r] = true
		}
		for _, r := range it.Tool.CodeNames {
			if codeContextName(r) {
				roots[r] = true
			}
		}
	}
	rc := map[string]any{}
	for _, r := range slices.Sorted(maps.Keys(roots)) {
		if v, ok := d.shipped(r, b); ok {
			rc[r] = v
		}
	}
	for _, r := range []string{"workload", "execution_id", "catalog_id", "playbook_path"} {
		if v, ok := d.lookup(r, b); ok {
			rc[r] = v
		}
	}
	if b.iter != nil {
		maps.Copy(rc, b.iter.vars())
		rc["iter"] = b.iter.vars()
	}
	// NoETL's task_sequence shape, which its workers require and ours reads.
	p["tool_config"] = map[string]any{"tasks": tasks, "remaining_actions": []any{}}
	p["args"] = args
	p["render_context"] = rc
	if single {
		p["single"] = true // R-R4: a single tool with a policy keeps its plain data
	}
	return p, nil
}

// codeContext is the render context a python tool's `context` global gets: the
// bindings its code names (see codeWords), as its templates would read them.
func (d *decider) codeContext(names []string, b *bindings) map[string]any {
	rc := map[string]any{}
	for _, n := range names {
		if !codeContextName(n) {
			continue
		}
		if v, ok := d.shipped(n, b); ok {
			rc[n] = v
		}
	}
	return rc
}

// codeContextName: `steps` (every step's status and result) is left out of
// python's context even when the code says the word; templates read it.
func codeContextName(n string) bool { return n != "steps" }
