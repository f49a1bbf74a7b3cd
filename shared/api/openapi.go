package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// OpenAPIVersion is the version of the API contract the document states
// (info.version), not the build's: the document must be the same in every
// build so openapi.json, generated from it, stays a checked file.
const OpenAPIVersion = "1.0.0"

// OpenAPI renders the OpenAPI 3.0 document of every route in Routes, with
// its parameters, request body, answer, error answers and token scope. GET
// /api/openapi.json serves it and openapi.json at the module root is a copy
// for generating clients without a server (a test keeps the two equal; make
// test validates the file with an OpenAPI validator).
//
// OpenAPI 3.0.3 rather than 3.1: more client generators read it.
func OpenAPI() []byte {
	paths := map[string]any{}
	for _, r := range Routes() {
		item, _ := paths[r.DocPath()].(map[string]any)
		if item == nil {
			item = map[string]any{}
			paths[r.DocPath()] = item
		}
		item[strings.ToLower(r.Method)] = operation(r)
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":   "NoETL control plane API",
			"version": OpenAPIVersion,
			"description": "The HTTP API of the serverless NoETL-compatible control plane (api.md). " +
				"Ids in answers are decimal strings, except the integers event_id and execution_id " +
				"of command bodies (NoETL's workers read numbers). Every error is {error, detail, status}: detail repeats error under NoETL's name.",
		},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer",
					"description": "A token of the route's scope (x-noetl-scope): api, worker or internal (R-A3); an internal token also holds the worker scope."},
			},
			"schemas": map[string]any{
				"Error": schema(errorShape()),
			},
		},
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		// Built from strings, maps and slices only: failing is a bug.
		panic(fmt.Sprintf("api: encoding the OpenAPI document: %v", err))
	}
	return b.Bytes()
}

// GET /api/openapi.json: open, like health; the document holds no data.
func (a *API) openapi(_ context.Context, _ *call) (any, error) {
	return &Response{Status: http.StatusOK, Header: JSONHeader(), Body: OpenAPI()}, nil
}

func operation(r Route) map[string]any {
	op := map[string]any{
		"operationId":      r.ID,
		"summary":          r.Summary,
		"x-noetl-function": r.Function,
	}
	var params []any
	for _, s := range strings.Split(r.Path, "/") {
		if isParam(s) {
			// Every path parameter but the dashboard's file name and a
			// catalog path is an id.
			sh := id()
			switch {
			case s == "{asset}":
				sh = str().doc("a file name, e.g. app.js")
			case isGreedy(s):
				sh = str().doc("a catalog path: its segments, slashes included (a/b/c)")
			}
			params = append(params, map[string]any{"name": paramName(s), "in": "path", "required": true,
				"schema": schema(sh)})
		}
	}
	for _, p := range r.Query {
		q := map[string]any{"name": p.Name, "in": "query", "schema": schema(p.Shape)}
		if p.Required {
			q["required"] = true
		}
		if p.Doc != "" {
			q["description"] = p.Doc
		}
		params = append(params, q)
	}
	if params != nil {
		op["parameters"] = params
	}
	if r.Body != nil {
		// An empty body reads as {}: the body is required when a field is.
		required := slices.ContainsFunc(r.Body.Props, func(p Prop) bool { return p.Required })
		op["requestBody"] = map[string]any{"required": required,
			"content": map[string]any{"application/json": map[string]any{"schema": schema(r.Body)}}}
	}
	ok := map[string]any{"description": "OK"}
	switch {
	case r.HTML:
		ok["content"] = map[string]any{"text/html": map[string]any{"schema": map[string]any{"type": "string"}},
			"application/javascript": map[string]any{"schema": map[string]any{"type": "string"}},
			"text/css":               map[string]any{"schema": map[string]any{"type": "string"}}}
	case r.Reply != nil:
		ok["content"] = map[string]any{"application/json": map[string]any{"schema": schema(r.Reply)}}
	}
	responses := map[string]any{
		"200": ok,
		"default": map[string]any{"description": "An error",
			"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}},
	}
	if r.Path == "/api/health" {
		responses["503"] = map[string]any{"description": "A dependency is down",
			"content": map[string]any{"application/json": map[string]any{"schema": schema(r.Reply)}}}
	}
	op["responses"] = responses
	if r.Scope == 0 {
		op["security"] = []any{}
	} else {
		op["security"] = []any{map[string]any{"bearer": []any{}}}
		op["x-noetl-scope"] = scopeName(r.Scope)
	}
	return op
}

// schema renders a shape as an OpenAPI 3.0 schema object.
func schema(s *Shape) map[string]any {
	out := map[string]any{}
	if s.Type != "" {
		out["type"] = s.Type
	}
	if s.Doc != "" {
		out["description"] = s.Doc
	}
	if s.Nullable {
		out["nullable"] = true
	}
	if s.Enum != nil {
		vs := make([]any, len(s.Enum))
		for i, v := range s.Enum {
			vs[i] = v
		}
		out["enum"] = vs
	}
	if s.Pattern != "" {
		out["pattern"] = s.Pattern
	}
	if s.Format != "" {
		out["format"] = s.Format
	}
	if s.Props != nil {
		props := map[string]any{}
		var required []any
		for _, p := range s.Props {
			props[p.Name] = schema(p.Shape)
			if p.Required {
				required = append(required, p.Name)
			}
		}
		out["properties"] = props
		if required != nil {
			out["required"] = required
		}
	}
	if s.Values != nil {
		out["additionalProperties"] = schema(s.Values)
	}
	if s.Items != nil {
		out["items"] = schema(s.Items)
	}
	if s.OneOf != nil {
		alts := make([]any, len(s.OneOf))
		for i, a := range s.OneOf {
			alts[i] = schema(a)
		}
		out["oneOf"] = alts
	}
	return out
}
