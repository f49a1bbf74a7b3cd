package tools

import "github.com/noetl-go/noetl/shared/pipeline"

// runNoop: data = config `result` when the key is present (even null, e.g. a template
// that rendered to null), else {status: "ok", message} with message null when unset.
func runNoop(it pipeline.Item) pipeline.Envelope {
	if v, ok := it.Config["result"]; ok {
		return pipeline.Envelope{Status: pipeline.StatusSuccess, Data: v}
	}
	return pipeline.Envelope{Status: pipeline.StatusSuccess, Data: map[string]any{"status": "ok", "message": it.Config["message"]}}
}
