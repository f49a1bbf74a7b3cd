package api

import (
	"reflect"
	"strings"

	"github.com/noetl-go/noetl/shared/wire"
)

// The JSON shapes of the routes' requests and answers, as Routes declares
// them and the OpenAPI document (openapi.go) publishes them. Answers are
// shared/wire's types, which the handlers write and shared/client reads; their
// shapes are derived from those types (shapeOf), so the document, the server
// and the client cannot disagree. Request bodies are validated by hand
// (decode.go, for field-path messages and NoETL's aliases); their shapes are
// written here, beside the decoders, and the package's tests check every
// request the API accepts and every request type our client sends against
// them. Each shape is a function returning a fresh value: no package-level
// state.

// Shape is a JSON shape: the subset of OpenAPI 3.0's schema object the API
// needs.
type Shape struct {
	// Type is object, array, string, integer, number or boolean; "" with no
	// OneOf: any JSON value.
	Type     string
	Doc      string
	Nullable bool
	Enum     []string
	Pattern  string
	Format   string
	// Props are an object's known properties; others may appear (Values
	// describes them when set).
	Props  []Prop
	Values *Shape
	Items  *Shape
	OneOf  []*Shape
}

// Prop is one property of an object shape.
type Prop struct {
	Name     string
	Required bool
	Shape    *Shape
}

// Param is one query parameter.
type Param struct {
	Name     string
	Required bool
	Shape    *Shape
	Doc      string
}

func req(name string, s *Shape) Prop { return Prop{Name: name, Required: true, Shape: s} }
func opt(name string, s *Shape) Prop { return Prop{Name: name, Shape: s} }

func object(props ...Prop) *Shape { return &Shape{Type: "object", Props: props} }
func array(items *Shape) *Shape   { return &Shape{Type: "array", Items: items} }
func mapOf(values *Shape) *Shape  { return &Shape{Type: "object", Values: values} }
func str() *Shape                 { return &Shape{Type: "string"} }
func integer() *Shape             { return &Shape{Type: "integer"} }
func number() *Shape              { return &Shape{Type: "number"} }
func boolean() *Shape             { return &Shape{Type: "boolean"} }
func anyJSON() *Shape             { return &Shape{} }
func enum(vs ...string) *Shape    { return &Shape{Type: "string", Enum: vs} }

// doc returns s with a description.
func (s *Shape) doc(d string) *Shape { s.Doc = d; return s }

// orNull returns s, null allowed.
func (s *Shape) orNull() *Shape { s.Nullable = true; return s }

// id is an id as answers carry it: a decimal string (R-I2).
func id() *Shape {
	return &Shape{Type: "string", Pattern: "^[0-9]+$", Doc: "a 64-bit id as a decimal string (R-I2)"}
}

// idIn is an id as requests may carry it: a number or a numeric string.
func idIn() *Shape {
	return &Shape{OneOf: []*Shape{integer(), {Type: "string", Pattern: "^[0-9]+$"}},
		Doc: "a 64-bit id: a number or a numeric string"}
}

// intIn is an integer as requests may carry it: a number or a numeric string.
func intIn() *Shape {
	return &Shape{OneOf: []*Shape{integer(), {Type: "string", Pattern: "^\\s*-?[0-9]+\\s*$"}},
		Doc: "an integer: a number or a numeric string"}
}

// scalar is a string or an integer, kept as a string (client ids, NoETL's
// numeric command ids).
func scalar() *Shape {
	return &Shape{OneOf: []*Shape{str(), integer()}, Doc: "a string, or an integer read as one"}
}

func timestamp() *Shape { return &Shape{Type: "string", Format: "date-time", Nullable: true} }

func param(name string, s *Shape, d string) Param { return Param{Name: name, Shape: s, Doc: d} }

