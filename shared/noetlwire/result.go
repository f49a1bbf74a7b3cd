package noetlwire

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/eventtype"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// Result reads an event's result onto the stored shape (events.md §2):
// {status, context: envelope} with envelope our tool envelope {status:
// success|error|timeout, data, error?}, or {status, reference: …} for results
// posted by reference. typ is the event's canonical type. raw is true when the
// envelope's data is a NoETL worker's tool output still to be fitted to the
// command's tool (Fit), which ingest knows and this package does not. A nil
// result means the event carries none.
//
// Read, in order:
//  1. result_kind ref / refs (our worker's large results);
//  2. payload.response on call.done / call.error (NoETL's Python worker): the
//     output is the data; the status is success, error for call.error or a
//     FAILED result;
//  3. payload.result {status: COMPLETED|FAILED|…, context: X} without a tool
//     envelope inside (NoETL's Python worker's command.completed, and a call.done
//     whose output it stored elsewhere): X, the output without its data fields, is
//     the best data there is;
//  4. NoETL's Rust worker's result staged by reference (stagedReference);
//  5. a tool envelope, flat or as {status, context: envelope} (ours, R-R1, and
//     NoETL's Rust worker's {status, context: ToolResult});
//  6. anything else on call.done / command.completed is refused naming
//     payload.result and the shapes read; on other types the object is kept as
//     the context of a result with the event's status.
func Result(e *Event, typ string) (result map[string]any, raw bool, err error) {
	switch strings.ToLower(e.ResultKind) {
	case "", "data":
	case "ref":
		return referenceResult(e)
	case "refs":
		if len(e.EventIDs) == 0 {
			return nil, false, errors.New("event_ids: required with result_kind refs")
		}
		return map[string]any{"status": e.Status, "reference": map[string]any{"event_ids": e.EventIDs, "total_parts": int64(len(e.EventIDs))}}, false, nil
	default:
		return nil, false, fmt.Errorf("result_kind: expected data, ref or refs, got %q", e.ResultKind)
	}
	r, isObj := e.Payload["result"].(map[string]any)
	if out, ok := e.Payload["response"]; ok && (typ == eventtype.CallDone || typ == eventtype.CallError) {
		st := toolresult.StatusSuccess
		if typ == eventtype.CallError || failedLifecycle(lower(r["status"])) {
			st = toolresult.StatusError
		}
		env := map[string]any{"status": st, "data": out}
		if st == toolresult.StatusError {
			env["error"] = errorOf(e.Payload, out)
		}
		return map[string]any{"status": st, "context": env}, true, nil
	}
	rawResult, has := e.Payload["result"]
	if !has || rawResult == nil {
		return nil, false, nil
	}
	if !isObj {
		if typ == eventtype.CallDone || typ == eventtype.CommandCompleted {
			return nil, false, fmt.Errorf("payload.result: expected a tool result object {status, data, …}, got %T", rawResult)
		}
		return nil, false, nil // events.md §2: non-objects are dropped
	}
	if out, ok := stagedReference(r); ok {
		return out, false, nil
	}
	if env, st := toolEnvelope(r); st != "" {
		return map[string]any{"status": st, "context": env}, false, nil
	}
	if ls := lower(r["status"]); lifecycle(ls) {
		st := toolresult.StatusSuccess
		if failedLifecycle(ls) || typ == eventtype.CallError || typ == eventtype.CommandFailed {
			st = toolresult.StatusError
		}
		env := map[string]any{"status": st, "data": r["context"]}
		if ref, ok := r["reference"]; ok {
			env["reference"] = ref
		}
		if st == toolresult.StatusError {
			env["error"] = errorOf(e.Payload, r["context"])
		}
		return map[string]any{"status": st, "context": env}, false, nil
	}
	if typ == eventtype.CallDone || typ == eventtype.CommandCompleted {
		st, _ := r["status"].(string)
		return nil, false, fmt.Errorf("payload.result: expected a tool envelope {status: success|error|timeout, data, error?} (flat or as {status, context: envelope}), or NoETL's {status: COMPLETED|FAILED, context} with the output in payload.response; got status %q", st)
	}
	return map[string]any{"status": e.Status, "context": r}, false, nil
}

// referenceResult is a result stored by reference (worker.md §1): the tool
// envelope without its data rides along, so the step's status is the tool's.
func referenceResult(e *Event) (map[string]any, bool, error) {
	if e.ResultURI == "" {
		return nil, false, errors.New("result_uri: required with result_kind ref")
	}
	out := map[string]any{"status": e.Status, "reference": map[string]any{"store_tier": storeTier(e.ResultURI), "logical_uri": e.ResultURI}}
	if r, ok := e.Payload["result"].(map[string]any); ok {
		if env, st := toolEnvelope(r); st != "" {
			env = maps.Clone(env)
			delete(env, "data")
			out["status"], out["context"] = st, env
		}
	}
	return out, false, nil
}

