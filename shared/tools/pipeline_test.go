package tools

import (
	"context"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
)

// The registry behind pipeline.Run: the conformance fixture's python item (its code
// rendered as NoETL renders it; braces that are no template kept) feeding a shell item through the running context.
func TestRegistryDrivesAPipeline(t *testing.T) {
	t.Parallel()
	payload, err := jsonx.DecodeObject([]byte(`{"step": "set_variables", "args": {"base": 40},
		"render_context": {"workload": {"greeting": "Hello"}, "execution_id": "1"},
		"tool_config": [
			{"compute": {"kind": "python", "input": {"plus": 2},
				"code": "text = '{{ stays literal }}'\nreturn {'counter': base + plus, 'text': text, 'eid': context['execution_id']}"}},
			{"report": {"kind": "shell", "command": "echo {{ workload.greeting }} {{ compute.counter }}"}}
		]}`))
	if err != nil {
		t.Fatal(err)
	}
	r := New(Options{Python: realPython(t)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx = WithCall(ctx, Call{ExecutionID: "1", Step: "set_variables"})
	out := pipeline.Run(ctx, payload, pipeline.Options{Exec: r.Exec})
	mustSucceed(t, out)
	d := dataMap(t, out)
	same(t, "compute", d["compute"], map[string]any{"counter": 42, "text": "{{ stays literal }}", "eid": "1"})
	if got := d["report"].(map[string]any)["stdout"]; got != "Hello 42\n" {
		t.Fatalf("report stdout = %q", got)
	}
}
