package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/noetl-go/noetl/shared/jsonx"
	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/resultstore"
	"github.com/noetl-go/noetl/shared/tmpl"
	"github.com/noetl-go/noetl/shared/toolkind"
	"github.com/noetl-go/noetl/shared/toolresult"
)

// MaxHTTPBody bounds a response body read into memory; a longer body is an error.
const MaxHTTPBody = 64 << 20

// runHTTP performs one request. data (R-P6) = {status_code, headers, body, data,
// url, elapsed}: url (the final one, after redirects, without userinfo) and
// elapsed (seconds) are NoETL's.
//
// Decisions where the spec is silent are in the package doc.
func (r *Registry) runHTTP(ctx context.Context, it pipeline.Item) toolresult.Envelope {
	req, client, err := r.buildRequest(ctx, it.Config)
	if err != nil {
		return failure(toolresult.KindTool, "http: "+err.Error())
	}
	allow, err := allowStatus(it.Config)
	if err != nil {
		return failure(toolresult.KindTool, "http: "+err.Error())
	}
	responseType, err := stringField(it.Config, keyNames(toolkind.HTTP, "response_type")...)
	if err != nil {
		return failure(toolresult.KindTool, "http: "+err.Error())
	}
	switch responseType {
	case "", "json", "text", "binary":
	default:
		return failure(toolresult.KindTool, fmt.Sprintf("http: response_type: expected json, text or binary, got %q", responseType))
	}
	ctx, cancel, _, err := withToolTimeout(ctx, it.Config)
	if err != nil {
		return failure(toolresult.KindTool, "http: "+err.Error())
	}
	defer cancel()
	req = req.WithContext(ctx)

	target := req.Method + " " + redactURL(req.URL)
	sent := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctxEnvelope(ctx, "http: "+target)
		}
		var guard *addressGuardError
		if errors.As(err, &guard) {
			return failure(toolresult.KindTool, fmt.Sprintf("http: %s: %v", target, guard))
		}
		// Refused, reset, DNS, TLS, a dial timeout: the request did not get an answer.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return failure(toolresult.KindConnection, fmt.Sprintf("http: %s: %v", target, err))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return ctxEnvelope(ctx, "http: "+target+": reading the response")
		}
		return failure(toolresult.KindConnection, fmt.Sprintf("http: %s: reading the response: %v", target, err))
	}
	if len(raw) > MaxHTTPBody {
		return failure(toolresult.KindTool, fmt.Sprintf("http: %s: response body exceeds %d bytes", target, MaxHTTPBody))
	}

	body, err := decodeBody(raw, resp.Header.Get("Content-Type"), responseType)
	if err != nil {
		return failure(toolresult.KindTool, fmt.Sprintf("http: %s: %v", target, err))
	}
	headers := make(map[string]any, len(resp.Header))
	for name, values := range resp.Header {
		headers[name] = strings.Join(values, ", ")
	}
	data := map[string]any{
		"status_code": int64(resp.StatusCode),
		"headers":     headers,
		"body":        body,
		"data":        body,
		"url":         redactUserinfo(resp.Request.URL),
		"elapsed":     time.Since(sent).Seconds(),
	}
	if allowed(resp.StatusCode, allow) {
		return toolresult.Envelope{Status: toolresult.StatusSuccess, Data: data}
	}
	kind := httpKind(resp.StatusCode)
	msg := fmt.Sprintf("http: HTTP %s from %s", resp.Status, target)
	if snippet := bodySnippet(raw, responseType); snippet != "" {
		msg += ": " + snippet
	}
	return toolresult.Envelope{
		Status: toolresult.StatusError,
		Data:   data,
		Error:  &toolresult.ErrorInfo{Message: msg, Kind: kind, Status: resp.StatusCode, Retryable: retryable(kind)},
	}
}

