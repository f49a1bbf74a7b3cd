// Package api is the transport-free HTTP API of the control plane (api.md):
// routing, authentication, validation, limits and the JSON shapes of every
// route. A Lambda function (shared/lambdafn) and the local server
// (shared/dev/localgw, through the same Lambda adapter) turn their transport into a
// Request and write the Response back; nothing here knows either transport.
//
// Every route is declared once, in Routes (routes.go): its method, path,
// Lambda function, token scope and handler, whose request and answer types
// give its shapes.
// Dispatch, the OpenAPI document served at GET /api/openapi.json, routes.json
// (read by the CDK stack) and template.yaml's route events derive from it.
//
// Conventions (api.md §1):
//   - Errors are always {"error": "<message>", "status": <code>} with
//     Content-Type application/json, and the message again as NoETL's
//     "detail" (its clients show that field): 400 malformed JSON, 422 wrong types or
//     missing fields (the message names the field path, e.g.
//     `events[3].event_type: required`), 404 unknown route or unknown id, 405
//     wrong method (with Allow), 413 over a size limit, 401/403 auth, 409
//     conflicts, 429 with Retry-After for a claim before a retry is due
//     (R-L7). Replay's parameter errors are NoETL's 400s (R-A2).
//   - Request JSON is decoded with shared/jsonx (integral numbers stay int64)
//     into the route's request type, declared once in shared/wire
//     (requests.go) and read by jsonx.Read; ids are accepted as numbers or
//     numeric strings. Every route runs the one skeleton (handle in
//     routes.go): decode, call, answer.
//   - What the store cannot keep is refused before anything is written
//     (decodeBody, checkParams): a NUL character in any key or value of a
//     body, the query string or a path parameter, or text there that is not
//     UTF-8, is a 422 naming the field (a body that is not UTF-8 is a 400);
//     a body nesting more than MaxJSONDepth levels is a 422.
//   - Ids in responses are decimal strings (R-I2), with one deliberate
//     exception: command bodies (GET /api/commands/{event_id} and the claim
//     response) keep NoETL's JSON integers for event_id and execution_id,
//     because NoETL workers read those fields as numbers (R-A5 supports NoETL
//     workers). Go's encoder writes int64 exactly; a JavaScript client reading
//     a command body should use command_id, a string, instead.
//   - Every response carries X-Request-Id; each request logs one structured
//     line with the request id and, where known, the execution and command ids.
package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/config"
	"github.com/noetl-go/noetl/shared/controlplane"
	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/wire"
)

// Limits (api.md §1).
const (
	DefaultMaxBodyBytes     = config.DefaultMaxBodyBytes // NOETL_MAX_BODY_BYTES's default
	DefaultMaxPlaybookBytes = 512 << 10
	MaxBatchEvents          = wire.MaxBatchEvents
	MaxListLimit            = 1000
	DefaultListLimit        = 100
)

// Request is one HTTP request, transport-free.
type Request struct {
	Method string
	// Path is the request path without query (API Gateway's rawPath).
	Path string
	// Route is API Gateway's route key ("POST /api/commands/{event_id}/claim")
	// when the transport already matched the route; with PathParams it is
	// trusted over Path (a named stage prefixes rawPath). Empty or "$default":
	// the API matches Path itself.
	Route      string
	PathParams map[string]string
	Query      url.Values
	Header     http.Header
	Body       []byte
	// RequestID is the transport's request id (API Gateway's); empty: one is made.
	RequestID string
	// SourceIP is the peer's address as the transport saw it (API Gateway's
	// requestContext.http.sourceIp; the local gateway's TCP peer), never a
	// header a client can set.
	SourceIP string
}

// Response is what the transport writes back. Body is always JSON except for
// an empty 204 (CORS preflight).
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// Checker checks one dependency for the health route; nil error is healthy.
type Checker func(ctx context.Context) error

// Recorder observes requests (the local server's /metrics); nil records
// nothing. Implementations must be safe for concurrent use.
type Recorder interface {
	// Request is called once per request with its route key ("" when none matched).
	Request(route string, status int, d time.Duration)
	// Ingest is called once per POST /api/events, /api/events/batch or
	// /api/worker/report request
	// that passed validation, with the event types it carried.
	Ingest(eventTypes []string, status int, d time.Duration)
	// Claim is called once per claim request that reached the service.
	Claim(status int)
}

