package tools

import (
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/tools/kinds"
)

// runNoop: data = config `result` when the key is present (even null, e.g. a template
// that rendered to null), else {status: "ok", message} with message null when unset.
func runNoop(it pipeline.Item) pipeline.Envelope {
	for _, k := range keyNames(kinds.Noop, "result") {
		if v, ok := it.Config[k]; ok {
			return pipeline.Envelope{Status: pipeline.StatusSuccess, Data: v}
		}
	}
	return pipeline.Envelope{Status: pipeline.StatusSuccess, Data: map[string]any{"status": "ok", "message": valueOf(it.Config, keyNames(kinds.Noop, "message")...)}}
}
