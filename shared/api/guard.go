package api

import (
	"context"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// The rules a request passes before its body is read (docs/security.md,
// "The HTTP surface"), written once here: the API applies them to every
// request (Lambda behind API Gateway and the local server alike), and the
// local gateway asks for them (Admit) before it reads a body, so a refused
// request costs no body read, whatever its size.
//
//  1. Host (HostRule): on the local server the Host header must name the
//     server itself (its listen address, a loopback name, NOETL_SERVER_URL's
//     host or a name in NOETL_ALLOWED_HOSTS), else 421: a page whose DNS name
//     was rebound to 127.0.0.1 cannot reach the API. In AWS API Gateway owns
//     the host, and the API checks none.
//  2. Origin: a request carrying an Origin header (every cross-origin
//     browser request and same-origin POSTs) must come from the API's own
//     origin or one in NOETL_CORS_ORIGINS, else 403.
//  3. Authentication (authorize) and the body size limit: a wrong token is a
//     401 and a body over the limit a 413, both known from the headers.
//  4. Content-Type: a request with a body must send it as JSON
//     (application/json or a +json type), else 415. A form or text/plain
//     body is what a web page may send cross-origin without a preflight; a
//     JSON one needs the preflight, which the CORS policy then refuses.
//     Every client of this API sends JSON: ours (shared/client, the
//     dashboard), NoETL's Python and Rust workers, its GUI and its CLI.

// HostRule says which Host headers the local server answers. nil: any (the
// API behind API Gateway).
type HostRule struct {
	names map[string]bool
	// anyIP: the server listens on every address (0.0.0.0 or ::), so any IP
	// literal names it; a rebound DNS name is never an IP literal.
	anyIP bool
	any   bool
}

// NewHostRule is the rule for a server listening on listen (host:port) that
// also answers to the names given (NOETL_SERVER_URL's host, NOETL_ALLOWED_HOSTS;
// "*" turns the check off). Loopback names and addresses are always allowed.
func NewHostRule(listen string, names ...string) *HostRule {
	h := &HostRule{names: map[string]bool{"localhost": true}}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsUnspecified() {
		h.anyIP = true
	} else if host != "" {
		h.names[normalHost(host)] = true
	}
	for _, n := range names {
		switch n = strings.TrimSpace(n); n {
		case "":
		case "*":
			h.any = true
		default:
			h.names[normalHost(n)] = true
		}
	}
	return h
}

// normalHost is a host name as compared: lower case, without brackets and a
// trailing dot.
func normalHost(h string) string {
	return strings.TrimSuffix(strings.Trim(strings.ToLower(h), "[]"), ".")
}

// Allows reports whether a request whose Host header is hostport may be
// answered.
func (h *HostRule) Allows(hostport string) bool {
	if h == nil || h.any {
		return true
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = normalHost(host)
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.IsLoopback() || h.anyIP || h.names[ip.String()]
	}
	return h.names[host] || strings.HasSuffix(host, ".localhost") && h.names["localhost"]
}

// guard applies rules 1 and 2 (Host, Origin) to any request, routed or not.
func (a *API) guard(r *Request) *Error {
	host := r.Header.Get("Host")
	if !a.opts.Hosts.Allows(host) {
		return errorf(http.StatusMisdirectedRequest,
			"this server does not answer for host %q: call it by its listen address or a loopback name, or add the name to NOETL_ALLOWED_HOSTS", jsonx.Cut(host, 100))
	}
	origin := r.Header.Get("Origin")
	if origin == "" || a.cors.allowed(origin) != "" || sameOrigin(origin, host) {
		return nil
	}
	return errorf(http.StatusForbidden,
		"requests from origin %q are refused: a page may call this API only from its own origin or one listed in NOETL_CORS_ORIGINS", jsonx.Cut(origin, 100))
}

// sameOrigin reports whether origin (scheme://host[:port]) is the API's own:
// the host the request was sent to.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || host == "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// admit applies rules 3 and 4 to a routed request whose body is
// bodyLength bytes (-1: not known before it is read).
func (a *API) admit(r *Request, rt Route, bodyLength int64) (caller, *Error) {
	who, err := a.authorize(r, rt)
	if err != nil {
		return caller{}, err
	}
	if limit := max(a.opts.MaxBodyBytes, rt.MaxBody); bodyLength > limit {
		return caller{}, errorf(http.StatusRequestEntityTooLarge,
			"request body is %d bytes; the limit is %d bytes", bodyLength, limit)
	}
	if bodyLength != 0 {
		if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
			return caller{}, err
		}
	}
	return who, nil
}

// checkContentType refuses a body that is not declared JSON (rule 4).
func checkContentType(ct string) *Error {
	media, _, err := mime.ParseMediaType(ct)
	if err == nil && (media == "application/json" || strings.HasPrefix(media, "application/") && strings.HasSuffix(media, "+json")) {
		return nil
	}
	if ct == "" {
		ct = "none"
	}
	return errorf(http.StatusUnsupportedMediaType,
		"request bodies must be JSON sent as Content-Type: application/json (curl: --json or -H 'Content-Type: application/json'); this one is %s", jsonx.Cut(ct, 100))
}

// Admit is what the local gateway asks before it reads a request's body:
// nil when the request may proceed, else the answer the API would give it
// (Host, Origin, the token, the size from Content-Length, the
// Content-Type). r carries no body; bodyLength is its Content-Length, -1
// when unknown. A request for no route is left to the function (its 404
// or 405 reads no body).
func (a *API) Admit(ctx context.Context, r *Request, bodyLength int64) (resp *Response) {
	start := time.Now()
	if r.RequestID == "" {
		r.RequestID = newRequestID()
	}
	if r.Header == nil {
		r.Header = http.Header{}
	}
	routeKey := ""
	defer func() {
		if resp != nil {
			a.finish(withLogAttrs(ctx, &logAttrs{requestID: r.RequestID}), r, resp, routeKey, time.Since(start))
		}
	}()
	if e := a.guard(r); e != nil {
		return a.errorResponse(e)
	}
	rt, _, _, ok := a.route(r)
	if !ok {
		return nil
	}
	routeKey = rt.Key()
	if _, e := a.admit(r, rt, bodyLength); e != nil {
		return a.errorResponse(e)
	}
	return nil
}