// Options configures an API.
type Options struct {
	// Tokens are the bearer tokens per scope (R-A3). Empty: the API runs open
	// (the caller must say so loudly; a Lambda refuses unless allowed).
	Tokens config.Tokens
	// TokenlessWorkers are the networks whose requests without an
	// Authorization header get the worker scope (config.TokenlessWorkers).
	TokenlessWorkers []netip.Prefix
	// MaxBodyBytes limits request bodies (default 1 MiB).
	MaxBodyBytes int64
	// MaxPlaybookBytes limits a playbook's content (default 512 KiB).
	MaxPlaybookBytes int64
	// CORSOrigins lists allowed browser origins, or "*"; empty: same-origin
	// only. A request from another origin is refused (guard.go).
	CORSOrigins []string
	// Hosts is the Host headers the API answers (guard.go); nil: any (behind
	// API Gateway). The local server sets it (devserver).
	Hosts *HostRule
	// Version is reported by the health route.
	Version string
	// Database checks the databases; nil pings the cluster and every shard pool.
	Database Checker
	// NATS checks the NATS connection; nil reports "disabled".
	NATS Checker
	// Recorder observes requests; nil: none.
	Recorder Recorder
	// Logger receives one line per request (default slog.Default()).
	Logger *slog.Logger
	// Dashboard serves / and /ui/{asset}; nil: they answer 404 (every
	// function but status).
	Dashboard Dashboard
	// Keychain serves the credential routes; nil: they answer 503 (only the
	// keychain function, noetl dev and noetl serve have one).
	Keychain Keychain
}

// API serves the control plane's HTTP API over a Service.
type API struct {
	svc    *controlplane.Service
	opts   Options
	log    *slog.Logger
	router *Router
	cors   *CORS
}

// New returns an API over svc.
func New(svc *controlplane.Service, opts Options) *API {
	opts.MaxBodyBytes = positiveOr(opts.MaxBodyBytes, DefaultMaxBodyBytes)
	opts.MaxPlaybookBytes = positiveOr(opts.MaxPlaybookBytes, DefaultMaxPlaybookBytes)
	opts.Logger = cmp.Or(opts.Logger, slog.Default())
	opts.Version = cmp.Or(opts.Version, "dev")
	a := &API{svc: svc, opts: opts, log: opts.Logger, router: NewRouter(Routes()), cors: NewCORS(opts.CORSOrigins)}
	if opts.Database == nil {
		a.opts.Database = a.pingDatabases
	}
	return a
}

// positiveOr is v, or def when v is zero or negative: a limit left unset (or
// set below one) gets its default, as it always has.
func positiveOr[T ~int | ~int64](v, def T) T { return cmp.Or(max(v, 0), def) }

// Open reports whether the API authenticates nobody (no token configured).
func (a *API) Open() bool { return a.opts.Tokens.Empty() }

// Service is the service the API serves.
func (a *API) Service() *controlplane.Service { return a.svc }

// Serve answers a request on any route.
func (a *API) Serve(ctx context.Context, r *Request) *Response { return a.serve(ctx, r, "") }

// Function is the part of the API one Lambda function serves.
type Function struct {
	api  *API
	name string
}

// Function returns a handler restricted to one Lambda function's routes
// (R-A1: each route belongs to exactly one function; health is the status
// function's). A route of another function answers 404.
func (a *API) Function(name string) (*Function, error) {
	if !slices.Contains(Functions(), name) {
		return nil, fmt.Errorf("api: unknown function %q; functions are %s", name, strings.Join(Functions(), ", "))
	}
	return &Function{api: a, name: name}, nil
}

// Name is the function's name.
func (f *Function) Name() string { return f.name }

// API is the API the function belongs to.
func (f *Function) API() *API { return f.api }

// Serve answers a request on one of the function's routes.
func (f *Function) Serve(ctx context.Context, r *Request) *Response {
	return f.api.serve(ctx, r, f.name)
}

// call is one request being served.
type call struct {
	req    *Request
	route  Route
	params map[string]string
	attrs  *logAttrs
	// auth is who the caller authenticated as.
	auth caller
}

// caller is who a request authenticated as: its token's scopes (every scope
// when the API runs open) and a fingerprint of its token.
type caller struct {
	scopes config.Scope
	open   bool
	// tokenless: admitted without a token from a tokenless worker network.
	tokenless bool
	token     string // fingerprint, never the token
}

// scopeLabel names the caller's scopes for logs and the credential read log.
func (c caller) scopeLabel() string {
	if c.open {
		return "open"
	}
	return scopeName(c.scopes)
}

