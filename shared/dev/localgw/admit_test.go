package localgw_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api/apitest"
)

// countingBody is a request body of n bytes that counts what is read of it.
type countingBody struct {
	left, read int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), b.left)
	clear(p[:n])
	b.left -= n
	b.read += n
	return int(n), nil
}

func (b *countingBody) Close() error { return nil }

// TestRefusedBeforeBodyRead is issue 33's finding 9: the gateway read a body
// of up to 10 MB, converted and decoded it before the token was checked (8
// concurrent 10 MB PUTs with a wrong token took the server from 62 MB to 613
// MB). Now the API's admission (api.Admit: Host, Origin, token, size,
// Content-Type) runs on the headers first: a refused request has none of its
// body read. Asserted on the bytes read, not on memory.
func TestRefusedBeforeBodyRead(t *testing.T) {
	sv := newServer(t, apitest.Options{})
	const tenMB = 10 << 20
	put := func(token, contentType string, length, size int64) (*httptest.ResponseRecorder, *countingBody) {
		body := &countingBody{left: size}
		req := httptest.NewRequest(http.MethodPut, "/api/result/1024", nil)
		req.Body, req.ContentLength = body, length
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		sv.gw.ServeHTTP(rec, req)
		return rec, body
	}
	for _, c := range []struct {
		name, token, contentType string
		length                   int64
		want                     int
	}{
		{"a wrong token", "not-a-token", "application/json", tenMB, 401},
		{"no token", "", "application/json", tenMB, 401},
		{"a wrong token, chunked", "not-a-token", "application/json", -1, 401},
		{"the api scope (the route needs the worker's)", tAPI, "application/json", tenMB, 403},
		{"a worker token, text/plain", tWorker, "text/plain", 1000, 415},
		{"a worker token, over the route's 5 MiB limit", tWorker, "application/json", tenMB, 413},
	} {
		rec, body := put(c.token, c.contentType, c.length, tenMB)
		if rec.Code != c.want || body.read != 0 {
			t.Errorf("%s: %d after reading %d bytes of the body; want %d after reading none: %s", c.name, rec.Code, body.read, c.want, rec.Body)
		}
	}
	// The counter counts: an admitted request's body is read.
	rec, body := put(tWorker, "application/json", 64, 64)
	if body.read != 64 || rec.Code == 401 || rec.Code == 415 {
		t.Fatalf("an admitted body: %d after reading %d bytes", rec.Code, body.read)
	}
	// Over real HTTP too: the refusal arrives while the client still sends.
	req, err := http.NewRequest(http.MethodPut, sv.srv.URL+"/api/result/1024", bytes.NewReader(make([]byte, tenMB)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer not-a-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("over HTTP: %d, want 401", resp.StatusCode)
		}
	}
}

// TestJSONAnswersAreNosniff: every JSON answer says nosniff, so a browser
// never reads one as HTML or a script: the API's answers (a route's, its
// errors, the OpenAPI document) and the gateway's own refusals.
func TestJSONAnswersAreNosniff(t *testing.T) {
	sv := newServer(t, apitest.Options{})
	for _, c := range []struct {
		name, method, path, token string
		header                    http.Header
		want                      int
	}{
		{"a route's answer", "GET", "/api/health", "", nil, 200},
		{"the OpenAPI document", "GET", "/api/openapi.json", "", nil, 200},
		{"an answer with a token", "GET", "/api/executions", tAPI, nil, 200},
		{"no route", "GET", "/api/no-such-route", tAPI, nil, 404},
		{"the gateway's refusal of a token", "PUT", "/api/result/1024", "not-a-token", nil, 401},
		{"the gateway's refusal of an origin", "GET", "/api/health", "", http.Header{"Origin": {"https://evil.example"}}, 403},
	} {
		req, err := http.NewRequest(c.method, sv.srv.URL+c.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		for k, vs := range c.header {
			req.Header[k] = vs
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d %s, X-Content-Type-Options %q; want %d, JSON, nosniff", c.name, resp.StatusCode,
				resp.Header.Get("Content-Type"), resp.Header.Get("X-Content-Type-Options"), c.want)
		}
	}
}
