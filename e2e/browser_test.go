package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/noetl-go/noetl/shared/dashboard"
)

// browser is one headless chromium tab (Debian's, which `make test` installs
// when missing: mk/dashboard.mk) driven over the DevTools protocol by
// chromedp. It records every console error and warning, uncaught exception
// and error log entry, every API request with its Authorization header, and
// every request that failed: answered 400 or more, or not loaded at all (a
// CORS refusal, a network error). Its clock reads UTC.
type browser struct {
	ctx      context.Context
	dir      string
	mu       sync.Mutex
	errors   []string
	warnings []string
	requests []apiRequest
	sent     map[network.RequestID]apiRequest
	failed   []failedRequest
	shots    int
}

type apiRequest struct{ method, url, auth string }

// failedRequest is a request answered with an error status, or never
// answered (reason says why: net::ERR_FAILED, a CORS error, …).
type failedRequest struct {
	method, url string
	status      int64
	reason      string
}

func (f failedRequest) String() string {
	if f.status > 0 {
		return fmt.Sprintf("%s %s → %d", f.method, f.url, f.status)
	}
	return fmt.Sprintf("%s %s failed: %s", f.method, f.url, f.reason)
}

// needDashboard fails a test of our dashboard in a binary built without its
// layout library.
func needDashboard(t *testing.T) {
	t.Helper()
	if !dashboard.Vendored() {
		t.Fatal("the dashboard's layout library is not built into this binary: run make dashboard first (make test does)")
	}
}

func newBrowser(t *testing.T, width, height int64) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("chromium is not installed (make test installs Debian's: apt-get install -y chromium): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(int(width), int(height)), chromedp.Flag("disable-gpu", true), chromedp.Env("TZ=UTC"))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	// A hang guard over the whole walk (each step has its own 45 s): the
	// longest walk shares the machine with the parallel tests.
	ctx, cancelT := context.WithTimeout(ctx, 10*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	// E2E_SCREENSHOTS keeps the screenshots in a directory of one's choice.
	dir := os.Getenv("E2E_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	b := &browser{ctx: ctx, dir: dir, sent: map[network.RequestID]apiRequest{}}
	chromedp.ListenTarget(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			switch e.Type {
			case runtime.APITypeError, runtime.APITypeAssert:
				b.errors = append(b.errors, "console."+string(e.Type)+": "+strings.Join(parts, " "))
			case runtime.APITypeWarning:
				b.warnings = append(b.warnings, strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			b.errors = append(b.errors, "exception: "+e.ExceptionDetails.Text+" "+exceptionText(e.ExceptionDetails))
		case *log.EventEntryAdded:
			if e.Entry.Level == log.LevelError {
				b.errors = append(b.errors, "log: "+e.Entry.Text+" "+e.Entry.URL)
			}
		case *network.EventRequestWillBeSent:
			auth, _ := e.Request.Headers["Authorization"].(string)
			r := apiRequest{method: e.Request.Method, url: e.Request.URL, auth: auth}
			b.sent[e.RequestID] = r
			if u, err := url.Parse(e.Request.URL); err == nil && strings.HasPrefix(u.Path, "/api/") {
				b.requests = append(b.requests, r)
			}
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				r := b.sent[e.RequestID]
				b.failed = append(b.failed, failedRequest{method: r.method, url: e.Response.URL, status: e.Response.Status})
			}
		case *network.EventLoadingFailed:
			r := b.sent[e.RequestID]
			why := e.ErrorText
			if e.BlockedReason != "" {
				why += " blocked: " + string(e.BlockedReason)
			}
			if e.CorsErrorStatus != nil {
				why += " CORS error: " + string(e.CorsErrorStatus.CorsError)
			}
			if !e.Canceled {
				b.failed = append(b.failed, failedRequest{method: r.method, url: r.url, reason: why})
			}
		}
	})
	if err := chromedp.Run(ctx, log.Enable(), network.Enable(), runtime.Enable()); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}

func (b *browser) run(t *testing.T, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		b.shot(t, "failed-"+strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("%s: %v (console errors so far: %v; failed requests: %v)", what, err, b.consoleErrors(), b.failedRequests())
	}
}

// shot saves a screenshot under the test's temp dir and returns its path.
func (b *browser) shot(t *testing.T, name string) string {
	t.Helper()
	var png []byte
	if err := chromedp.Run(b.ctx, chromedp.FullScreenshot(&png, 100)); err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	b.shots++
	p := filepath.Join(b.dir, fmt.Sprintf("%02d-%s.png", b.shots, name))
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", p)
	return p
}

func (b *browser) consoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

func (b *browser) consoleWarnings() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.warnings...)
}

func (b *browser) failedRequests() []failedRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]failedRequest(nil), b.failed...)
}

// attr reads an attribute of the first element matching sel, waiting for it.
func (b *browser) attr(t *testing.T, sel, name string) string {
	t.Helper()
	var v string
	var ok bool
	b.run(t, "read "+name+" of "+sel, chromedp.WaitReady(sel, chromedp.ByQuery), chromedp.AttributeValue(sel, name, &v, &ok, chromedp.ByQuery))
	return v
}

// waitJS polls a JavaScript condition until it is true.
func (b *browser) waitJS(t *testing.T, what, cond string) {
	t.Helper()
	b.run(t, what, chromedp.Poll(cond, nil, chromedp.WithPollingTimeout(60*time.Second)))
}

// eval runs a JavaScript expression and decodes its value into out (nil:
// discarded); a promise is awaited.
func (b *browser) eval(t *testing.T, what, expr string, out any) {
	t.Helper()
	b.run(t, what, chromedp.Evaluate(expr, out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
}