func (a *API) serve(ctx context.Context, r *Request, function string) (resp *Response) {
	start := time.Now()
	if r.RequestID == "" {
		r.RequestID = newRequestID()
	}
	attrs := &logAttrs{requestID: r.RequestID}
	ctx = withLogAttrs(ctx, attrs)
	if r.Header == nil {
		r.Header = http.Header{}
	}
	if r.Query == nil {
		r.Query = url.Values{}
	}
	routeKey := ""
	defer func() {
		if p := recover(); p != nil {
			a.log.ErrorContext(ctx, "panic serving request", "panic", fmt.Sprint(p), "route", routeKey)
			resp = a.errorResponse(errorf(http.StatusInternalServerError, "internal error"))
		}
		a.finish(ctx, r, resp, routeKey, time.Since(start))
	}()

	if e := a.guard(r); e != nil {
		return a.errorResponse(e)
	}
	rt, params, allow, ok := a.route(r)
	if !ok {
		if r.Method == http.MethodOptions && a.cors.Enabled() && (len(allow) > 0 || a.cors.IsPreflight(r.Method, r.Header)) {
			return a.cors.Preflight(r.Header, allow)
		}
		if len(allow) > 0 {
			e := errorf(http.StatusMethodNotAllowed, "method %s is not allowed on %s; use %s", r.Method, r.Path, strings.Join(allow, ", "))
			e.Header = http.Header{"Allow": {strings.Join(allow, ", ")}}
			return a.errorResponse(e)
		}
		return a.errorResponse(errorf(http.StatusNotFound, "no route %s %s", r.Method, r.Path))
	}
	routeKey = rt.Key()
	if function != "" && rt.Function != function {
		return a.errorResponse(errorf(http.StatusNotFound, "route %s is served by the %s function, not %s", routeKey, rt.Function, function))
	}
	who, aerr := a.admit(r, rt, int64(len(r.Body)))
	if aerr != nil {
		return a.errorResponse(aerr)
	}
	if err := checkParams(r.Query, params); err != nil {
		return a.errorResponse(err)
	}
	if rt.handler.run == nil { // a route declared without a handler: a bug (TestOpenAPIMatchesServedRoutes), said plainly
		return a.errorResponse(errorf(http.StatusNotImplemented, "%s is not implemented", routeKey))
	}
	body, err := rt.handler.run(a, ctx, &call{req: r, route: rt, params: params, attrs: attrs, auth: who})
	if err != nil {
		e := classify(err)
		if e.Status >= 500 && e.Status != http.StatusServiceUnavailable { // an outage is logged by the store, once
			a.log.ErrorContext(ctx, "request failed", "route", routeKey, "error", err.Error())
		}
		return a.errorResponse(e)
	}
	if own, ok := body.(*Response); ok {
		return own // a handler that sets its own status (health's 503)
	}
	return a.jsonResponse(http.StatusOK, body)
}

// route finds the request's route: by the transport's route key when given,
// else by method and path.
func (a *API) route(r *Request) (Route, map[string]string, []string, bool) {
	if r.Route != "" && r.Route != "$default" {
		if p, ok := a.router.byKey[r.Route]; ok {
			params, matched := r.PathParams, true
			if params == nil {
				params, matched = p.match(r.Path)
				matched = matched || p.greedy < 0 // a named stage prefixes rawPath
			} else {
				params, matched = p.fromGateway(params)
			}
			if !matched { // a greedy route's path without the segments after it
				return Route{}, nil, nil, false
			}
			return p.route, params, nil, true
		}
	}
	return a.router.Find(r.Method, r.Path)
}

// authorize checks the bearer token against the route's scope (R-A3) and
// says who the caller is.
func (a *API) authorize(r *Request, rt Route) (caller, *Error) {
	if rt.Scope == config.ScopeAdmin && len(a.opts.Tokens.Admin) == 0 {
		return caller{}, adminOff(rt, "this server has no admin token")
	}
	if a.opts.Tokens.Empty() {
		return caller{scopes: config.ScopeAPI | config.ScopeWorker | config.ScopeInternal, open: true}, nil
	}
	if rt.Scope == 0 {
		return caller{}, nil
	}
	unauthorized := func(msg string) *Error {
		if rt.Scope == config.ScopeInternal {
			// NoETL answers 403 to any request without the right internal
			// token (missing, malformed or wrong); its system playbooks and
			// autoscalers expect that.
			return errorf(http.StatusForbidden, "%s; /api/internal/* needs the internal token (NOETL_INTERNAL_API_TOKEN)", msg)
		}
		e := errorf(http.StatusUnauthorized, "%s", msg)
		e.Header = http.Header{"Www-Authenticate": {`Bearer realm="noetl"`}}
		return e
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		// NoETL's clients send their token as X-Session-Token too (its CLI
		// sends both headers); Authorization wins when both are sent, as on
		// NoETL's server.
		if tok := strings.TrimSpace(r.Header.Get(HeaderSessionToken)); tok != "" {
			h = "Bearer " + tok
		}
	}
	if h == "" {
		if rt.Tokenless && r.Header.Get("Origin") == "" && a.tokenlessWorker(r) {
			// The worker scope alone, on the routes a worker needs for its
			// own commands. A browser (it sends Origin) is no worker: a page
			// in that network gets nothing without a token.
			return caller{scopes: config.ScopeWorker, tokenless: true, token: "none, from " + r.SourceIP}, nil
		}
		return caller{}, unauthorized("missing bearer token: send Authorization: Bearer <token> (or " + HeaderSessionToken + ": <token>)")
	}
	scheme, token, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return caller{}, unauthorized("the Authorization header must be Bearer <token>")
	}
	token = strings.TrimSpace(token)
	scopes := a.opts.Tokens.Scopes(token)
	if scopes == 0 {
		return caller{}, unauthorized("invalid token")
	}
	if scopes&rt.Scope == 0 && rt.Scope == config.ScopeAdmin {
		return caller{}, adminOff(rt, "this token has the "+scopeName(scopes)+" scope")
	}
	if scopes&rt.Scope == 0 { // a route may admit several scopes: any one will do
		return caller{}, errorf(http.StatusForbidden, "this token has the %s scope; %s needs the %s scope",
			scopeName(scopes), rt.Key(), scopeName(rt.Scope))
	}
	return caller{scopes: scopes, token: fingerprint(token)}, nil
}

