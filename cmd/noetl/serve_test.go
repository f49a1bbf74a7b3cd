package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/wire"
)

// syncWriter is a buffer the server goroutine writes while the test reads.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestServe starts `noetl serve` with nothing given: a throwaway Postgres and
// an embedded NATS, the URL printed, the API answering through the Lambda
// handlers (the Go client registers and runs a playbook's first step), and
// everything gone after Ctrl-C.
func TestServe(t *testing.T) {
	for _, k := range []string{"NOETL_DATABASE_URL", "NOETL_SHARD_URLS", "NOETL_NATS_URL", "NOETL_SERVER_URL",
		"NOETL_API_TOKEN", "NOETL_WORKER_TOKEN", "NOETL_INTERNAL_TOKEN", "NOETL_INTERNAL_API_TOKEN", "NOETL_LISTEN", "AWS_LAMBDA_FUNCTION_NAME"} {
		t.Setenv(k, "")
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var stdout, stderr syncWriter
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--drain-every", "100ms"}, &stdout, &stderr)
	}()
	listening := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)
	var url string
	for deadline := time.Now().Add(2 * time.Minute); url == ""; {
		if m := listening.FindStringSubmatch(stdout.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d:\n%s\n%s", code, stdout.String(), stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not print its URL:\n%s\n%s", stdout.String(), stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), "RUNNING OPEN") {
		t.Errorf("serve did not say it runs open:\n%s", stderr.String())
	}
	dsn := regexp.MustCompile(`cluster database (\S+)`).FindStringSubmatch(stdout.String())
	if dsn == nil {
		t.Fatalf("no database DSN printed:\n%s", stdout.String())
	}

	// The dashboard is at the root URL, and serve says so (issue 11).
	if !strings.Contains(stdout.String(), "dashboard at "+url+"/") {
		t.Errorf("serve did not print the dashboard's URL:\n%s", stdout.String())
	}
	page, err := http.Get(url + "/")
	if err != nil {
		t.Fatal(err)
	}
	pageBody, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 200 || !strings.HasPrefix(page.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(pageBody), `src="/ui/app.js"`) {
		t.Errorf("GET / answered %d %q:\n%.300s", page.StatusCode, page.Header.Get("Content-Type"), pageBody)
	}

	c := client.New(url, "")
	h, err := c.Health(ctx)
	if err != nil || h.Status.V != "ok" || h.NATS != "ok" {
		t.Fatalf("health: %v %v", h, err)
	}
	reg, err := c.Register(ctx, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: one, path: tests/one}
workflow:
  - step: start
    tool: {kind: noop}
`)
	if err != nil || reg.Version != 1 {
		t.Fatalf("register: %+v %v", reg, err)
	}
	id, err := c.Execute(ctx, wire.ExecuteRequest{Path: "tests/one"})
	if err != nil || id == 0 {
		t.Fatalf("execute: %d %v", id, err)
	}
	st, err := c.Status(ctx, id)
	if err != nil || st.Status != "RUNNING" {
		t.Fatalf("status: %v %v", st, err)
	}
	time.Sleep(300 * time.Millisecond) // a few scheduled outbox runs
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `noetl_http_requests_total{route="POST /api/execute",status="200"} 1`) {
		t.Errorf("metrics:\n%s", body)
	}

	stop() // Ctrl-C
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("serve exited %d:\n%s", code, stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
	if strings.Contains(stderr.String(), "scheduled outbox run failed") {
		t.Errorf("a scheduled run failed:\n%s", stderr.String())
	}
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(cctx, dsn[1]); err == nil {
		conn.Close(cctx)
		t.Fatal("the throwaway Postgres still answers after serve stopped")
	}
}

// TestServeStartupErrors: a failure while the stack starts is reported as an
// error naming its cause (exit 1), after stopping what had started, never as
// a panic.
func TestServeStartupErrors(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	code, _, errOut := runCLI("serve", "--listen", busy.Addr().String(), "--drain-every", "0")
	if code != exitFail || !strings.Contains(errOut, "listen on "+busy.Addr().String()) || strings.Contains(errOut, "panic") {
		t.Fatalf("busy port: exit %d, stderr:\n%s", code, errOut)
	}

	t.Setenv("NOETL_LEASE_SECONDS", "abc")
	code, _, errOut = runCLI("serve", "--listen", "127.0.0.1:0", "--drain-every", "0")
	if code != exitFail || !strings.Contains(errOut, "NOETL_LEASE_SECONDS") || strings.Contains(errOut, "panic") {
		t.Fatalf("bad configuration: exit %d, stderr:\n%s", code, errOut)
	}
}