// errorShape is every error answer (api.md §1), with the extra fields some
// errors carry (errors.go).
func errorShape() *Shape {
	return object(
		req("error", str()),
		req("detail", &Shape{OneOf: []*Shape{
			str().doc("the error's message under NoETL's name (its GUI and CLI show detail)"),
			object(req("code", str().doc("active_claim | already_terminal | execution_cancelled (NoETL's codes)")),
				req("message", str())).doc("409 of a refused claim, in NoETL's shape: its workers read detail.code"),
		}}),
		req("status", integer().doc("the HTTP status")),
		opt("retry_after_seconds", integer().doc("429: when the claim may be retried (R-L7)")),
		opt("event_ids", array(id()).doc("409 of a fenced report: the events refused")),
		opt("problems", array(str()).doc("422 of an invalid playbook: every problem")),
	)
}

func registerBody() *Shape {
	return object(
		req("content", str().doc("the playbook's YAML, or that YAML base64-encoded")),
		opt("resource_type", str().doc(`"Playbook" (the only kind)`)),
	)
}

func catalogQuery() []Param {
	return []Param{
		param("path", str(), "only entries whose path contains this"),
		param("limit", integer(), "page size, at most 1000"),
		param("latest", boolean(), "only each path's latest version"),
		param("cursor", str(), "the previous page's next_cursor"),
	}
}

func catalogListBody() *Shape {
	return object(
		opt("path", str()), opt("limit", intIn()), opt("latest", boolean()),
		opt("cursor", str()), opt("resource_type", str()),
	)
}

func catalogResourceBody() *Shape {
	return object(opt("catalog_id", idIn()), opt("path", str()), opt("version", anyJSON().doc(`a version number, or "latest"`)),
		opt("resource_type", str()))
}

func executeBody() *Shape {
	return object(
		opt("path", str().doc("exactly one of path and catalog_id")),
		opt("catalog_id", idIn()),
		opt("version", anyJSON().doc(`with path: a version number, or "latest" (default); with catalog_id: ignored, as NoETL does`)),
		opt("payload", object().doc("the workload's overrides (alias workload)")),
		opt("workload", object()),
		opt("parent_execution_id", idIn()),
		opt("execution_pool", str()),
		opt("idempotency_key", str().doc("a repeated key answers the first execution")),
		opt("resource_kind", str().doc(`NoETL's: "playbook" (the only kind)`)),
		opt("merge", boolean().doc("NoETL's: the payload is always merged over the playbook's workload, key by key")),
	)
}

// eventFields are NoETL's EventRequest fields after execution_id.
func eventFields() []Prop {
	return []Prop{
		opt("step", str()), opt("node_name", str().doc("alias of step")),
		opt("event_type", str().doc("required (or its alias name)")), opt("name", str().doc("alias of event_type")),
		opt("payload", object().doc("NoETL's workers put the tool's output in payload.response and {status: COMPLETED|FAILED, context} in payload.result (docs/noetl-compat.md)")), opt("context", object().doc("alias of payload")),
		opt("meta", object()),
		opt("worker_id", str()),
		opt("result_kind", str()),
		opt("result_uri", str()),
		opt("event_ids", array(idIn())),
		opt("actionable", boolean()),
		opt("informative", boolean()),
		opt("event_id", scalar().doc("the client's id: re-posting it is idempotent")),
		opt("status", str()),
		opt("created_at", str().doc("kept in meta.client_created_at")),
	}
}

func eventBody() *Shape {
	return object(append([]Prop{req("execution_id", idIn())}, eventFields()...)...)
}

func batchBody() *Shape {
	return object(req("execution_id", idIn()), opt("worker_id", str()),
		req("events", array(object(eventFields()...)).doc("1 to 500 events")))
}

func reportBody() *Shape {
	return object(
		req("worker_id", str()), opt("pool", str()),
		opt("take", intIn().doc("how many issued commands to take, claimed and started (at most 1000)")),
		opt("events", array(object(append([]Prop{req("execution_id", idIn())}, eventFields()...)...))),
		opt("claims", array(idIn()).doc("command.issued event ids to claim and start")),
	)
}

func claimBody() *Shape {
	return object(req("worker_id", str()), opt("start", boolean().doc("also mark the command started")))
}

func heartbeatBody() *Shape {
	return object(req("worker_id", str()), opt("attempt", intIn().doc("the claim's attempt (fences a stale holder)")))
}

