// Package noop is the noop tool: pure, no I/O, so the worker runs it and the
// what-if (shared/whatif) computes what it would answer without a worker.
package noop

import (
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// Run answers a noop with its config: data = config `result` when the key is
// present (even null, e.g. a template that rendered to null), else
// {status: "ok", message} with message null when unset.
func Run(config map[string]any) toolresult.Envelope {
	for _, k := range keyNames(toolkind.Noop, "result") {
		if v, ok := config[k]; ok {
			return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: v}
		}
	}
	var message any
	for _, k := range keyNames(toolkind.Noop, "message") {
		if v, ok := config[k]; ok && v != nil {
			message = v
			break
		}
	}
	return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: map[string]any{"status": "ok", "message": message}}
}

// keyNames is a key with its aliases, as the tools in shared/tools read them
// (their TestToolsReadEveryTableKey reads this file too).
func keyNames(kind, name string) []string { return toolkind.KeyNames(kind, name) }