// stagedReference reads NoETL's Rust worker's result over its inline
// budget: {status: <tool status>, context: {data: {_ref}}, reference: {kind,
// ref, store, scope, meta, extracted, …}} (src/executor/command.rs,
// build_call_done_result), with no status inside context. kind result_ref:
// the whole tool result was staged with PUT /api/result, and ref names it; the
// step's data is its data member, so the stored reference points there
// (#/data, a JSON Pointer readReference follows). kind arrow_ipc: the staging
// failed and the result sits in the worker's shared memory only, which the
// server cannot read: the step fails saying so, rather than completing
// without its data. ok is false for anything else.
func stagedReference(r map[string]any) (map[string]any, bool) {
	ref, isObj := r["reference"].(map[string]any)
	st := lower(r["status"])
	if !isObj || (st != toolresult.StatusSuccess && st != toolresult.StatusError && st != toolresult.StatusTimeout) {
		return nil, false
	}
	switch lower(ref["kind"]) {
	case "result_ref":
		uri, _ := ref["ref"].(string)
		if uri == "" {
			return nil, false
		}
		env := map[string]any{"status": st}
		if st != toolresult.StatusSuccess {
			env["error"] = "the tool failed; its result was staged at " + uri
			if ex, ok := ref["extracted"].(map[string]any); ok && ex["error"] != nil {
				env["error"] = ex["error"]
			}
		}
		return map[string]any{"status": st, "context": env,
			"reference": map[string]any{"store_tier": "noetl", "logical_uri": uri + "#/data"}}, true
	case "arrow_ipc":
		msg := "the worker kept its result in its shared memory (PUT /api/result failed), which this server cannot read"
		return map[string]any{"status": toolresult.StatusError, "context": map[string]any{"status": toolresult.StatusError, "error": msg}}, true
	}
	return nil, false
}

// toolEnvelope finds the tool envelope in a posted result: flat
// {status, data, …} or {status, context: {status, data}}. st is the
// envelope's lower-cased status, "" when it is not a tool status.
func toolEnvelope(r map[string]any) (env map[string]any, st string) {
	env = r
	wrapped := false
	if inner, ok := r["context"].(map[string]any); ok {
		if _, hasData := r["data"]; !hasData {
			env, wrapped = inner, true
		}
	}
	switch st = lower(env["status"]); st {
	case toolresult.StatusSuccess, toolresult.StatusError, toolresult.StatusTimeout:
	default:
		return env, ""
	}
	if _, hasData := env["data"]; st == toolresult.StatusSuccess && wrapped && !hasData && lifecycle(lower(r["status"])) {
		// NoETL's Python worker's {status: COMPLETED, context: {status: "success"}}
		// is an output without its data fields, not an envelope.
		return env, ""
	}
	return env, st
}

// lifecycle reports whether s is a NoETL lifecycle status (lower-cased), as
// NoETL's workers put on a result, rather than a tool status.
func lifecycle(s string) bool {
	switch s {
	case "completed", "failed", "running", "started", "pending", "cancelled":
		return true
	}
	return false
}

func failedLifecycle(s string) bool { return s == "failed" || s == "error" }

// errorOf is the error a failed output carries: the payload's error (NoETL's
// worker sends the message there), else the output's own.
func errorOf(payload map[string]any, out any) any {
	if e, ok := payload["error"]; ok && e != nil {
		return e
	}
	if m, ok := out.(map[string]any); ok {
		if e, ok := m["error"]; ok && e != nil {
			return e
		}
	}
	return "the tool failed"
}

func storeTier(uri string) string {
	switch {
	case strings.HasPrefix(uri, "s3://"):
		return "s3"
	case strings.HasPrefix(uri, "gs://"), strings.HasPrefix(uri, "gcs://"):
		return "gcs"
	case strings.HasPrefix(uri, "noetl://"):
		return "noetl"
	}
	return "artifact"
}

// Tool is what Fit needs of a command's tool: its kind (the command's action),
// and for a pipeline its items' labels and kinds in order and whether it is a
// single tool with spec.policy (whose data is that tool's own, R-R4).
type Tool struct {
	Kind   string
	Labels []string
	Kinds  []string // the kind of each of Labels
	Single bool
}

