package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/toolresult"
)

// testServer answers:
//
//	/echo         JSON {method, query, headers, body}; sets a repeated X-Multi header
//	/status/N     status N with a JSON body
//	/text         text/plain
//	/binary       application/octet-stream bytes 0..255
//	/bigint       JSON with an id above 2^53
//	/jsonish      JSON sent as text/plain
//	/redirect     302 → /echo
//	/slow         waits for the client to go away
//	/tiny         66 MB of JSON `[{},{},…]`: 1.6 GiB once decoded
//	/ndjson       44 MB of NDJSON (one object a line) as application/json
func testServer(t *testing.T, tlsServer bool) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"method":        r.Method,
			"query":         r.URL.RawQuery,
			"content_type":  r.Header.Get("Content-Type"),
			"authorization": r.Header.Get("Authorization"),
			"x_custom":      r.Header.Get("X-Custom"),
			"body":          string(b),
		})
	})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"code": %d, "detail": "status %d"}`, code, code)
	})
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "hello")
	})
	mux.HandleFunc("/binary", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(i)
		}
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/bigint", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.api+json")
		_, _ = io.WriteString(w, `{"id": 9007199254740993, "ratio": 0.5}`)
	})
	mux.HandleFunc("/jsonish", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, `{"a": 1}`)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/echo?from=redirect", http.StatusFound)
	})
	mux.HandleFunc("/tiny", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "["+strings.Repeat("{},", 21<<20)+"{}]")
	})
	mux.HandleFunc("/ndjson", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, strings.Repeat(`{"a":0,"b":0}`+"\n", 3<<20))
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	})
	var srv *httptest.Server
	if tlsServer {
		srv = httptest.NewTLSServer(mux)
	} else {
		srv = httptest.NewServer(mux)
	}
	t.Cleanup(srv.Close)
	return srv
}

func httpCfg(url string, extra ...any) map[string]any {
	cfg := map[string]any{"kind": "http", "url": url}
	for i := 0; i+1 < len(extra); i += 2 {
		cfg[extra[i].(string)] = extra[i+1]
	}
	return cfg
}

func TestHTTPShapeHeadersAndParams(t *testing.T) {
	t.Parallel()
	srv := testServer(t, false)
	r := New(Options{})
	env := execTool(t, r, httpCfg(srv.URL+"/echo?keep=1",
		"params", map[string]any{"a": 1, "b": nil, "c": true, "d": 1.5, "e": map[string]any{"x": 1}, "f": "s p", "g": int64(9007199254740993)},
		"headers", map[string]any{"X-Custom": 42, "X-Null": nil}), nil)
	mustSucceed(t, env)
	d := dataMap(t, env)
	for _, k := range []string{"status_code", "headers", "body", "data", "url", "elapsed"} {
		if _, ok := d[k]; !ok {
			t.Fatalf("data lacks %s: %v", k, d)
		}
	}
	if len(d) != 6 {
		t.Fatalf("data has extra keys: %v", d)
	}
	if u, _ := d["url"].(string); !strings.HasPrefix(u, srv.URL+"/echo?") || !strings.Contains(u, "keep=1") {
		t.Fatalf("url = %v, want the request's, query included (NoETL's)", d["url"])
	}
	if e, ok := d["elapsed"].(float64); !ok || e <= 0 {
		t.Fatalf("elapsed = %#v, want seconds", d["elapsed"])
	}
	if d["status_code"] != int64(200) {
		t.Fatalf("status_code = %#v", d["status_code"])
	}
	same(t, "data is an alias of body", d["data"], d["body"])
	headers := d["headers"].(map[string]any)
	if headers["X-Multi"] != "a, b" {
		t.Fatalf("repeated header = %#v, want \"a, b\"", headers["X-Multi"])
	}
	if headers["Content-Type"] != "application/json" {
		t.Fatalf("headers = %v", headers)
	}
	body := d["body"].(map[string]any)
	// R-T2 text form, null omitted, the URL's own query kept; keys sorted by encoding.
	wantQuery := "a=1&c=true&d=1.5&e=%7B%22x%22%3A1%7D&f=s+p&g=9007199254740993&keep=1"
	if body["query"] != wantQuery {
		t.Fatalf("query = %q, want %q", body["query"], wantQuery)
	}
	if body["method"] != "GET" || body["x_custom"] != "42" {
		t.Fatalf("echo = %v", body)
	}
}

func TestHTTPBodies(t *testing.T) {
	t.Parallel()
	srv := testServer(t, false)
	r := New(Options{})

	env := execTool(t, r, httpCfg(srv.URL+"/echo", "method", "post", "json", map[string]any{"n": int64(9007199254740993), "s": "<&>"}), nil)
	mustSucceed(t, env)
	body := dataMap(t, env)["body"].(map[string]any)
	if body["method"] != "POST" || body["content_type"] != "application/json" || body["body"] != `{"n":9007199254740993,"s":"<&>"}` {
		t.Fatalf("json echo = %v", body)
	}

	env = execTool(t, r, httpCfg(srv.URL+"/echo", "method", "PUT", "form", map[string]any{"a": 1, "b": "x y", "z": nil}), nil)
	mustSucceed(t, env)
	body = dataMap(t, env)["body"].(map[string]any)
	if body["content_type"] != "application/x-www-form-urlencoded" || body["body"] != "a=1&b=x+y" {
		t.Fatalf("form echo = %v", body)
	}

	env = execTool(t, r, httpCfg(srv.URL+"/echo", "method", "POST", "body", "raw text", "headers", map[string]any{"Content-Type": "text/csv"}), nil)
	mustSucceed(t, env)
	body = dataMap(t, env)["body"].(map[string]any)
	if body["content_type"] != "text/csv" || body["body"] != "raw text" {
		t.Fatalf("body echo = %v", body)
	}

	env = execTool(t, r, httpCfg(srv.URL+"/echo", "method", "POST", "json", map[string]any{}, "body", "x"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "not json and body")
}

func TestHTTPResponseTypes(t *testing.T) {
	t.Parallel()
	srv := testServer(t, false)
	r := New(Options{})

	env := execTool(t, r, httpCfg(srv.URL+"/text"), nil)
	mustSucceed(t, env)
	if dataMap(t, env)["body"] != "hello" {
		t.Fatalf("text body = %#v", dataMap(t, env)["body"])
	}

	env = execTool(t, r, httpCfg(srv.URL+"/bigint"), nil)
	mustSucceed(t, env)
	b := dataMap(t, env)["body"].(map[string]any)
	if b["id"] != int64(9007199254740993) || b["ratio"] != 0.5 {
		t.Fatalf("+json body = %#v", b)
	}

	env = execTool(t, r, httpCfg(srv.URL+"/jsonish"), nil)
	mustSucceed(t, env)
	if dataMap(t, env)["body"] != `{"a": 1}` {
		t.Fatalf("text/plain without response_type stays text: %#v", dataMap(t, env)["body"])
	}
	env = execTool(t, r, httpCfg(srv.URL+"/jsonish", "response_type", "json"), nil)
	mustSucceed(t, env)
	same(t, "response_type json", dataMap(t, env)["body"], map[string]any{"a": 1})

	env = execTool(t, r, httpCfg(srv.URL+"/bigint", "response_type", "text"), nil)
	mustSucceed(t, env)
	if dataMap(t, env)["body"] != `{"id": 9007199254740993, "ratio": 0.5}` {
		t.Fatalf("response_type text = %#v", dataMap(t, env)["body"])
	}

	env = execTool(t, r, httpCfg(srv.URL+"/binary", "response_type", "binary"), nil)
	mustSucceed(t, env)
	raw, err := base64.StdEncoding.DecodeString(dataMap(t, env)["body"].(string))
	if err != nil || len(raw) != 256 || raw[255] != 255 {
		t.Fatalf("binary body: %v %d", err, len(raw))
	}
}

// TestHTTPBodyDecodeBounded: a JSON body of many tiny values, under
// MaxHTTPBody as text but past resultstore.WorkerMaxDecodedBytes once
// decoded, fails the step naming the limit and the fix, never decoded; as
// text it is the step's data. A body as large by the estimate that is not
// JSON (NDJSON) is text, as a small one is.
func TestHTTPBodyDecodeBounded(t *testing.T) {
	t.Parallel()
	srv := testServer(t, false)
	r := New(Options{})
	env := execTool(t, r, httpCfg(srv.URL+"/tiny"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "the limit is resultstore.WorkerMaxDecodedBytes, a worker's (1073741824 bytes, 1024 MiB)")
	if !strings.Contains(env.Error.Message, "response_type: text") {
		t.Errorf("the refusal %q does not say how to keep the body", env.Error.Message)
	}
	env = execTool(t, r, httpCfg(srv.URL+"/tiny", "response_type", "text"), nil)
	mustSucceed(t, env)
	if s, _ := dataMap(t, env)["body"].(string); len(s) != 3*(21<<20)+4 {
		t.Fatalf("response_type text kept %d bytes", len(s))
	}
	env = execTool(t, r, httpCfg(srv.URL+"/ndjson"), nil)
	mustSucceed(t, env)
	if s, _ := dataMap(t, env)["body"].(string); len(s) != 14*(3<<20) || !strings.HasPrefix(s, `{"a":0,"b":0}`+"\n{") {
		t.Fatalf("an NDJSON body served as application/json: %d bytes of text (%T), want it whole as text", len(s), dataMap(t, env)["body"])
	}
}

func TestHTTPStatusKinds(t *testing.T) {
	t.Parallel()
	srv := testServer(t, false)
	r := New(Options{})
	cases := []struct {
		code int
		kind string
	}{
		{429, toolresult.KindRateLimit},
		{503, toolresult.KindServerError},
		{500, toolresult.KindServerError},
		{404, toolresult.KindClientError},
		{400, toolresult.KindClientError},
		{401, toolresult.KindAuth},
		{403, toolresult.KindAuth},
	}
	for _, c := range cases {
		env := execTool(t, r, httpCfg(fmt.Sprintf("%s/status/%d", srv.URL, c.code)), nil)
		mustFail(t, env, toolresult.StatusError, c.kind, fmt.Sprintf("HTTP %d", c.code))
		if env.Error.Status != c.code {
			t.Fatalf("%d: error.status = %d", c.code, env.Error.Status)
		}
		d := dataMap(t, env)
		if d["status_code"] != int64(c.code) || d["body"].(map[string]any)["code"] != int64(c.code) {
			t.Fatalf("%d: data = %v", c.code, d)
		}
	}
	// allow_status turns a code into success.
	env := execTool(t, r, httpCfg(srv.URL+"/status/404", "allow_status", []any{200, 404}), nil)
	mustSucceed(t, env)
	if dataMap(t, env)["status_code"] != int64(404) {
		t.Fatalf("data = %v", env.Data)
	}
	// ... and a 2xx not in the list into an error.
	env = execTool(t, r, httpCfg(srv.URL+"/status/201", "allow_status", []any{200}), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "HTTP 201")
}

func TestHTTPRedirects(t *testing.T) {
	t.Parallel()
	srv := testServer(t, false)
	r := New(Options{})
	env := execTool(t, r, httpCfg(srv.URL+"/redirect"), nil)
	mustSucceed(t, env)
	if q := dataMap(t, env)["body"].(map[string]any)["query"]; q != "from=redirect" {
		t.Fatalf("followed redirect landed on query %v", q)
	}

	env = execTool(t, r, httpCfg(srv.URL+"/redirect", "follow_redirects", false), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "HTTP 302")
	if env.Error.Status != 302 {
		t.Fatalf("error.status = %d", env.Error.Status)
	}

	env = execTool(t, r, httpCfg(srv.URL+"/redirect", "follow_redirects", false, "allow_status", []any{302}), nil)
	mustSucceed(t, env)
	d := dataMap(t, env)
	if d["status_code"] != int64(302) || d["headers"].(map[string]any)["Location"] != "/echo?from=redirect" {
		t.Fatalf("unfollowed redirect data = %v", d)
	}
}

func TestHTTPTimeoutAndConnectionRefused(t *testing.T) {
	t.Parallel()
	srv := testServer(t, false)
	r := New(Options{})
	env := execTool(t, r, httpCfg(srv.URL+"/slow", "timeout", 0.5), nil)
	mustFail(t, env, toolresult.StatusTimeout, toolresult.KindTimeout, "tool timeout")

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	env = execCtx(ctx, r, httpCfg(srv.URL+"/slow"), nil)
	mustFail(t, env, toolresult.StatusTimeout, toolresult.KindTimeout, "step deadline exceeded")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	env = execTool(t, r, httpCfg("http://"+addr+"/x"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindConnection, "refused")
	if !env.Error.Retryable {
		t.Fatal("connection errors are retryable")
	}
}

func TestHTTPTLSAndVerify(t *testing.T) {
	t.Parallel()
	srv := testServer(t, true)
	r := New(Options{})
	env := execTool(t, r, httpCfg(srv.URL+"/text"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindConnection, "certificate")

	env = execTool(t, r, httpCfg(srv.URL+"/text", "verify_ssl", false), nil)
	mustSucceed(t, env)
	if dataMap(t, env)["body"] != "hello" {
		t.Fatalf("body = %v", env.Data)
	}
}

func TestHTTPAuthCredential(t *testing.T) {
	t.Parallel()
	srv := testServer(t, false)
	r := New(Options{Credentials: CredentialMap{
		"api":    {Kind: "bearer", Extra: map[string]any{"token": "tok-1"}},
		"basic":  {Kind: "basic", User: "u", Password: "p"},
		"custom": {Kind: "http", Extra: map[string]any{"headers": map[string]any{"X-Custom": "from-cred"}, "token": "tok-2"}},
		"pg":     {Kind: "postgres", Host: "db"},
	}})
	auth := func(alias string) toolresult.Envelope {
		return execTool(t, r, httpCfg(srv.URL+"/echo", "auth", alias), nil)
	}
	env := auth("api")
	mustSucceed(t, env)
	if got := dataMap(t, env)["body"].(map[string]any)["authorization"]; got != "Bearer tok-1" {
		t.Fatalf("bearer: %v", got)
	}
	env = auth("basic")
	mustSucceed(t, env)
	if got := dataMap(t, env)["body"].(map[string]any)["authorization"]; got != "Basic "+base64.StdEncoding.EncodeToString([]byte("u:p")) {
		t.Fatalf("basic: %v", got)
	}
	env = auth("custom")
	mustSucceed(t, env)
	b := dataMap(t, env)["body"].(map[string]any)
	if b["authorization"] != "Bearer tok-2" || b["x_custom"] != "from-cred" {
		t.Fatalf("http credential: %v", b)
	}
	// An explicit header wins over the credential.
	env = execTool(t, r, httpCfg(srv.URL+"/echo", "auth", "api", "headers", map[string]any{"Authorization": "Token explicit"}), nil)
	mustSucceed(t, env)
	if got := dataMap(t, env)["body"].(map[string]any)["authorization"]; got != "Token explicit" {
		t.Fatalf("explicit header: %v", got)
	}

	env = auth("nope")
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, `credential alias "nope" is not configured`)
	env = auth("pg")
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "kinds http, bearer and basic")
}

func TestHTTPConfigErrors(t *testing.T) {
	t.Parallel()
	r := New(Options{})
	env := execTool(t, r, map[string]any{"kind": "http"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "url is required")
	env = execTool(t, r, httpCfg("ftp://x/y"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "http or https")
	env = execTool(t, r, httpCfg("http://127.0.0.1:1/", "response_type", "xml"), nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "response_type")
	if !strings.HasPrefix(env.Error.Message, "http: ") {
		t.Fatalf("message %q", env.Error.Message)
	}
}
