// Package localgw is the local stand-in for API Gateway: one net/http server
// that turns each request into a real API Gateway HTTP API event (payload
// format 2.0), invokes the owning function's Lambda handler through
// lambda.NewHandler(h).Invoke — the same (un)marshalling Lambda does — and
// writes the function's response back. It also serves /metrics (Prometheus
// text), which exists only locally.
package localgw

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/noetl-go/noetl/shared/api"
)

// DefaultMaxBodyBytes is API Gateway's own payload limit (10 MB); each
// function enforces its smaller configured limit itself.
const DefaultMaxBodyBytes = 10 << 20

// Options configures a Gateway.
type Options struct {
	// Routes to serve (default api.Routes()).
	Routes []api.Route
	// MaxBodyBytes is the gateway's own body limit (default 10 MB).
	MaxBodyBytes int64
	// Metrics, when set, is served at GET /metrics.
	Metrics http.Handler
	// CORS is the cross-origin policy of the answers the gateway makes itself
	// (an unknown route's 404, the preflight of a path without routes, its
	// 400/413/502), as API Gateway's CORS configuration covers them in AWS;
	// nil: none. The functions apply the same policy to theirs.
	CORS *api.CORS
	// Admit is asked before a request's body is read (api.API.Admit): the
	// functions' own rules on Host, Origin, token, size and Content-Type, so
	// a refused request costs no body read whatever it sends. nil: none.
	Admit  func(ctx context.Context, r *api.Request, bodyLength int64) *api.Response
	Logger *slog.Logger
}

// Gateway routes HTTP requests to Lambda handlers.
type Gateway struct {
	router   *api.Router
	routes   []api.Route
	handlers map[string]*invoker
	opts     Options
	log      *slog.Logger
}

// invoker runs one function's handler through aws-lambda-go's own
// (un)marshalling, as Lambda does, for any number of concurrent requests.
// lambda.Handler.Invoke returns bytes of a pooled buffer that it puts back
// before returning, which is safe only for one invocation at a time (as in
// one Lambda instance): each concurrent request therefore takes a handler of
// its own, as each concurrent request in AWS gets an instance of its own, and
// copies the answer before the handler serves another request.
type invoker struct {
	handlers sync.Pool // of lambda.Handler
}

func newInvoker(h any) *invoker {
	iv := &invoker{}
	iv.handlers.New = func() any { return lambda.NewHandler(h) }
	return iv
}

func (iv *invoker) invoke(ctx context.Context, payload []byte) ([]byte, error) {
	h := iv.handlers.Get().(lambda.Handler)
	defer iv.handlers.Put(h)
	out, err := h.Invoke(ctx, payload)
	return bytes.Clone(out), err
}