func (r *Registry) buildRequest(ctx context.Context, cfg map[string]any) (*http.Request, *http.Client, error) {
	rawURL, err := stringField(cfg, keyNames(toolkind.HTTP, "url")...)
	if err != nil {
		return nil, nil, err
	}
	if rawURL == "" {
		return nil, nil, errors.New("url is required")
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, nil, fmt.Errorf("url %q: expected an http or https URL", rawURL)
	}
	if err := r.guardURL(u); err != nil {
		return nil, nil, err
	}
	method, err := stringField(cfg, keyNames(toolkind.HTTP, "method")...)
	if err != nil {
		return nil, nil, err
	}
	method = strings.ToUpper(strings.TrimSpace(method))
	if method == "" {
		method = http.MethodGet
	}

	params, err := mapField(cfg, keyNames(toolkind.HTTP, "params")...)
	if err != nil {
		return nil, nil, err
	}
	if len(params) > 0 {
		q := u.Query()
		for _, k := range slices.Sorted(maps.Keys(params)) {
			if params[k] != nil {
				q.Add(k, tmpl.Text(params[k]))
			}
		}
		u.RawQuery = q.Encode()
	}

	var body io.Reader
	contentType := ""
	given := []string{}
	for _, names := range [][]string{keyNames(toolkind.HTTP, "json"), keyNames(toolkind.HTTP, "form"), keyNames(toolkind.HTTP, "body")} {
		if k, _, ok := first(cfg, names...); ok {
			given = append(given, k)
		}
	}
	if len(given) > 1 {
		return nil, nil, fmt.Errorf("give one of json, form and body, not %s", strings.Join(given, " and "))
	}
	if len(given) == 1 {
		switch v := cfg[given[0]]; given[0] {
		case "json":
			b, err := jsonx.Marshal(v)
			if err != nil {
				return nil, nil, fmt.Errorf("json: %w", err)
			}
			body, contentType = bytes.NewReader(b), "application/json"
		case "form":
			m, ok := v.(map[string]any)
			if !ok {
				return nil, nil, fmt.Errorf("form: expected an object, got %s", jsonx.TypeName(v))
			}
			f := url.Values{}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if m[k] != nil {
					f.Add(k, tmpl.Text(m[k]))
				}
			}
			body, contentType = strings.NewReader(f.Encode()), "application/x-www-form-urlencoded"
		case "body":
			body = strings.NewReader(tmpl.Text(v))
		}
	}

	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, nil, fmt.Errorf("request: %w", err)
	}
	headers, err := mapField(cfg, keyNames(toolkind.HTTP, "headers")...)
	if err != nil {
		return nil, nil, err
	}
	var credHeaders []string // what the credential set, dropped on a redirect to another host
	if alias, err := authAlias(cfg); err != nil {
		return nil, nil, err
	} else if alias != "" {
		cred, err := r.lookupCredential(ctx, alias)
		if err != nil {
			return nil, nil, err
		}
		if err := CheckCredentialHost(alias, cred, req.URL.Hostname(), urlPort(req.URL)); err != nil {
			return nil, nil, err
		}
		before := headerNames(req.Header)
		if err := applyHTTPCredential(req, alias, cred); err != nil {
			return nil, nil, err
		}
		for name := range req.Header {
			if !before[name] {
				credHeaders = append(credHeaders, name)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(headers)) {
		if headers[k] != nil {
			req.Header.Set(k, tmpl.Text(headers[k]))
		}
	}
	if contentType != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", contentType)
	}

	follow, err := boolField(cfg, true, keyNames(toolkind.HTTP, "follow_redirects")...)
	if err != nil {
		return nil, nil, err
	}
	verify, err := boolField(cfg, true, keyNames(toolkind.HTTP, "verify_ssl")...)
	if err != nil {
		return nil, nil, err
	}
	return req, r.httpClient(verify, follow, credHeaders), nil
}

