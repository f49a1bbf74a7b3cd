package tools

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/noetl-go/noetl/shared/redact"
)

// maxRedirects is the Go client's own limit, kept by our redirect rule.
const maxRedirects = 10

// httpClient is the client of every tool that makes HTTP requests (the http
// tool, transfer's http source, a script fetched over http): the registry's
// pooled transport (the insecure one when verify_ssl is false) and the one
// redirect rule, redirectRule. credential names the headers a credential
// set on the request.
func (r *Registry) httpClient(verify, follow bool, credential []string) *http.Client {
	c := &http.Client{Transport: r.transport, CheckRedirect: r.redirectRule(follow, credential)}
	if !verify {
		c.Transport = r.insecureTransport
	}
	return c
}

// redirectRule follows up to maxRedirects redirects (none unless follow),
// each to a URL the address guard allows (guardURL), and once a redirect has
// left the first request's origin (another host or port, or https to http)
// drops every credential header from that request and the ones after it:
// Go's client drops only Authorization, WWW-Authenticate and Cookie, so an
// api_key credential's X-API-Key (or any header a credential or the step set
// under a secret name) would otherwise reach the other host.
func (r *Registry) redirectRule(follow bool, credential []string) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if !follow {
			return http.ErrUseLastResponse
		}
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if err := r.guardURL(req.URL); err != nil {
			return err
		}
		for _, hop := range append(via[1:], req) {
			if !sameOrigin(via[0].URL, hop.URL) {
				dropCredentialHeaders(req.Header, credential)
				break
			}
		}
		return nil
	}
}

// sameOrigin: the same host and port, and no step down from https to http.
func sameOrigin(from, to *url.URL) bool {
	return strings.EqualFold(from.Hostname(), to.Hostname()) && effectivePort(from) == effectivePort(to) &&
		!(from.Scheme == "https" && to.Scheme != "https")
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// dropCredentialHeaders removes the headers a credential set, the
// authorization and cookie headers, and every header whose name is a secret's
// (redact.SecretKey: X-API-Key, X-Auth-Token, …) or whose value looks like a
// credential (redact.SecretString).
func dropCredentialHeaders(h http.Header, credential []string) {
	for _, name := range credential {
		h.Del(name)
	}
	for name, values := range h {
		switch {
		case redact.SecretKey(name), strings.EqualFold(name, "Cookie"), strings.EqualFold(name, "Proxy-Authorization"):
			h.Del(name)
		default:
			for _, v := range values {
				if redact.SecretString(v) {
					h.Del(name)
					break
				}
			}
		}
	}
}

// headerNames lists the header names set on h.
func headerNames(h http.Header) map[string]bool {
	out := make(map[string]bool, len(h))
	for name := range h {
		out[name] = true
	}
	return out
}