// New returns a gateway over one Lambda handler per function; each handler
// is anything lambda.NewHandler accepts (e.g. lambdafn.Handler.Handle). Every
// function a route names must have a handler.
func New(handlers map[string]any, opts Options) (*Gateway, error) {
	if opts.Routes == nil {
		opts.Routes = api.Routes()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	g := &Gateway{router: api.NewRouter(opts.Routes), routes: opts.Routes, handlers: map[string]*invoker{},
		opts: opts, log: opts.Logger}
	for name, h := range handlers {
		g.handlers[name] = newInvoker(h)
	}
	for _, r := range opts.Routes {
		if g.handlers[r.Function] == nil {
			return nil, fmt.Errorf("localgw: route %s needs the %s function, which has no handler", r.Key(), r.Function)
		}
	}
	return g, nil
}

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	requestID := requestIDOf(r)
	if g.opts.Admit != nil {
		header := r.Header.Clone()
		header.Set("Host", r.Host)
		if resp := g.opts.Admit(r.Context(), &api.Request{Method: r.Method, Path: r.URL.Path, Header: header,
			RequestID: requestID, SourceIP: sourceIPOf(r)}, r.ContentLength); resp != nil {
			g.writeResponse(w, r, requestID, resp)
			return
		}
	}
	if r.URL.Path == "/metrics" && g.opts.Metrics != nil {
		w.Header().Set("X-Request-Id", requestID)
		g.opts.Metrics.ServeHTTP(w, r)
		return
	}
	route, params, allow, ok := g.router.Find(r.Method, r.URL.Path)
	routeKey, params := route.GatewayKey(), route.GatewayParams(params)
	if !ok {
		if len(allow) == 0 {
			if g.opts.CORS.IsPreflight(r.Method, r.Header) {
				g.writeResponse(w, r, requestID, g.opts.CORS.Preflight(r.Header, nil))
				return
			}
			g.writeError(w, r, requestID, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
			return
		}
		// The path exists with other methods: like an API Gateway $default
		// route, hand it to the path's function, which answers 405 (or a CORS
		// preflight).
		route = g.routeFor(r.URL.Path, allow[0])
		routeKey, params = "$default", nil
	}
	var body []byte
	if ok { // a 405 or a preflight reads no body
		if r.ContentLength > g.opts.MaxBodyBytes {
			g.writeError(w, r, requestID, http.StatusRequestEntityTooLarge, g.tooLarge())
			return
		}
		var err error
		if body, err = io.ReadAll(io.LimitReader(r.Body, g.opts.MaxBodyBytes+1)); err != nil {
			g.writeError(w, r, requestID, http.StatusBadRequest, "reading the request body: "+err.Error())
			return
		}
		if int64(len(body)) > g.opts.MaxBodyBytes {
			g.writeError(w, r, requestID, http.StatusRequestEntityTooLarge, g.tooLarge())
			return
		}
	}
	ev := ToEvent(r, body, routeKey, params, requestID)
	payload, err := json.Marshal(ev)
	if err != nil {
		g.writeError(w, r, requestID, http.StatusInternalServerError, "encoding the event: "+err.Error())
		return
	}
	out, err := g.handlers[route.Function].invoke(r.Context(), payload)
	if err != nil {
		// API Gateway answers a failed invocation with 502.
		g.log.ErrorContext(r.Context(), "function invocation failed", "function", route.Function, "route", routeKey,
			"request_id", requestID, "error", err.Error())
		g.writeError(w, r, requestID, http.StatusBadGateway, "the "+route.Function+" function failed")
		return
	}
	if err := WriteResponse(w, out); err != nil {
		g.log.ErrorContext(r.Context(), "bad function response", "function", route.Function, "error", err.Error())
		g.writeError(w, r, requestID, http.StatusBadGateway, "the "+route.Function+" function returned a malformed response")
	}
}

func (g *Gateway) tooLarge() string {
	return fmt.Sprintf("request body is over the gateway's limit of %d bytes (API Gateway's HTTP API payload limit)", g.opts.MaxBodyBytes)
}

// sourceIPOf is the TCP peer's address, as API Gateway's sourceIp.
func sourceIPOf(r *http.Request) string {
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return ip
}

// routeFor is a route of path with the given method (from Find's allow).
func (g *Gateway) routeFor(path, method string) api.Route {
	r, _, _, _ := g.router.Find(method, path)
	return r
}

// ToEvent converts a net/http request into the API Gateway HTTP API event
// Lambda would receive: route key, raw path and query, lower-cased headers
// (repeated values joined with ","), cookies, path parameters, the request
// context, and the body — base64 with isBase64Encoded when it is not UTF-8.
func ToEvent(r *http.Request, body []byte, routeKey string, params map[string]string, requestID string) events.APIGatewayV2HTTPRequest {
	now := time.Now()
	headers := map[string]string{}
	var cookies []string
	for k, vs := range r.Header {
		lk := strings.ToLower(k)
		if lk == "cookie" {
			for _, v := range vs {
				for _, c := range strings.Split(v, ";") {
					if c = strings.TrimSpace(c); c != "" {
						cookies = append(cookies, c)
					}
				}
			}
			continue
		}
		headers[lk] = strings.Join(vs, ",")
	}
	if r.Host != "" {
		headers["host"] = r.Host
	}
	// What API Gateway adds; X-Forwarded-Proto also tells the function its
	// own URL's scheme.
	proto, port := "http", "80"
	if r.TLS != nil {
		proto, port = "https", "443"
	}
	if _, p, err := net.SplitHostPort(r.Host); err == nil {
		port = p
	}
	headers["x-forwarded-proto"], headers["x-forwarded-port"] = proto, port
	var qsp map[string]string
	if q := r.URL.Query(); len(q) > 0 {
		qsp = map[string]string{}
		for k, vs := range q {
			qsp[k] = strings.Join(vs, ",")
		}
	}
	sourceIP := sourceIPOf(r)
	if xff := headers["x-forwarded-for"]; xff != "" {
		headers["x-forwarded-for"] = xff + ", " + sourceIP
	} else {
		headers["x-forwarded-for"] = sourceIP
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: routeKey, RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery,
		Cookies: cookies, Headers: headers, QueryStringParameters: qsp, PathParameters: params,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: routeKey, AccountID: "local", Stage: "$default", RequestID: requestID, APIID: "local",
			DomainName: r.Host, DomainPrefix: domainPrefix(r.Host),
			Time: now.UTC().Format("02/Jan/2006:15:04:05 -0700"), TimeEpoch: now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method: r.Method, Path: r.URL.Path, Protocol: r.Proto, SourceIP: sourceIP, UserAgent: r.UserAgent(),
			},
		},
	}
	if len(body) > 0 {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	return ev
}

