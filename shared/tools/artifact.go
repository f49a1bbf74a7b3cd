package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// runArtifact reads a result stored by reference (NoETL's artifact tool,
// action get): `result_ref` (in the config or the input: a reference URI, or
// NoETL's {kind: result_ref, ref, store}) or `uri`. A reference is read
// through the worker's result store, the one results over the inline limit
// go to: a URI inside it, or NoETL's noetl://execution/<id>/result/<name>/<id>.
// Only references of the step's own execution are read. The data is NoETL's
// {status, data (the stored JSON), uri, source: result_store, size_bytes}.
// action put is refused as NoETL's current worker refuses it: a step's
// result is stored by the worker when it returns it.
func (r *Registry) runArtifact(ctx context.Context, it pipeline.Item) toolresult.Envelope {
	fail := func(err error) toolresult.Envelope { return failure(toolresult.KindTool, "artifact: "+err.Error()) }
	action, err := stringField(it.Config, keyNames(toolkind.Artifact, "action")...)
	if err != nil {
		return fail(err)
	}
	switch action {
	case "", "get":
	case "put":
		return fail(errors.New("action put is not supported: a step's result is stored by the worker when the step returns it (over the inline limit, by reference)"))
	default:
		return fail(fmt.Errorf("action: expected get, got %q", action))
	}
	ref := valueOf(it.Config, keyNames(toolkind.Artifact, "result_ref")...)
	if ref == nil {
		ref = valueOf(it.Input, keyNames(toolkind.Artifact, "result_ref")...)
	}
	if ref == nil {
		ref = valueOf(it.Config, keyNames(toolkind.Artifact, "uri")...)
	}
	uri, err := referenceURI(ref)
	if err != nil {
		return fail(err)
	}
	if r.results == nil {
		return fail(errors.New("this worker has no result store (noetl worker --result-store) to read references from"))
	}
	b, err := readReference(ctx, r.results, uri, CallFrom(ctx).ExecutionID)
	if errors.Is(err, fs.ErrNotExist) {
		return fail(fmt.Errorf("nothing is stored at %s (results expire with the store's retention)", uri))
	}
	if err != nil {
		return fail(err)
	}
	data, err := resultstore.DecodeJSONWithin(uri, b, resultstore.WorkerMaxDecodedBytes)
	var bad *resultstore.ValueError
	if errors.As(err, &bad) {
		return fail(err) // JSON past resultstore.WorkerMaxDecodedBytes
	}
	if err != nil {
		data = string(b) // NoETL returns text that is not JSON as text
	}
	return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: map[string]any{"status": "success", "data": data, "uri": uri,
		"source": "result_store", "size_bytes": int64(len(b))}}
}

// referenceURI reads a result reference: a URI, or NoETL's {kind: result_ref |
// temp_ref, ref: URI, …} (what {{ step._ref }} holds in NoETL).
func referenceURI(v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", errors.New("result_ref is required: the reference of a stored result (or give uri)")
	case string:
		if s := strings.TrimSpace(x); s != "" {
			return s, nil
		}
		return "", errors.New("result_ref is empty (a step's reference renders empty when its result was not stored by reference)")
	case map[string]any:
		for _, k := range []string{"ref", "uri", "logical_uri", "locator"} {
			if s, ok := x[k].(string); ok && s != "" {
				return s, nil
			}
		}
		return "", errors.New("result_ref: an object must hold the reference under ref")
	}
	return "", fmt.Errorf("result_ref: expected a reference URI or {ref}, got %s", jsonx.TypeName(v))
}