// registrationProps are NoETL's registration fields (noetlwire.Registration);
// inside a heartbeat the name may be left to the heartbeat's.
func registrationProps(name func(string, *Shape) Prop) []Prop {
	runtime := object(opt("kind", str()), opt("type", str()))
	runtime.Values = anyJSON()
	return []Prop{
		name("name", scalar().doc("the worker's id: the one it claims commands with")),
		opt("component_type", enum("worker_pool")), opt("kind", enum("worker_pool").doc("alias of component_type")),
		opt("runtime", &Shape{OneOf: []*Shape{str(), runtime},
			Doc: `"python", or an object naming it in kind or type (NoETL's Rust worker)`}),
		opt("status", str().doc("what the worker says of itself; default ready")),
		opt("capacity", intIn().doc("commands it runs at once")),
		opt("pid", intIn()), opt("hostname", scalar()),
		opt("labels", object().doc("pool_name (or pool, worker_pool) names its pool; default shared")),
		opt("meta", object()),
	}
}

func poolRegisterBody() *Shape { return object(registrationProps(req)...) }

func poolHeartbeatBody() *Shape {
	return object(req("name", scalar()), opt("component_type", enum("worker_pool")), opt("kind", enum("worker_pool")),
		opt("registration", object(registrationProps(opt)...).doc("recreates the registration of a worker the registry lost")))
}

func poolDeregisterBody() *Shape {
	return object(req("name", scalar()), opt("component_type", enum("worker_pool")), opt("kind", enum("worker_pool")))
}

func workerPoolsQuery() []Param {
	return []Param{
		param("runtime", str(), "only workers of this runtime (python, rust, go)"),
		param("status", str(), "only workers in this state: alive (every live one), ready, expired, offline, …"),
		param("pool", str(), "only workers of this pool"),
		param("limit", integer(), "at most this many, by name (default and maximum 1000)"),
	}
}

func executionStatus() *Shape {
	return enum("PENDING", "RUNNING", "COMPLETED", "FAILED", "CANCELLED")
}

func executionsQuery() []Param {
	return []Param{
		param("path", str(), "only executions whose path contains this"),
		param("status", executionStatus(), ""),
		param("catalog_id", str(), ""),
		param("parent_execution_id", str(), ""),
		param("limit", integer(), "page size"),
		param("offset", integer(), "rows to skip (bounded; page with cursor)"),
		param("cursor", str(), "the X-Next-Cursor header of the previous page"),
	}
}

func eventsQuery() []Param {
	return []Param{
		param("after_seq", integer(), "the previous page's next_after_seq"),
		param("limit", integer(), "page size, at most 1000"),
		param("event_type", str(), ""),
		param("step", str(), ""),
	}
}

func executionQuery() []Param {
	return []Param{
		param("page", integer(), "the page of events, 1 (the newest) by default"),
		param("page_size", integer(), "events per page: 100 by default, at most 500"),
		param("since_event_id", str(), "only events after this one (an event_id of the execution's)"),
		param("view", enum("full", "summary"), "summary leaves out the steps and the events; default full"),
	}
}

func cancelBody() *Shape {
	return object(opt("reason", str()), opt("cascade", boolean().doc("NoETL's; children are always cancelled")))
}

func rerunBody() *Shape {
	return object(opt("workload", object().doc("keys replacing the execution's workload's")),
		opt("payload", object().doc("alias of workload")), opt("resource_kind", str().doc(`"playbook" (the only kind)`)))
}

func uiSchemaQuery() []Param {
	return []Param{param("version", str(), `a version number, or "latest" (default)`)}
}

func playbookContentQuery() []Param {
	return []Param{{Name: "playbook_id", Required: true, Shape: str(), Doc: "a catalog_id, or a playbook path (its latest version)"}}
}

func validateBody() *Shape {
	return object(req("content", str().doc("the playbook's YAML, or that YAML base64-encoded")))
}

func finalizeBody() *Shape {
	return object(req("status", str().doc("COMPLETED or FAILED, in any case")), opt("error", str()))
}