// adminOff is the 403 of an admin route (docs/security.md, "The database
// routes"): off unless the server has an admin token and the request sends it.
func adminOff(rt Route, why string) *Error {
	return errorf(http.StatusForbidden, "%s needs the admin scope and %s: the database routes are off unless enabled; "+
		"set %s on the server (or \"admin\" in the tokens secret) and send that token (docs/security.md)", rt.Key(), why, config.EnvAdminToken)
}

// HeaderSessionToken is NoETL's session token header, accepted as the token
// when Authorization is absent.
const HeaderSessionToken = "X-Session-Token"

// fingerprint names a token in logs without revealing it: the first 12 hex
// digits of its SHA-256 (tokens are long random strings; 48 bits of a hash
// say nothing about them).
func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:6])
}

// tokenlessWorker reports whether a request without a token comes from a
// network configured for tokenless workers: it then has the worker scope,
// and only that (NoETL's Python worker sends no token; docs/noetl-compat.md).
// A request that sends a token is judged by its token alone.
func (a *API) tokenlessWorker(r *Request) bool {
	if len(a.opts.TokenlessWorkers) == 0 {
		return false
	}
	ip, err := netip.ParseAddr(r.SourceIP)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range a.opts.TokenlessWorkers {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// finish adds the headers every response carries and logs the request.
func (a *API) finish(ctx context.Context, r *Request, resp *Response, routeKey string, d time.Duration) {
	if resp.Header == nil {
		resp.Header = http.Header{}
	}
	resp.Header.Set("X-Request-Id", r.RequestID)
	if resp.Header.Get("Access-Control-Allow-Origin") == "" { // a preflight has them already
		a.cors.Headers(r.Header, resp.Header)
	}
	if rec := a.opts.Recorder; rec != nil {
		rec.Request(routeKey, resp.Status, d)
	}
	level := slog.LevelInfo
	switch {
	case resp.Status == http.StatusServiceUnavailable:
		level = slog.LevelWarn // a dependency away: the client retries
	case resp.Status >= 500:
		level = slog.LevelError
	}
	args := []any{"method", r.Method, "path", r.Path, "route", routeKey,
		"status", resp.Status, "duration_ms", float64(d.Microseconds()) / 1000}
	if l, ok := ctx.Value(logAttrsKey{}).(*logAttrs); ok {
		for _, at := range l.attrs() {
			args = append(args, at)
		}
	} else {
		args = append(args, "request_id", r.RequestID)
	}
	a.log.Log(ctx, level, "request", args...)
}

// JSONHeader is the header of every JSON answer, the API's and its
// transports' own: its type, and nosniff, so a browser never takes one for
// HTML or a script whatever text it holds.
func JSONHeader() http.Header {
	return http.Header{"Content-Type": {"application/json"}, "X-Content-Type-Options": {"nosniff"}}
}

func (a *API) jsonResponse(status int, body any) *Response {
	b, err := jsonx.Marshal(body)
	if err != nil {
		// Every body is built from JSON values; failing here is a bug.
		status = http.StatusInternalServerError
		b = []byte(`{"error":"internal error: response encoding failed","status":500}`)
	}
	return &Response{Status: status, Header: JSONHeader(), Body: b}
}

func (a *API) errorResponse(e *Error) *Response {
	resp := &Response{Status: e.Status, Header: JSONHeader(),
		Body: ErrorBody(e.Status, e.Message, e.Extra)}
	for k, vs := range e.Header {
		resp.Header[k] = vs
	}
	return resp
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
