package api

import (
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// The query parameters of the GET routes, each declared once, as a request
// body is (shared/wire's requests.go): a route's handler takes its query as
// a value of the route's query type (getQuery reads it with readQuery), and
// the OpenAPI document lists the parameters derived from the same type
// (paramsOf). Tags: `query` names a parameter, `doc` describes it (its {min}
// and {max} are the bounds), `min` and `max` bound an integer, `enum` lists
// a string's values for the document, and `required:"true"` marks it
// required in the document (the handler says what is missing, in its own
// words). A parameter given empty is a parameter not given.

// idParam is an id a query names: a decimal string (R-I2).
type idParam int64

// flagParam is a boolean as a query spells it; its handler reads it (the
// routes accept different spellings).
type flagParam string

// catalogQuery is GET /api/catalog's.
type catalogQuery struct {
	Path   string    `query:"path" doc:"only entries whose path contains this"`
	Limit  int64     `query:"limit" min:"1" max:"1000" doc:"page size, at most {max}"`
	Latest flagParam `query:"latest" doc:"only each path's latest version"`
	Cursor string    `query:"cursor" doc:"the previous page's next_cursor"`
}

// uiSchemaQuery is GET /api/catalog/{path+}/ui_schema's.
type uiSchemaQuery struct {
	Version string `query:"version" doc:"a version number, or \"latest\" (default)"`
}

// playbookContentQuery is GET /api/catalog/playbook/content's.
type playbookContentQuery struct {
	PlaybookID string `query:"playbook_id" required:"true" doc:"a catalog_id, or a playbook path (its latest version)"`
}

// workerPoolsQuery is GET /api/worker/pools'.
type workerPoolsQuery struct {
	Runtime string `query:"runtime" doc:"only workers of this runtime (python, rust, go)"`
	Status  string `query:"status" doc:"only workers in this state: alive (every live one), ready, expired, offline, …"`
	Pool    string `query:"pool" doc:"only workers of this pool"`
	Limit   int64  `query:"limit" min:"1" max:"1000" doc:"at most this many, by name (default and maximum {max})"`
}

// executionsQuery is GET /api/executions'.
type executionsQuery struct {
	Path              string  `query:"path" doc:"only executions whose path contains this"`
	Status            string  `query:"status" enum:"PENDING,RUNNING,COMPLETED,FAILED,CANCELLED"`
	CatalogID         idParam `query:"catalog_id"`
	ParentExecutionID idParam `query:"parent_execution_id"`
	Limit             int64   `query:"limit" min:"1" max:"2147483647" doc:"page size"`
	Offset            int64   `query:"offset" min:"0" max:"2147483647" doc:"rows to skip (bounded; page with cursor)"`
	Cursor            string  `query:"cursor" doc:"the X-Next-Cursor header of the previous page"`
}

// eventsQuery is GET /api/executions/{id}/events'.
type eventsQuery struct {
	AfterSeq  int64  `query:"after_seq" min:"0" max:"4611686018427387904" doc:"the previous page's next_after_seq"`
	Limit     int64  `query:"limit" min:"1" max:"1000" doc:"page size, at most {max}"`
	EventType string `query:"event_type"`
	Step      string `query:"step"`
}

// executionQuery is GET /api/executions/{id}'s.
type executionQuery struct {
	Page         int64   `query:"page" min:"1" max:"2147483647" doc:"the page of events, 1 (the newest) by default"`
	PageSize     int64   `query:"page_size" min:"1" max:"500" doc:"events per page: 100 by default, at most {max}"`
	SinceEventID idParam `query:"since_event_id" doc:"only events after this one (an event_id of the execution's)"`
	View         string  `query:"view" enum:"full,summary" doc:"summary leaves out the steps and the events; default full"`
}

// credentialsQuery is GET /api/credentials'.
type credentialsQuery struct {
	Type string `query:"type" doc:"only credentials of this type"`
	Q    string `query:"q" doc:"only credentials whose name or description contains this (any case)"`
}

// credentialQuery is GET /api/credentials/{identifier}'s.
type credentialQuery struct {
	IncludeData       flagParam `query:"include_data" doc:"answer the data too: the worker scope only, for a running execution the credential's scope allows, to the holder of a live claim whose step names the credential"`
	ExecutionID       idParam   `query:"execution_id" doc:"the execution the credential is read for (logged)"`
	ParentExecutionID string    `query:"parent_execution_id" doc:"NoETL's; accepted, not used"`
	CommandID         string    `query:"command_id" doc:"the claimed command the data is for (our worker sends it)"`
	WorkerID          string    `query:"worker_id" doc:"the worker holding that claim"`
	Attempt           int64     `query:"attempt" min:"1" max:"1073741824" doc:"the claim's attempt (R-L8's fence)"`
}

// readsQuery is GET /api/credentials/{identifier}/reads'.
type readsQuery struct {
	ExecutionID idParam `query:"execution_id" doc:"only reads for this execution"`
	Limit       int64   `query:"limit" min:"1" max:"1000" doc:"at most {max} (default 100)"`
}

// doctorQuery is GET /api/doctor's.
type doctorQuery struct {
	Limit int64 `query:"limit" min:"1" max:"1000" doc:"how many to list, at most {max}; default 100"`
}

// pageQuery is the schedules' lists'.
type pageQuery struct {
	Limit  int64  `query:"limit" min:"1" max:"1000" doc:"page size, at most {max}"`
	Cursor string `query:"cursor" doc:"the previous page's next_cursor"`
}

// readQuery reads a query into the query type T, in the order its fields
// are declared: the first bad parameter is the error.
func readQuery[T any](q url.Values) (T, error) {
	var dst T
	v := reflect.ValueOf(&dst).Elem()
	for i, f := range reflect.VisibleFields(v.Type()) {
		name := f.Tag.Get("query")
		s := q.Get(name)
		if s == "" {
			continue
		}
		switch field := v.Field(i); {
		case f.Type == reflect.TypeFor[idParam]():
			n, err := parseID(name, s)
			if err != nil {
				return dst, err
			}
			field.SetInt(n)
		case f.Type.Kind() == reflect.Int64:
			n, err := intParam(name, s, bound(f, "min"), bound(f, "max"))
			if err != nil {
				return dst, err
			}
			field.SetInt(n)
		default:
			field.SetString(s)
		}
	}
	return dst, nil
}

// bound is an integer field's min or max tag; a missing one is a bug in the
// declaration (paramsOf, so Routes, panics on it).
func bound(f reflect.StructField, key string) int64 {
	n, err := strconv.ParseInt(f.Tag.Get(key), 10, 64)
	if err != nil {
		panic("api: query field " + f.Name + " has no " + key + " tag")
	}
	return n
}

// intParam reads the integer parameter k, in lo..hi.
func intParam(k, s string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, invalid(k, "expected integer, got %q", jsonx.Cut(s, 40))
	}
	if n < lo || n > hi {
		return 0, invalid(k, "%s", jsonx.RangeError(n, lo, hi))
	}
	return n, nil
}

// paramsOf lists the query parameters of the query type T, as the OpenAPI
// document publishes them.
func paramsOf[T any]() []Param {
	var ps []Param
	for _, f := range reflect.VisibleFields(reflect.TypeFor[T]()) {
		p := Param{Name: f.Tag.Get("query"), Required: f.Tag.Get("required") == "true",
			Doc: strings.NewReplacer("{min}", f.Tag.Get("min"), "{max}", f.Tag.Get("max")).Replace(f.Tag.Get("doc"))}
		switch {
		case f.Type == reflect.TypeFor[flagParam]():
			p.Shape = boolean()
		case f.Type.Kind() == reflect.Int64 && f.Type != reflect.TypeFor[idParam]():
			bound(f, "min") // a missing bound fails Routes, not a request
			bound(f, "max")
			p.Shape = integer()
		default:
			p.Shape = str()
		}
		if e := f.Tag.Get("enum"); e != "" {
			p.Shape.Enum = strings.Split(e, ",")
		}
		ps = append(ps, p)
	}
	return ps
}
