package api

import (
	"reflect"
	"slices"
	"strings"

	"github.com/noetl-go/noetl/shared/wire"
)

// The JSON shapes of the routes' requests and answers, as Routes declares
// them and the OpenAPI document (openapi.go) publishes them. Both are
// shared/wire's types: the handlers write the answers and shared/client reads
// them (shapeOf); our client sends the requests and the server reads them
// with jsonx.Read (bodyOf); so the document, the server and the client cannot
// disagree; so are the query parameters (queries.go). Written here by hand:
// the replay routes' query parameters (shared/replay reads them), the bodies
// NoETL's workers send in several shapes (read by shared/noetlwire: the pool
// routes, vars, staged results) and the internal routes' answers. Each shape
// is a function returning a fresh value: no package-level state.

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

// replayQuery is what replay.ParseQuery reads.
func replayQuery() []Param {
	return []Param{
		param("as_of_event_id", integer(), "fold up to this event id (at most one as_of_* cutoff)"),
		param("as_of_position", integer(), "fold up to this position in the log"),
		param("as_of_time", str(), "fold up to this time"),
		param("projection", str(), "which projection to answer (replay.md)"),
		param("limit", integer(), "fold at most this many events: 100000 by default and at most (replay.MaxLimit); over it, 400"),
		param("verify", boolean(), "compare the fold with the stored projections; a fold of the whole log, so a log over 100000 events (replay.MaxLimit) is a 400"),
		param("diff_from", str(), "a second cutoff to diff against (replay.md)"),
	}
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

// shapeOf is the shape of a shared/wire answer type: its `json` tags name
// the properties (omitempty: optional, else required), `doc` describes them
// and `enum` lists a string's values.
func shapeOf[T any]() *Shape {
	return shapeOfType(reflect.TypeFor[T](), shaping{open: map[reflect.Type]bool{}})
}

// bodyOf is the shape of a request type (shared/wire's requests.go), as
// jsonx.Read reads it: ids and integers as numbers or numeric strings,
// NoETL's aliases as properties of their own, `required` fields required,
// a doc's {min} and {max} filled in from the field's bounds.
func bodyOf[T any]() *Shape {
	return shapeOfType(reflect.TypeFor[T](), shaping{open: map[reflect.Type]bool{}, request: true})
}

// shaping is how a type is being described: open holds the structs being
// described, so a recursive type (a field's children) is described once,
// its nested uses as objects of the same shape; request says the type is a
// request's, read by jsonx.Read.
type shaping struct {
	open    map[reflect.Type]bool
	request bool
}

func shapeOfType(t reflect.Type, sh shaping) *Shape {
	if sh.request {
		switch t {
		case reflect.TypeFor[wire.ID]():
			return idIn()
		case reflect.TypeFor[wire.Version](), reflect.TypeFor[wire.Value]():
			return anyJSON()
		case reflect.TypeFor[wire.Scalar]():
			return scalar()
		case reflect.TypeFor[wire.ClientTime](), reflect.TypeFor[wire.Time]():
			return str()
		case reflect.TypeFor[wire.Tags]():
			return &Shape{OneOf: []*Shape{array(str()), str()}}
		case reflect.TypeFor[wire.Object](), reflect.TypeFor[wire.OptObject](), reflect.TypeFor[map[string]any]():
			return object()
		}
		switch t.Kind() {
		case reflect.Int, reflect.Int64:
			return intIn()
		case reflect.Pointer: // a pointer says whether the field was given
			return shapeOfType(t.Elem(), sh)
		}
	}
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
	case reflect.TypeFor[wire.WallTime]():
		return str().orNull()
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
	case reflect.Interface:
		return anyJSON()
	case reflect.Pointer:
		return shapeOfType(t.Elem(), sh).orNull()
	case reflect.Slice:
		return array(shapeOfType(t.Elem(), sh))
	case reflect.Map:
		return mapOf(shapeOfType(t.Elem(), sh))
	case reflect.Struct:
		if sh.open[t] {
			return object().doc("the same shape as the object it is in")
		}
		sh.open[t] = true
		defer delete(sh.open, t)
		return object(propsOf(t, sh)...)
	}
	panic("api: no JSON shape for " + t.String()) // a wire type using a kind this does not know: a bug
}

// propsOf lists a struct's JSON properties, embedded structs' inline (as
// encoding/json writes them and jsonx.Read reads them).
func propsOf(t reflect.Type, sh shaping) []Prop {
	var props []Prop
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if f.Anonymous && tag == "" {
			props = append(props, propsOf(f.Type, sh)...)
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if !sh.request {
			p := Prop{Name: name, Required: !strings.Contains(opts, "omitempty"), Shape: shapeOfType(f.Type, sh)}
			if d := f.Tag.Get("doc"); d != "" {
				p.Shape.Doc = d
			}
			if e := f.Tag.Get("enum"); e != "" {
				p.Shape.Enum = strings.Split(e, ",")
			}
			props = append(props, p)
			continue
		}
		props = append(props, requestProps(name, f, sh)...)
	}
	return props
}

// requestProps are a request field's properties: its own, then one per
// NoETL alias.
func requestProps(name string, f reflect.StructField, sh shaping) []Prop {
	doc := slices.Collect(strings.SplitSeq(f.Tag.Get("openapi"), ","))
	if slices.Contains(doc, "-") {
		return nil
	}
	shape := func() *Shape {
		var s *Shape
		switch {
		case slices.Contains(doc, "integer"):
			s = integer()
		case slices.Contains(doc, "ids"):
			s = array(idIn())
		default:
			s = shapeOfType(f.Type, sh)
		}
		if slices.Contains(doc, "nullable") {
			s.orNull()
		}
		if e := f.Tag.Get("enum"); e != "" {
			s.Enum = strings.Split(e, ",")
		}
		return s
	}
	var aliases []string
	if a := f.Tag.Get("alias"); a != "" {
		aliases = strings.Split(a, ",")
	}
	required := (f.Tag.Get("required") == "true" || slices.Contains(doc, "required")) && aliases == nil
	own := Prop{Name: name, Required: required, Shape: shape()}
	if d := f.Tag.Get("doc"); d != "" {
		own.Shape.Doc = strings.NewReplacer("{min}", f.Tag.Get("min"), "{max}", f.Tag.Get("max")).Replace(d)
	}
	props := []Prop{own}
	for _, a := range aliases {
		props = append(props, Prop{Name: a, Shape: shape().doc("alias of " + name)})
	}
	return props
}