func replayQuery() []Param {
	return []Param{
		param("as_of_event_id", integer(), "fold up to this event id (at most one as_of_* cutoff)"),
		param("as_of_position", integer(), "fold up to this position in the log"),
		param("as_of_time", str(), "fold up to this time"),
		param("projection", str(), "which projection to answer (replay.md)"),
		param("limit", integer(), ""),
		param("verify", boolean(), "compare the fold with the stored projections"),
		param("diff_from", str(), "a second cutoff to diff against (replay.md)"),
	}
}

func outboxClaimBody() *Shape {
	return object(opt("limit", intIn().doc("default 100; a value outside 1..1000 is clamped into it (as NoETL's server does)")))
}

func outboxClaimReply() *Shape {
	return object(
		req("rows", array(object(
			req("outbox_id", id()), req("event_id", id()), req("execution_id", id()),
			req("subject", str()), req("msg_id", str()), req("payload", anyJSON()),
			req("attempts", integer()), req("payload_codec", enum("json")),
		))),
		req("claimed", integer()),
	)
}

func markPublishedBody() *Shape { return object(req("outbox_ids", array(idIn()))) }

func markPublishedReply() *Shape {
	return object(req("marked", integer()), req("updated", integer()))
}

func markFailedBody() *Shape {
	return object(req("outbox_id", idIn()), req("error", str()), opt("attempts", intIn()),
		opt("max_delay_seconds", number()))
}

func markFailedReply() *Shape {
	return object(req("marked", boolean()), req("available_at_in", integer().doc("seconds until the retry")))
}

func projectBody() *Shape {
	return object(req("events", array(object(
		req("event_id", idIn()), opt("execution_id", idIn().doc("without it the envelope is skipped")),
		opt("event_type", str()), opt("name", str().doc("alias of event_type")),
		opt("node_name", str()), opt("step", str().doc("alias of node_name")),
		opt("status", str()), opt("context", object()), opt("payload", object().doc("alias of context")),
		opt("meta", object()), opt("result", object()), opt("error", str()), opt("worker_id", str()),
		opt("command_id", scalar()),
		opt("timestamp", str().doc("the producer's time, kept in meta.client_created_at")), opt("created_at", str()),
		opt("stage_id", scalar().doc("kept in meta, as are the five below")), opt("frame_id", scalar()),
		opt("aggregate_type", scalar()), opt("aggregate_id", scalar()), opt("node_id", scalar()), opt("node_type", scalar()),
	)).doc("1 to 500 envelopes (the replay data set's row shape)")))
}

func projectReply() *Shape {
	return object(req("projected", integer()), req("duplicates", integer()), req("skipped", integer()))
}

func credentialBody() *Shape {
	return object(
		req("name", str().doc("the alias playbooks name with auth: (letters, digits, _ . : @ -)")),
		opt("type", str().doc("postgres, bearer, api_key, basic, http, generic (default), …")),
		opt("credential_type", str().doc("alias of type")),
		req("data", object().doc("the secret fields, e.g. {\"user\", \"password\", \"host\", \"port\", \"database\"} or {\"token\"}")),
		opt("meta", object().doc("metadata, not secret")),
		opt("tags", &Shape{OneOf: []*Shape{array(str()), str()}, Doc: "a list, or a comma-separated string"}),
		opt("description", str()),
		opt("scope", shapeOf[wire.CredentialScope]().doc("ours: where the credential may be used; absent or null keeps the stored scope, {} clears it (docs/security.md)")),
	)
}

func credentialsQuery() []Param {
	return []Param{param("type", str(), "only credentials of this type"),
		param("q", str(), "only credentials whose name or description contains this (any case)")}
}

func credentialQuery() []Param {
	return []Param{
		param("include_data", boolean(), "answer the data too: the worker scope only, for a running execution the credential's scope allows, to the holder of a live claim whose step names the credential"),
		param("execution_id", str(), "the execution the credential is read for (logged)"),
		param("parent_execution_id", str(), "NoETL's; accepted, not used"),
		param("command_id", str(), "the claimed command the data is for (our worker sends it)"),
		param("worker_id", str(), "the worker holding that claim"),
		param("attempt", integer(), "the claim's attempt (R-L8's fence)"),
	}
}

