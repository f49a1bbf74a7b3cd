package api

import (
	"context"
	"net/http"
)

// Dashboard is the web dashboard's files (shared/dashboard.Files). Options
// carry it only in the binaries that serve the page, so the other functions
// do not link its files.
type Dashboard interface {
	Index() []byte
	Asset(name string) (body []byte, ctype string, ok bool)
}

// The dashboard's files are open routes (no token): they hold no data. Every
// call the page makes for data goes to the API routes with the token the page
// asks for, so "behind the same auth as the API" holds for everything it
// shows, and the page can say that a token is needed or was refused instead
// of the browser showing a bare 401. The status function serves them: it is
// the read side the page mostly calls, and a function of its own would add
// a cold start and a deployment unit for a few static files.
//
// Views live in the URL's fragment (/#/executions/1024): API Gateway has no
// route that takes every path except /api/*, and fragments need none.

// dashboardCSP allows the page's own origin only: nothing from a CDN, no
// inline script, no framing.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// GET /
func (a *API) dashboardIndex(_ context.Context, _ *call) (any, error) {
	if a.opts.Dashboard == nil {
		return nil, noDashboard()
	}
	return dashboardResponse(a.opts.Dashboard.Index(), "text/html; charset=utf-8"), nil
}

// GET /ui/{asset}
func (a *API) dashboardAsset(_ context.Context, _ *call, p assetPath) (any, error) {
	if a.opts.Dashboard == nil {
		return nil, noDashboard()
	}
	body, ctype, ok := a.opts.Dashboard.Asset(p.Asset)
	if !ok {
		return nil, errorf(http.StatusNotFound, "no dashboard file %q", p.Asset)
	}
	return dashboardResponse(body, ctype), nil
}

func noDashboard() error {
	return errorf(http.StatusNotFound, "this function does not serve the dashboard: the status function does (its routes are / and /ui/{asset})")
}

func dashboardResponse(body []byte, ctype string) *Response {
	return &Response{Status: http.StatusOK, Body: body, Header: http.Header{
		"Content-Type":            {ctype},
		"Content-Security-Policy": {dashboardCSP},
		"X-Content-Type-Options":  {"nosniff"},
		"Referrer-Policy":         {"no-referrer"},
		// The files change with the binary; a revalidation is cheap and a
		// stale app.js beside a new index.html is not.
		"Cache-Control": {"no-cache"},
	}}
}
