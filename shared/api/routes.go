package api

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/noetl-go/noetl/shared/config"
)

// Function names: one Lambda function each (api.md §2; R-A1: exactly one
// function per route).
const (
	FnCatalog = "catalog"
	FnExecute = "execute"
	FnIngest  = "ingest"
	FnClaim   = "claim"
	FnStatus  = "status"
	FnReplay  = "replay"
	FnOutbox  = "outbox"
)

// Functions lists the Lambda functions in a stable order.
func Functions() []string {
	return []string{FnCatalog, FnExecute, FnIngest, FnClaim, FnStatus, FnReplay, FnOutbox}
}

// Route is one route of the HTTP API.
type Route struct {
	Method string
	// Path in API Gateway syntax: /api/commands/{event_id}/claim.
	Path     string
	Function string
	// Scope is the token scope the route needs (R-A3); 0 means open (health).
	Scope config.Scope
}

// Key is API Gateway's route key: "POST /api/commands/{event_id}/claim".
func (r Route) Key() string { return r.Method + " " + r.Path }

// Routes returns every route of the API (api.md §2 without /metrics, which
// the local server adds), sorted by path, then method: the single source of
// truth that routes.json is generated from.
func Routes() []Route {
	const (
		api      = config.ScopeAPI
		worker   = config.ScopeWorker
		internal = config.ScopeInternal
	)
	rs := []Route{
		{"GET", "/api/health", FnStatus, 0},
		// The dashboard's page and files (dashboard.go): open, they hold no data.
		{"GET", "/", FnStatus, 0},
		{"GET", "/ui/{asset}", FnStatus, 0},

		{"POST", "/api/catalog/register", FnCatalog, api},
		{"GET", "/api/catalog", FnCatalog, api},
		{"GET", "/api/catalog/{catalog_id}", FnCatalog, api},
		{"POST", "/api/catalog/list", FnCatalog, api},
		{"POST", "/api/catalog/resource", FnCatalog, api},

		{"POST", "/api/execute", FnExecute, api},

		{"POST", "/api/events", FnIngest, worker},
		{"POST", "/api/events/batch", FnIngest, worker},
		{"POST", "/api/worker/report", FnIngest, worker},

		{"GET", "/api/commands/{event_id}", FnClaim, worker},
		{"POST", "/api/commands/{event_id}/claim", FnClaim, worker},
		{"POST", "/api/commands/{event_id}/heartbeat", FnClaim, worker},

		{"GET", "/api/executions", FnStatus, api},
		{"GET", "/api/executions/{id}", FnStatus, api},
		{"GET", "/api/executions/{id}/events", FnStatus, api},
		{"GET", "/api/executions/{id}/status", FnStatus, api},
		{"GET", "/api/executions/{id}/cancellation-check", FnStatus, api | worker},
		{"POST", "/api/executions/{id}/cancel", FnStatus, api},
		{"POST", "/api/executions/{id}/finalize", FnStatus, api},

		{"GET", "/api/executions/{id}/replay", FnReplay, api},
		{"GET", "/api/replay/state", FnReplay, api},

		{"POST", "/api/internal/outbox/claim", FnOutbox, internal},
		{"POST", "/api/internal/outbox/mark-published", FnOutbox, internal},
		{"POST", "/api/internal/outbox/mark-failed", FnOutbox, internal},
		{"GET", "/api/internal/outbox/pending-count", FnOutbox, internal},
		{"POST", "/api/internal/events/project", FnOutbox, internal},
	}
	slices.SortFunc(rs, func(a, b Route) int {
		return cmp.Or(cmp.Compare(a.Path, b.Path), cmp.Compare(a.Method, b.Method))
	})
	return rs
}

// RoutesJSON renders Routes in routes.json's format: one route per line with
// exactly method, path and function (infra/ and scripts/sam_transform.py read
// it; neither takes other keys).
func RoutesJSON() []byte {
	var b bytes.Buffer
	b.WriteString("[\n")
	rs := Routes()
	for i, r := range rs {
		fmt.Fprintf(&b, "  {\"method\": %q, \"path\": %q, \"function\": %q}", r.Method, r.Path, r.Function)
		if i < len(rs)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	return b.Bytes()
}

// scopeName names a scope for messages.
func scopeName(s config.Scope) string {
	var names []string
	for _, n := range []struct {
		s    config.Scope
		name string
	}{{config.ScopeAPI, "api"}, {config.ScopeWorker, "worker"}, {config.ScopeInternal, "internal"}} {
		if s&n.s != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, "+")
}

// pattern is a compiled route path.
type pattern struct {
	route    Route
	segments []string // "{name}" segments are parameters
	literals int      // more literal segments = more specific
}

func compile(r Route) pattern {
	segs := strings.Split(strings.TrimPrefix(r.Path, "/"), "/")
	p := pattern{route: r, segments: segs}
	for _, s := range segs {
		if !isParam(s) {
			p.literals++
		}
	}
	return p
}

func isParam(seg string) bool { return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") }

// match reports whether path fits the pattern and returns its parameters.
func (p pattern) match(path string) (map[string]string, bool) {
	if !strings.HasPrefix(path, "/") {
		return nil, false
	}
	segs := strings.Split(path[1:], "/")
	if len(segs) != len(p.segments) {
		return nil, false
	}
	var params map[string]string
	for i, s := range p.segments {
		if isParam(s) {
			if segs[i] == "" {
				return nil, false
			}
			if params == nil {
				params = map[string]string{}
			}
			params[s[1:len(s)-1]] = segs[i]
			continue
		}
		if s != segs[i] {
			return nil, false
		}
	}
	return params, true
}

// Router finds routes like API Gateway does: a route is method + path; among
// the routes of the request's method, literal segments beat parameters.
type Router struct {
	patterns []pattern
	byKey    map[string]pattern
}

// NewRouter compiles routes.
func NewRouter(routes []Route) *Router {
	r := &Router{byKey: map[string]pattern{}}
	for _, rt := range routes {
		p := compile(rt)
		r.patterns = append(r.patterns, p)
		r.byKey[rt.Key()] = p
	}
	return r
}

// Find returns the route for method and path with its path parameters. When
// no route of that method matches, ok is false and allow lists the methods
// the path has (empty: the path is unknown).
func (r *Router) Find(method, path string) (route Route, params map[string]string, allow []string, ok bool) {
	var best *pattern
	for i := range r.patterns {
		p := &r.patterns[i]
		ps, matched := p.match(path)
		if !matched {
			continue
		}
		if !slices.Contains(allow, p.route.Method) {
			allow = append(allow, p.route.Method)
		}
		if p.route.Method != method {
			continue
		}
		if best == nil || p.literals > best.literals {
			best, params = p, ps
		}
	}
	slices.Sort(allow)
	if best == nil {
		return Route{}, nil, allow, false
	}
	return best.route, params, allow, true
}
