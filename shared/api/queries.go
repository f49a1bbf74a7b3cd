package api

import (
	"cmp"
	"reflect"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// The parameters of a route, query and path, each declared once, as a
// request body is (shared/wire's requests.go): a route's handler takes them
// as a value of the route's parameter type (getParams and handleParams read
// it with readParams), and the OpenAPI document lists the query parameters
// derived from the same type (paramsOf). Tags: `query` names a query
// parameter, `path` a path parameter (its segment, {id}) and `name` the
// name messages give it when that differs (an {id} is an execution_id or a
// schedule_id); `doc` describes a query parameter (its {min} and {max} are
// the bounds), `min` and `max` bound an integer, `enum` lists a string's
// values for the document, and `required:"true"` marks it required in the
// document (the handler says what is missing, in its own words). A
// parameter given empty is a parameter not given. A type may embed others
// (a route's path and its query).

// idParam is an id a query or a path names: a decimal string (R-I2).
type idParam int64

// executionParam is an execution id a query or a path names: read as
// idParam, and the execution of the request's log lines (logAttrs).
type executionParam int64

// flagParam is a boolean as a query spells it; its handler reads it (the
// routes accept different spellings).
type flagParam string

// executionPath is the path of /api/executions/{id} and the routes under it.
type executionPath struct {
	ID executionParam `path:"id" name:"execution_id"`
}

// executionIDPath is the path of the vars' and the staged results' routes,
// /api/vars/{execution_id} and /api/result/{execution_id}.
type executionIDPath struct {
	ExecutionID executionParam `path:"execution_id"`
}

// schedulePath is the path of /api/schedules/{id} and the routes under it.
type schedulePath struct {
	ID idParam `path:"id" name:"schedule_id"`
}

// commandPath is the path of /api/commands/{event_id} and the routes under it.
type commandPath struct {
	EventID idParam `path:"event_id"`
}

// catalogPath is GET /api/catalog/{catalog_id}'s.
type catalogPath struct {
	CatalogID idParam `path:"catalog_id"`
}

// credentialPath is the path of /api/credentials/{identifier} (an id or a
// name) and the routes under it.
type credentialPath struct {
	Identifier string `path:"identifier"`
}

// assetPath is GET /ui/{asset}'s.
type assetPath struct {
	Asset string `path:"asset"`
}

// variablePath is GET /api/vars/{execution_id}/{var_name}'s.
type variablePath struct {
	executionIDPath
	Name string `path:"var_name"`
}

// setVariablesParams are POST /api/vars/{execution_id}'s.
type setVariablesParams struct {
	executionIDPath
	WorkerID string `query:"worker_id" doc:"the worker setting them (recorded)"`
}

// catalogQuery is GET /api/catalog's.
type catalogQuery struct {
	Path   string    `query:"path" doc:"only entries whose path contains this"`
	Limit  int64     `query:"limit" min:"1" max:"1000" doc:"page size, at most {max}; a page ends early before the entry that would take its payloads' JSON, or the playbook text it reads, past 2 MiB (MaxCatalogPageBytes): go on from next_cursor"`
	Latest flagParam `query:"latest" doc:"only each path's latest version"`
	Cursor string    `query:"cursor" doc:"the previous page's next_cursor"`
}

// uiSchemaQuery is GET /api/catalog/{path+}/ui_schema's.
type uiSchemaQuery struct {
	Path    string `path:"path"`
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
	executionPath
	AfterSeq  int64  `query:"after_seq" min:"0" max:"4611686018427387904" doc:"the previous page's next_after_seq"`
	Limit     int64  `query:"limit" min:"1" max:"1000" doc:"page size, at most {max}; a page ends early before the event that would take its values past 2 MiB (MaxEventsPageBytes): go on from next_after_seq"`
	EventType string `query:"event_type"`
	Step      string `query:"step"`
}

// executionQuery is GET /api/executions/{id}'s.
type executionQuery struct {
	executionPath
	Page         int64   `query:"page" min:"1" max:"2147483647" doc:"the page of events, 1 (the newest) by default"`
	PageSize     int64   `query:"page_size" min:"1" max:"500" doc:"events per page: 100 by default, at most {max}; a page holds the newest events of its range within 2 MiB of their values (MaxEventsPageBytes), the rest read through the events route"`
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
	credentialPath
	IncludeData       flagParam      `query:"include_data" doc:"answer the data too: the worker scope only, for a running execution the credential's scope allows, to the holder of a live claim whose step names the credential"`
	ExecutionID       executionParam `query:"execution_id" doc:"the execution the credential is read for (logged)"`
	ParentExecutionID string         `query:"parent_execution_id" doc:"NoETL's; accepted, not used"`
	CommandID         string         `query:"command_id" doc:"the claimed command the data is for (our worker sends it)"`
	WorkerID          string         `query:"worker_id" doc:"the worker holding that claim"`
	Attempt           int64          `query:"attempt" min:"1" max:"1073741824" doc:"the claim's attempt (R-L8's fence)"`
}

// readsQuery is GET /api/credentials/{identifier}/reads'.
type readsQuery struct {
	credentialPath
	ExecutionID idParam `query:"execution_id" doc:"only reads for this execution"`
	Limit       int64   `query:"limit" min:"1" max:"1000" doc:"at most {max} (default 100)"`
}

// doctorQuery is GET /api/doctor's.
type doctorQuery struct {
	Limit int64 `query:"limit" min:"1" max:"1000" doc:"how many to list, at most {max}; default 100"`
}

// resolveQuery is GET /api/result/resolve's.
type resolveQuery struct {
	Ref string `query:"ref" required:"true" doc:"noetl://execution/<execution_id>/result/<name>/<id>, or a URI inside the result store"`
}

// pageQuery is the schedules' lists'.
type pageQuery struct {
	Limit  int64  `query:"limit" min:"1" max:"1000" doc:"page size, at most {max}; go on from next_cursor"`
	Cursor string `query:"cursor" doc:"the previous page's next_cursor"`
}

// scheduleRunsQuery is GET /api/schedules/{id}/runs'.
type scheduleRunsQuery struct {
	schedulePath
	pageQuery
}

// paramField is a field of a parameter type as readParams reads it.
type paramField struct {
	index  []int  // in the type (reflect's FieldByIndex: through embedded types)
	key    string // the query parameter's or the path segment's name
	name   string // the name messages use
	path   bool
	kind   paramKind
	lo, hi int64 // an integer's bounds
	tag    reflect.StructTag
}

type paramKind int

const (
	stringKind paramKind = iota
	flagKind             // read as a string
	intKind
	idKind
	executionKind
)

// paramFields lists the fields of the parameter type T in the order
// readParams reads them: the query's as declared, then the path's (a
// handler used to read its path itself, after the query). Routes computes
// them once per route, so a request (a claim's too) reads T without
// walking its type.
func paramFields[T any]() []paramField {
	var query, path []paramField
	for _, f := range reflect.VisibleFields(reflect.TypeFor[T]()) {
		pf := paramField{index: f.Index, key: f.Tag.Get("query"), tag: f.Tag}
		if k, ok := f.Tag.Lookup("path"); ok {
			pf.key, pf.path = k, true
		}
		if pf.key == "" {
			continue // an embedded type: its fields follow
		}
		pf.name = cmp.Or(f.Tag.Get("name"), pf.key)
		switch {
		case f.Type == reflect.TypeFor[flagParam]():
			pf.kind = flagKind
		case f.Type == reflect.TypeFor[idParam]():
			pf.kind = idKind
		case f.Type == reflect.TypeFor[executionParam]():
			pf.kind = executionKind
		case f.Type.Kind() == reflect.Int64:
			pf.kind, pf.lo, pf.hi = intKind, bound(f, "min"), bound(f, "max")
		}
		if pf.path {
			path = append(path, pf)
		} else {
			query = append(query, pf)
		}
	}
	return append(query, path...)
}

// readParams reads the request's query and path parameters into the
// parameter type T, field by field as paramFields lists them: the first bad
// parameter is the error.
func readParams[T any](fields []paramField, c *call) (T, error) {
	var dst T
	if len(fields) == 0 {
		return dst, nil
	}
	v := reflect.ValueOf(&dst).Elem()
	for _, f := range fields {
		var s string
		if f.path {
			s = c.params[f.key]
		} else {
			s = c.req.Query.Get(f.key)
		}
		if s == "" {
			continue
		}
		switch field := v.FieldByIndex(f.index); f.kind {
		case idKind, executionKind:
			n, err := parseID(f.name, s)
			if err != nil {
				return dst, err
			}
			field.SetInt(n)
			if f.kind == executionKind {
				c.attrs.setExecution(n)
			}
		case intKind:
			n, err := intParam(f.name, s, f.lo, f.hi)
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
// declaration (paramFields, so Routes, panics on it).
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

// paramsOf lists the query parameters of the parameter type T, as the
// OpenAPI document publishes them (the path's are the route's Path's).
func paramsOf[T any]() []Param {
	var ps []Param
	for _, f := range paramFields[T]() {
		if f.path {
			continue
		}
		p := Param{Name: f.key, Required: f.tag.Get("required") == "true",
			Doc: strings.NewReplacer("{min}", f.tag.Get("min"), "{max}", f.tag.Get("max")).Replace(f.tag.Get("doc"))}
		switch f.kind {
		case flagKind:
			p.Shape = boolean()
		case intKind:
			p.Shape = integer()
		default:
			p.Shape = str()
		}
		if e := f.tag.Get("enum"); e != "" {
			p.Shape.Enum = strings.Split(e, ",")
		}
		ps = append(ps, p)
	}
	return ps
}