func readsQuery() []Param {
	return []Param{param("execution_id", str(), "only reads for this execution"), param("limit", integer(), "at most 1000 (default 100)")}
}

func rotateBody() *Shape {
	return object(opt("new_key", boolean().doc("make a new current key first (a key file; with KMS, point the key id at a new key instead)")),
		opt("limit", intIn().doc("credentials to reseal in this call, 1..1000 (default 100)")))
}

func varsBody() *Shape {
	return &Shape{Type: "object", Doc: "NoETL's Python server's {variables: {name: value}, var_type?, source_step?}, its Rust server's " +
		"{variables: [{var_name, var_value, var_type?, source_step?}]}, or its Rust worker's {name: value}",
		Values: anyJSON()}
}

func stagedBody() *Shape {
	return object(
		req("name", str().doc("the result's name (a step's name)")),
		req("data", anyJSON().doc("the result (NoETL's Rust worker sends its whole tool result)")),
		opt("scope", enum("step", "execution", "workflow", "permanent")),
		opt("source_step", str()),
		opt("store", str().doc("NoETL's; ignored (the server has one store)")), opt("ttl", str().doc("NoETL's; ignored")),
		opt("correlation", object()), opt("extracted", object()), opt("compress", boolean()),
	)
}

// shapeOf is the shape of a shared/wire type: its `json` tags name the
// properties (omitempty: optional, else required), `doc` describes them and
// `enum` lists a string's values.
func shapeOf[T any]() *Shape { return shapeOfType(reflect.TypeFor[T](), map[reflect.Type]bool{}) }

// shapeOfType is t's shape; open holds the structs being described, so a
// recursive type (a field's children) is described once, its nested uses as
// objects of the same shape.
func shapeOfType(t reflect.Type, open map[reflect.Type]bool) *Shape {
	switch t {
	case reflect.TypeFor[wire.ID]():
		return id()
	case reflect.TypeFor[wire.OptID]():
		return id().orNull()
	case reflect.TypeFor[wire.NumID]():
		return integer().doc("a 64-bit id as a JSON integer (NoETL's workers read numbers)")
	case reflect.TypeFor[wire.OptString]():
		return str().orNull()
	case reflect.TypeFor[wire.Time]():
		return timestamp()
	case reflect.TypeFor[wire.Object]():
		return object()
	case reflect.TypeFor[wire.OptObject]():
		return object().orNull()
	case reflect.TypeFor[wire.Value]():
		return anyJSON()
	}
	switch t.Kind() {
	case reflect.String:
		return str()
	case reflect.Bool:
		return boolean()
	case reflect.Int, reflect.Int64:
		return integer()
	case reflect.Float64:
		return number()
	case reflect.Pointer:
		return shapeOfType(t.Elem(), open).orNull()
	case reflect.Slice:
		return array(shapeOfType(t.Elem(), open))
	case reflect.Map:
		return mapOf(shapeOfType(t.Elem(), open))
	case reflect.Struct:
		if open[t] {
			return object().doc("the same shape as the object it is in")
		}
		open[t] = true
		defer delete(open, t)
		return object(propsOf(t, open)...)
	}
	panic("api: no JSON shape for " + t.String()) // a wire type using a kind this does not know: a bug
}

// propsOf lists a struct's JSON properties, embedded structs' inline (as
// encoding/json writes them).
func propsOf(t reflect.Type, open map[reflect.Type]bool) []Prop {
	var props []Prop
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			props = append(props, propsOf(f.Type, open)...)
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		p := Prop{Name: name, Required: !strings.Contains(opts, "omitempty"), Shape: shapeOfType(f.Type, open)}
		if d := f.Tag.Get("doc"); d != "" {
			p.Shape.Doc = d
		}
		if e := f.Tag.Get("enum"); e != "" {
			p.Shape.Enum = strings.Split(e, ",")
		}
		props = append(props, p)
	}
	return props
}
