package tools

import (
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// runNoop: data = config `result` when the key is present (even null, e.g. a template
// that rendered to null), else {status: "ok", message} with message null when unset.
func runNoop(it pipeline.Item) toolresult.Envelope {
	for _, k := range keyNames(toolkind.Noop, "result") {
		if v, ok := it.Config[k]; ok {
			return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: v}
		}
	}
	return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: map[string]any{"status": "ok", "message": valueOf(it.Config, keyNames(toolkind.Noop, "message")...)}}
}
