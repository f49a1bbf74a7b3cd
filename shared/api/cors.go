package api

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/noetl-go/noetl/shared/jsonx"
)

// CORS is the cross-origin policy (NOETL_CORS_ORIGINS; api.md §1): which
// browser origins may call the API, and the headers every answer to them
// carries. The API applies it to its own answers; the local gateway
// (shared/dev/localgw) applies it to the answers it makes itself (an unknown
// route's 404, a preflight of any path), as API Gateway's CORS configuration
// does in AWS, so a browser on another origin reads every error instead of a
// CORS failure.
type CORS struct {
	origins map[string]bool
	any     bool
}

// NewCORS returns the policy allowing origins ("*" alone: any origin). No
// origins: same-origin only, and no CORS header is ever written.
func NewCORS(origins []string) *CORS {
	c := &CORS{origins: map[string]bool{}}
	for _, o := range origins {
		if o == "*" {
			c.any = true
		}
		c.origins[strings.TrimRight(o, "/")] = true
	}
	return c
}

// Enabled reports whether any cross-origin caller is allowed.
func (c *CORS) Enabled() bool { return c != nil && len(c.origins) > 0 }

// ExposedHeaders are the answer headers a browser client may read: the
// request id, Retry-After of a 429, and the paging headers of GET
// /api/executions. template.yaml and the CDK stack expose the same
// (TestSAMTemplateCORS).
func ExposedHeaders() []string {
	return []string{"X-Request-Id", "Retry-After", "Link", HeaderNextCursor, HeaderHasMore, HeaderLimitApplied, HeaderLimitCapped}
}

// allowed is the Access-Control-Allow-Origin value for origin, "" when the
// origin may not read the answer.
func (c *CORS) allowed(origin string) string {
	switch {
	case origin == "" || !c.Enabled():
		return ""
	case c.any:
		return "*"
	case c.origins[origin]:
		return origin
	}
	return ""
}

// Headers adds the CORS headers of an answer to a request with the given
// headers: on every answer, errors included, when its origin is allowed.
func (c *CORS) Headers(req, h http.Header) {
	origin := c.allowed(req.Get("Origin"))
	if origin == "" {
		return
	}
	h.Set("Access-Control-Allow-Origin", origin)
	h.Set("Access-Control-Expose-Headers", strings.Join(ExposedHeaders(), ", "))
	if origin != "*" {
		h.Add("Vary", "Origin")
	}
}

// IsPreflight reports whether a request is a CORS preflight this policy
// answers: OPTIONS naming the method it asks for, while cross-origin calls
// are allowed.
func (c *CORS) IsPreflight(method string, req http.Header) bool {
	return c.Enabled() && method == http.MethodOptions && req.Get("Access-Control-Request-Method") != ""
}

// Preflight answers a preflight (204) naming the path's methods and, when
// it is not one of them, the method asked for: the request itself is then
// made and answered with its 404 or 405, which a browser lets its page read,
// instead of failing as a CORS error ("Network Error" in NoETL's GUI).
func (c *CORS) Preflight(req http.Header, methods []string) *Response {
	resp := &Response{Status: http.StatusNoContent, Header: http.Header{}}
	if c.allowed(req.Get("Origin")) != "" {
		if m := strings.ToUpper(strings.TrimSpace(req.Get("Access-Control-Request-Method"))); m != "" && !slices.Contains(methods, m) {
			methods = append(slices.Clone(methods), m)
		}
		resp.Header.Set("Access-Control-Allow-Methods", strings.Join(methods, ", "))
		resp.Header.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Request-Id, "+HeaderSessionToken)
		resp.Header.Set("Access-Control-Max-Age", strconv.Itoa(600))
	}
	c.Headers(req, resp.Header)
	return resp
}

// ErrorBody is an error answer's body (api.md §1): {error, status} and, with
// the same text, NoETL's `detail`, which NoETL's clients (its GUI, its CLI)
// show. extra adds fields (retry_after_seconds, problems, …); a `detail` in
// extra is kept (a refused claim's {code, message}, which NoETL's workers
// read).
func ErrorBody(status int, msg string, extra map[string]any) []byte {
	body := map[string]any{"detail": msg}
	for k, v := range extra {
		body[k] = v
	}
	body["error"], body["status"] = msg, int64(status)
	b, err := jsonx.Marshal(body)
	if err != nil {
		// Built from JSON values; failing here is a bug.
		return []byte(`{"error":"internal error: response encoding failed","detail":"internal error: response encoding failed","status":500}`)
	}
	return b
}