// Fit turns a NoETL worker's tool output (Result's raw data) into the data our
// own worker reports for the same tool, so a step's templates see the same
// values whoever ran it:
//
//   - task_sequence: NoETL's worker answers {status: ok|break|failed, results:
//     {label: data}, ctx: {…}, _prev, metrics: {tasks: [{name}, …]}, error?}; the
//     data is pipeline.Merge of results (each fitted to its item's kind) in the
//     order the items last ran (metrics.tasks, else the pipeline's), with ctx as
//     _context_updates (R-R4, R-R5); a failed sequence is an error envelope with
//     its error. The ctx values NoETL's worker rendered from `set` templates
//     arrive as text unless they were objects or lists; NoETL's server reads such
//     text back as the scalar it spells (true/false, integers, decimals,
//     None/null) when it renders it, and so it is read here:
//     `ctx.counter: "{{ output.data.counter }}"` is 42, as our pipeline writes it;
//   - http: NoETL's Python http tool names the parsed body `data`
//     ({status_code, headers, url, elapsed, data}); ours and NoETL's Rust tool also
//     name it `body`: body is added when missing.
//
// Any other kind's output is the data as it is. result is Result's.
func Fit(result map[string]any, tool Tool) map[string]any {
	env, _ := result["context"].(map[string]any)
	if env == nil {
		return result
	}
	out, ok := env["data"].(map[string]any)
	if !ok {
		return result
	}
	env = maps.Clone(env)
	if tool.Kind != toolkind.TaskSequence {
		env["data"] = fitOutput(tool.Kind, out)
		return map[string]any{"status": result["status"], "context": env}
	}
	results, isMap := out["results"].(map[string]any)
	if !isMap {
		return result
	}
	fitted := make(map[string]any, len(results))
	for l, d := range results {
		kind := ""
		if i := slices.Index(tool.Labels, l); i >= 0 && i < len(tool.Kinds) {
			kind = tool.Kinds[i]
		}
		fitted[l] = fitOutput(kind, d)
	}
	single := ""
	if tool.Single && len(tool.Labels) == 1 {
		single = tool.Labels[0]
	}
	env["data"] = pipeline.Merge(runOrder(out, results, tool.Labels), fitted, scalars(out["ctx"]), single)
	if lower(out["status"]) == "failed" {
		env["status"] = toolresult.StatusError
		if e := out["error"]; e != nil {
			env["error"] = e
		}
	}
	return map[string]any{"status": env["status"], "context": env}
}

// fitOutput is one tool's output as our tool of that kind reports it: http's
// parsed body also as `body`; postgres's last statement (all NoETL's Python
// worker keeps, with `statement_count`) also as `command_<count-1>`, the entry
// NoETL's playbooks read (step.command_0.rows) and our tool writes for every
// statement. The earlier statements' entries are not in NoETL's output, so
// they stay missing.
func fitOutput(kind string, out any) any {
	m, ok := out.(map[string]any)
	if !ok {
		return out
	}
	switch kind {
	case toolkind.HTTP:
		if _, has := m["body"]; has {
			return out
		}
		if body, has := m["data"]; has {
			m = maps.Clone(m)
			m["body"] = body
			return m
		}
	case toolkind.Postgres:
		n, _ := m["statement_count"].(int64)
		if _, rows := m["rows"]; !rows && n == 0 {
			return out
		}
		key := "command_" + strconv.FormatInt(max(n-1, 0), 10)
		if _, has := m[key]; has {
			return out
		}
		last := make(map[string]any, len(m))
		for k, v := range m {
			if k != "statement_count" && !strings.HasPrefix(k, "command_") {
				last[k] = v
			}
		}
		m = maps.Clone(m)
		m[key] = last
		return m
	}
	return out
}

// scalars is a NoETL worker's ctx writes with text that spells a scalar read
// as that scalar (see Fit); nil when v is not an object.
func scalars(v any) map[string]any {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		if s, isText := x.(string); isText {
			x = scalarOf(s)
		}
		out[k] = x
	}
	return out
}

// scalarOf reads text as the scalar it spells, or keeps it.
func scalarOf(s string) any {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true
	case "false":
		return false
	case "none", "null":
		return nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && s != "" && s[0] >= '0' && s[0] <= '9' {
		return n
	}
	if strings.ContainsAny(s, ".eE") {
		if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "nN") {
			return f
		}
	}
	return s
}

// runOrder lists the labels of results in the order their items last ran:
// NoETL's metrics.tasks records every run in order; labels it does not name
// follow in the pipeline's order, then any others by name.
func runOrder(out, results map[string]any, labels []string) []string {
	last := map[string]int{}
	if m, ok := out["metrics"].(map[string]any); ok {
		tasks, _ := m["tasks"].([]any)
		for i, t := range tasks {
			tm, _ := t.(map[string]any)
			if name, _ := tm["name"].(string); hasKey(results, name) {
				last[name] = i
			}
		}
	}
	order := slices.SortedFunc(maps.Keys(last), func(a, b string) int { return last[a] - last[b] })
	for _, l := range labels {
		if _, done := last[l]; !done && hasKey(results, l) {
			last[l] = -1
			order = append(order, l)
		}
	}
	var rest []string
	for l := range results {
		if _, done := last[l]; !done {
			rest = append(rest, l)
		}
	}
	slices.Sort(rest)
	return append(order, rest...)
}

func hasKey(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}