func domainPrefix(host string) string {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	prefix, _, _ := strings.Cut(h, ".")
	return prefix
}

// WriteResponse writes a function's API Gateway response (its JSON, as
// returned by Invoke) to w.
func WriteResponse(w http.ResponseWriter, out []byte) error {
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		return fmt.Errorf("decode the function's response: %w", err)
	}
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		return fmt.Errorf("the function's response has status %d", resp.StatusCode)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(resp.Body)
		if err != nil {
			return fmt.Errorf("the function's base64 body does not decode: %w", err)
		}
		body = b
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotModified {
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	w.WriteHeader(resp.StatusCode)
	if len(body) > 0 {
		_, _ = w.Write(body)
	}
	return nil
}

// writeError answers in the API's error shape (api.md §1).
func writeError(w http.ResponseWriter, requestID string, status int, msg string) {
	writeResponse(w, requestID, &api.Response{Status: status,
		Header: api.JSONHeader(), Body: api.ErrorBody(status, msg, nil)})
}

func writeResponse(w http.ResponseWriter, requestID string, resp *api.Response) {
	h := w.Header()
	for k, vs := range resp.Header {
		h[k] = vs
	}
	h.Set("X-Request-Id", requestID)
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// writeError and writeResponse answer from the gateway itself, with the
// CORS headers every answer carries.
func (g *Gateway) writeError(w http.ResponseWriter, r *http.Request, requestID string, status int, msg string) {
	g.opts.CORS.Headers(r.Header, w.Header())
	writeError(w, requestID, status, msg)
}

func (g *Gateway) writeResponse(w http.ResponseWriter, r *http.Request, requestID string, resp *api.Response) {
	if resp.Header.Get("Access-Control-Allow-Origin") == "" {
		g.opts.CORS.Headers(r.Header, w.Header())
	}
	writeResponse(w, requestID, resp)
}

// requestIDOf keeps a client's X-Request-Id when it is a sane token (for
// tracing a request through logs) and makes one otherwise, as API Gateway does.
func requestIDOf(r *http.Request) string {
	id := r.Header.Get("X-Request-Id")
	if id != "" && len(id) <= 128 && !strings.ContainsFunc(id, func(c rune) bool {
		return c <= ' ' || c > '~'
	}) {
		return id
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Functions lists the functions the gateway serves, sorted.
func (g *Gateway) Functions() []string {
	var out []string
	for name := range g.handlers {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}