// applyHTTPCredential sets Authorization (and extra headers) from a credential.
func applyHTTPCredential(req *http.Request, alias string, c Credential) error {
	token, _ := c.Extra["token"].(string)
	switch strings.ToLower(c.Kind) {
	case "bearer":
		if token == "" {
			token = c.Password
		}
		if token == "" {
			return fmt.Errorf("credential %q (bearer) has no token", alias)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	case "basic":
		req.SetBasicAuth(c.User, c.Password)
	case "http", "":
		if h, ok := c.Extra["headers"].(map[string]any); ok {
			for _, k := range slices.Sorted(maps.Keys(h)) {
				if h[k] != nil {
					req.Header.Set(k, tmpl.Text(h[k]))
				}
			}
		}
		switch {
		case token != "":
			req.Header.Set("Authorization", "Bearer "+token)
		case c.User != "" || c.Password != "":
			req.SetBasicAuth(c.User, c.Password)
		}
	default:
		return fmt.Errorf("credential %q has kind %q; the http tool takes kinds http, bearer and basic", alias, c.Kind)
	}
	return nil
}

// allowStatus reads allow_status: a list of codes; nil means 2xx.
func allowStatus(cfg map[string]any) ([]int, error) {
	_, v, ok := first(cfg, keyNames(toolkind.HTTP, "allow_status")...)
	if !ok || v == nil {
		return nil, nil
	}
	list, isList := v.([]any)
	if !isList {
		list = []any{v}
	}
	out := make([]int, 0, len(list))
	for _, e := range list {
		n, ok, err := numberField(map[string]any{"allow_status": e}, "allow_status")
		if err != nil || !ok || n < 100 || n > 999 || n != float64(int(n)) {
			return nil, fmt.Errorf("allow_status: expected HTTP status codes, got %s", tmpl.Text(e))
		}
		out = append(out, int(n))
	}
	return out, nil
}

func allowed(code int, allow []int) bool {
	if allow == nil {
		return code >= 200 && code < 300
	}
	return slices.Contains(allow, code)
}

// httpKind is R-W6's kind for a failing status.
func httpKind(code int) string {
	switch {
	case code == http.StatusTooManyRequests:
		return toolresult.KindRateLimit
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return toolresult.KindAuth
	case code >= 500:
		return toolresult.KindServerError
	case code >= 400:
		return toolresult.KindClientError
	default:
		return toolresult.KindTool
	}
}

// decodeBody is the response's body as the step's data: JSON decoded (text
// that is not JSON stays text), or text, or base64. A JSON body is decoded
// within a worker's bound of a result read back by reference
// (resultstore.WorkerMaxDecodedBytes): 64 MiB of tiny values would build
// gigabytes in the worker. A body past it that is not JSON (NDJSON served as
// application/json, say) stays text, as a smaller one does.
func decodeBody(raw []byte, contentType, responseType string) (any, error) {
	switch responseType {
	case "binary":
		return base64.StdEncoding.EncodeToString(raw), nil
	case "text":
		return string(raw), nil
	case "json":
		return decodeJSONBody(raw)
	}
	if isJSONType(contentType) && len(bytes.TrimSpace(raw)) > 0 {
		return decodeJSONBody(raw)
	}
	return string(raw), nil
}

func decodeJSONBody(raw []byte) (any, error) {
	v, err := jsonx.DecodeWithin(raw, resultstore.WorkerMaxDecodedBytes)
	var over *jsonx.BuildError
	if errors.As(err, &over) {
		return nil, fmt.Errorf("the JSON response body is too large to decode: %v; the limit is %s, "+
			"what a step's result may hold decoded: ask for fewer items per request (a page at a time), or set response_type: text to keep the body as text",
			over, resultstore.DecodedLimit(resultstore.WorkerMaxDecodedBytes))
	}
	if err != nil {
		return string(raw), nil
	}
	return v, nil
}

func isJSONType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// bodySnippet is the start of a text body for error messages.
func bodySnippet(raw []byte, responseType string) string {
	if responseType == "binary" {
		return ""
	}
	s := strings.Join(strings.Fields(string(raw)), " ")
	const limit = 200
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return s
}

// redactUserinfo is the URL without its userinfo: the url of the response data
// (NoETL's), which keeps the query the playbook built.
func redactUserinfo(u *url.URL) string {
	c := *u
	c.User = nil
	return c.String()
}

// redactURL drops userinfo and the query (API keys often ride there) from URLs in
// messages.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	if c.RawQuery != "" {
		c.RawQuery = ""
		return c.String() + "?…"
	}
	return c.String()
}
