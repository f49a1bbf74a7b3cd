package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// A step result the worker stored by reference (worker.md §1) travels in a
// later command's render_context as a marker, not as its data: the server
// neither reads it back nor sends it, so what a command carries does not grow
// with the results its code reads (the engine's MaxCommandBytes). The worker
// that runs the command reads it from the result store (ResolveRefs) before
// the tool runs. The marker is NoETL's reference-only result,
// {_ref: {kind: result_ref, ref, uri}}, plus RefLoadKey: {uri, results?},
// which says that the value is to be loaded (a result of a playbook's own that
// merely holds a _ref is left alone) and, for a pipeline step, the labels of
// its NoETL `results` view.

// RefLoadKey marks a render_context value the worker loads from the result
// store.
const RefLoadKey = "_ref_load"

// RefMarker is the marker of a result stored at uri; labels are a pipeline
// step's item labels (its `results` view), nil for a single tool.
func RefMarker(uri string, labels []string) map[string]any {
	load := map[string]any{"uri": uri}
	if labels != nil {
		ls := make([]any, len(labels))
		for i, l := range labels {
			ls[i] = l
		}
		load["results"] = ls
	}
	return map[string]any{RefLoadKey: load, "_ref": RefOf(uri)}
}

// PartMarker is the marker of a value of a command the server put in the
// result store at uri (a part of a large command, the engine's
// commandsize.go): loaded as it was, without _ref.
func PartMarker(uri string) map[string]any {
	return map[string]any{RefLoadKey: map[string]any{"uri": uri, "part": true}, "_ref": RefOf(uri)}
}

// RefOf is NoETL's _ref marker of a result stored at uri, which playbooks test
// for and hand to the artifact tool.
func RefOf(uri string) map[string]any {
	return map[string]any{"kind": "result_ref", "ref": uri, "uri": uri}
}

// refMarker reads a marker: its URI, labels and whether it is a part; ok
// false for any other value.
func refMarker(v any) (uri string, labels []string, part, ok bool) {
	m, _ := v.(map[string]any)
	load, _ := m[RefLoadKey].(map[string]any)
	uri, _ = load["uri"].(string)
	if uri == "" {
		return "", nil, false, false
	}
	if ls, isList := load["results"].([]any); isList {
		labels = []string{}
		for _, l := range ls {
			if s, isStr := l.(string); isStr {
				labels = append(labels, s)
			}
		}
	}
	part, _ = load["part"].(bool)
	return uri, labels, part, true
}

// ResolveRefs replaces the markers in a command payload (the members of its
// render_context, args, tool_config, tool_config.args and iteration) with
// what they stand for: a step's result as templates see it (the stored data,
// with _ref added to an object, and a pipeline step's `results` view: label
// → that item's data), or a part of the command as it was. read reads and
// decodes one stored value; each is read once. The payload's maps are
// changed in place. It says how many values it loaded.
func ResolveRefs(ctx context.Context, payload map[string]any, read func(ctx context.Context, uri string) (any, error)) (int, error) {
	tc, _ := payload["tool_config"].(map[string]any)
	containers := []any{payload["render_context"], payload["args"], tc, tc["args"], payload["iteration"]}
	loaded := map[string]any{}
	for _, c := range containers {
		m, _ := c.(map[string]any)
		for _, name := range slices.Sorted(maps.Keys(m)) {
			uri, labels, part, ok := refMarker(m[name])
			if !ok {
				continue
			}
			v, have := loaded[uri]
			if !have {
				var err error
				if v, err = read(ctx, uri); err != nil {
					return 0, fmt.Errorf("the step reads %s, stored by reference at %s: %w", name, uri, err)
				}
				loaded[uri] = v
			}
			if !part {
				v = refView(v, uri, labels)
			}
			m[name] = v
		}
	}
	return len(loaded), nil
}

// refView is a loaded result as templates see it (the engine's stepView of a
// result stored by reference).
func refView(v any, uri string, labels []string) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	m = maps.Clone(m)
	m["_ref"] = RefOf(uri)
	if labels != nil {
		if _, has := m["results"]; !has {
			results := make(map[string]any, len(labels))
			for _, l := range labels {
				if x, ok := m[l]; ok {
					results[l] = x
				}
			}
			m["results"] = results
		}
	}
	return m
}
