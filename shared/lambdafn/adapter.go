package lambdafn

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/noetl-go/noetl/shared/api"
)

// ToRequest converts an API Gateway HTTP API (payload format 2.0) event into
// an api.Request. A base64 body (isBase64Encoded: binary content types, or a
// body that is not UTF-8) is decoded; an undecodable one is an error the
// caller answers with 400.
func ToRequest(ev *events.APIGatewayV2HTTPRequest) (*api.Request, error) {
	r := &api.Request{
		Method:     ev.RequestContext.HTTP.Method,
		Path:       ev.RawPath,
		Route:      ev.RouteKey,
		PathParams: ev.PathParameters,
		Header:     http.Header{},
		RequestID:  ev.RequestContext.RequestID,
		SourceIP:   ev.RequestContext.HTTP.SourceIP,
	}
	if r.Path == "" {
		r.Path = ev.RequestContext.HTTP.Path
	}
	for k, v := range ev.Headers {
		r.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		r.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	q, err := url.ParseQuery(ev.RawQueryString)
	if err != nil {
		return r, &requestError{msg: "malformed query string: " + err.Error()}
	}
	r.Query = q
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return r, &requestError{msg: "the body is flagged base64 but does not decode: " + err.Error()}
		}
		r.Body = b
	} else if ev.Body != "" {
		r.Body = []byte(ev.Body)
	}
	return r, nil
}

type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

// FromResponse converts an api.Response into API Gateway's response. Bodies
// that are not UTF-8 travel base64 encoded (API Gateway decodes them);
// repeated headers are joined with ", " (payload 2.0 has no multi-value
// headers).
func FromResponse(r *api.Response) events.APIGatewayV2HTTPResponse {
	out := events.APIGatewayV2HTTPResponse{StatusCode: r.Status, Headers: map[string]string{}}
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out.Headers[k] = strings.Join(r.Header[k], ", ")
	}
	if utf8.Valid(r.Body) {
		out.Body = string(r.Body)
	} else {
		out.Body, out.IsBase64Encoded = base64.StdEncoding.EncodeToString(r.Body), true
	}
	return out
}
