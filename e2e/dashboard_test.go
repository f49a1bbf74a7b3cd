package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/wire"
)

// The dashboard (issue 11) in a real browser: Debian's chromium, which
// `make test` installs when missing (mk/dashboard.mk), driven over the
// DevTools protocol by chromedp, against the running stack.

// tourPlaybook has branches (big or small), a loop and a failing step.
const tourPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: tour, path: dash/tour}
workload: {items: [1, 2, 3]}
workflow:
  - step: start
    tool: {kind: noop}
    next:
      spec: {mode: exclusive}
      arcs:
        - step: big
          when: "{{ workload.items | length > 2 }}"
        - step: small
  - step: big
    loop: {in: "{{ workload.items }}", iterator: item}
    tool: {kind: noop, result: {n: "{{ item }}"}}
    next: boom
  - step: small
    tool: {kind: noop, result: {n: 0}}
    next: boom
  - step: boom
    tool: {kind: shell, command: "echo boom >&2; exit 3"}
`

// slowPlaybook runs long enough to be cancelled from the page.
const slowPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: slow, path: dash/slow}
workflow:
  - step: start
    tool: {kind: shell, command: "sleep 30"}
`

func TestDashboard(t *testing.T) {
	s := shared
	s.startWorkers(t, "shared", 2)
	ctx := context.Background()
	for _, src := range []string{tourPlaybook, slowPlaybook} {
		if _, err := s.cl.Register(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	tourID, view := s.run(t, wire.ExecuteRequest{Path: "dash/tour"})
	if view.Status != "FAILED" {
		t.Fatalf("the tour ended %v, want FAILED (its boom step fails)", view.Status)
	}
	tour := strconv.FormatInt(tourID, 10)
	nEvents := len(s.events(t, tourID))

	needDashboard(t)
	b := newBrowser(t, 1280, 800)
	base := s.srv.URL

	// The list shows the execution, with an ordinary link to its page.
	b.run(t, "open the list", chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(`#executions tr[data-execution="`+tour+`"]`, chromedp.ByQuery))
	if href := b.attr(t, `#executions tr[data-execution="`+tour+`"] a`, "href"); href != "#/executions/"+tour {
		t.Fatalf("the list links execution %s to %q", tour, href)
	}
	var open string
	b.run(t, "read the auth state", chromedp.Text("#auth-state", &open, chromedp.ByQuery))
	if !strings.Contains(open, "open") {
		t.Fatalf("without tokens the page says %q, want that the stack is open", open)
	}
	b.shot(t, "list")

	// The graph: every step with its state, the loop's progress on one node.
	b.run(t, "open the execution", chromedp.Click(`#executions tr[data-execution="`+tour+`"] a`, chromedp.ByQuery),
		chromedp.WaitVisible(`#graph g.node[data-step="boom"][data-state="failed"]`, chromedp.ByQuery))
	var hash string
	b.run(t, "read the URL", chromedp.Evaluate(`location.hash`, &hash))
	if hash != "#/executions/"+tour {
		t.Fatalf("the execution page is at %q", hash)
	}
	want := map[string]string{"start": "completed", "big": "completed", "small": "skipped", "boom": "failed"}
	for step, state := range want {
		if got := b.attr(t, `#graph g.node[data-step="`+step+`"]`, "data-state"); got != state {
			t.Errorf("step %s is drawn %q, want %q", step, got, state)
		}
	}
	if label := b.attr(t, `#graph g.node[data-step="big"]`, "aria-label"); !strings.Contains(label, "3 of 3 iterations") {
		t.Errorf("the loop node says %q, want its progress 3 of 3", label)
	}
	var nodes int
	b.run(t, "count nodes", chromedp.Evaluate(`document.querySelectorAll('#graph g.node').length`, &nodes))
	if nodes != 4 {
		t.Errorf("the graph has %d nodes, want the playbook's 4 steps", nodes)
	}
	b.waitJS(t, "the verify badge", `document.querySelector('#verify').textContent.includes('replay matches')`)
	b.waitJS(t, "the timeline", fmt.Sprintf(`document.querySelector('#events .row') !== null && document.querySelectorAll('#events .row').length > 0 && %d > 0`, nEvents))

	// Clicking a step shows its result.
	b.clickStep(t, "big")
	b.run(t, "the loop step's details", chromedp.WaitVisible(`#step-result`, chromedp.ByQuery))
	var result string
	b.run(t, "read the result", chromedp.Text(`#step-result`, &result, chromedp.ByQuery))
	for _, n := range []string{`"n": 1`, `"n": 2`, `"n": 3`} {
		if !strings.Contains(result, n) {
			t.Fatalf("the loop step's result shows %q, want its three iterations' results", result)
		}
	}
	b.clickStep(t, "boom")
	b.run(t, "the failing step's error", chromedp.WaitVisible(`#step-details .error-text`, chromedp.ByQuery))
	shotPath := b.shot(t, "execution")
	if out := os.Getenv("DASHBOARD_SCREENSHOT"); out != "" {
		png, err := os.ReadFile(shotPath)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Time travel to an early position: start was issued, nothing later reached.
	b.run(t, "travel to event 3", chromedp.Evaluate(`(() => { const s = document.querySelector('#travel');
		s.value = 3; s.dispatchEvent(new Event('input')); })()`, nil))
	b.waitJS(t, "the graph as of event 3", `document.querySelector('#graph').dataset.asOf === '3' &&
		document.querySelector('#travel-label').textContent.startsWith('as of event 3 ')`)
	for _, step := range []string{"big", "small", "boom"} {
		if got := b.attr(t, `#graph g.node[data-step="`+step+`"]`, "data-state"); got != "notreached" {
			t.Errorf("as of event 3, step %s is drawn %q, want not reached", step, got)
		}
	}
	if got := b.attr(t, `#graph g.node[data-step="start"]`, "data-state"); got != "running" {
		t.Errorf("as of event 3, start is drawn %q, want running (entered, its command issued)", got)
	}
	b.shot(t, "time-travel")

	// Cancel works on a running execution.
	slowID, err := s.cl.Execute(ctx, wire.ExecuteRequest{Path: "dash/slow"})
	if err != nil {
		t.Fatal(err)
	}
	slow := strconv.FormatInt(slowID, 10)

	// The Workers view: both workers alive, and the one running the slow
	// step shows it in flight (the view refreshes itself).
	b.run(t, "open the workers", chromedp.Navigate(base+"/#/workers"),
		chromedp.WaitVisible(`#workers tr[data-worker="TestDashboard-shared-0"][data-alive="true"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#workers tr[data-worker="TestDashboard-shared-1"][data-alive="true"]`, chromedp.ByQuery),
		chromedp.Poll(`[...document.querySelectorAll('#workers tr[data-worker^="TestDashboard-shared-"]')]
			.reduce((n, r) => n + Number(r.dataset.inFlight), 0) === 1`, nil, chromedp.WithPollingTimeout(40*time.Second)))
	for _, w := range []string{"TestDashboard-shared-0", "TestDashboard-shared-1"} {
		row := `#workers tr[data-worker="` + w + `"]`
		var cells []string
		b.run(t, "read "+w, chromedp.Evaluate(`[...document.querySelectorAll('`+row+` td')].map((c) => c.textContent)`, &cells))
		if len(cells) != 6 || cells[0] != "shared" || cells[1] != "go" || cells[2] != "ready" || !strings.HasSuffix(cells[3], " / 4") {
			t.Errorf("worker %s is shown as %q, want pool shared, runtime go, ready, busy of 4", w, cells)
		}
	}
	var summary, current string
	b.run(t, "read the summary", chromedp.Text(`#workers-summary`, &summary, chromedp.ByQuery),
		chromedp.AttributeValue(`[data-nav="workers"]`, "aria-current", &current, nil, chromedp.ByQuery))
	if !strings.Contains(summary, "workers alive") || current != "page" {
		t.Errorf("the workers view says %q (nav aria-current %q)", summary, current)
	}
	b.shot(t, "workers")
	// The previous view stays on screen until the new one has loaded, and its
	// graph, travelled back to event 3, also shows start running: wait for
	// this execution's own page first.
	b.run(t, "open the slow execution", chromedp.Navigate(base+"/#/executions/"+slow),
		chromedp.Poll(`(document.querySelector('h1') || {}).textContent?.startsWith('Execution `+slow+` ')`, nil,
			chromedp.WithPollingTimeout(40*time.Second)),
		chromedp.WaitVisible(`#graph g.node[data-step="start"][data-state="running"]`, chromedp.ByQuery),
		chromedp.WaitEnabled(`#cancel`, chromedp.ByQuery),
		chromedp.Click(`#cancel`, chromedp.ByQuery))
	b.waitJS(t, "the cancelled badge", `(document.querySelector('h1 .badge') || {}).textContent === 'CANCELLED'`)
	if v, err := s.cl.Execution(ctx, slowID); err != nil || v.Status != "CANCELLED" {
		t.Fatalf("after Cancel the execution is %v (%v), want CANCELLED", v, err)
	}
	b.shot(t, "cancelled")

	// The catalog form starts an execution (the small branch this time).
	cat, err := latestCatalogID(base, "dash/tour")
	if err != nil {
		t.Fatal(err)
	}
	b.run(t, "start from the catalog", chromedp.Navigate(base+"/#/catalog/"+cat),
		chromedp.WaitVisible(`#start-form`, chromedp.ByQuery),
		chromedp.SetValue(`#workload`, `{"items": [7]}`, chromedp.ByQuery),
		chromedp.Click(`#start`, chromedp.ByQuery))
	b.waitJS(t, "the new execution's page", `/^#\/executions\/\d+$/.test(location.hash) && document.querySelector('#graph g.node') !== null`)
	b.run(t, "read the URL", chromedp.Evaluate(`location.hash`, &hash))
	newID, err := strconv.ParseInt(strings.TrimPrefix(hash, "#/executions/"), 10, 64)
	if err != nil || newID == tourID {
		t.Fatalf("the form led to %q", hash)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	nv, err := s.cl.Wait(wctx, newID, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if step(nv, "small").Status != "completed" || step(nv, "big").Status != "skipped" {
		t.Fatalf("the form's workload did not reach the execution: small %v, big %v", step(nv, "small").Status, step(nv, "big").Status)
	}
	b.waitJS(t, "the small branch drawn", `document.querySelector('#graph g.node[data-step="small"]').dataset.state === 'completed'`)
	b.shot(t, "started-from-catalog")

	// Readable on a phone-width screen: the graph and the list still show.
	b.run(t, "narrow", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/#/executions"),
		chromedp.WaitVisible(`#executions tr[data-execution]`, chromedp.ByQuery))
	b.shot(t, "phone-list")

	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Fatalf("the browser reported %d errors:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// latestCatalogID is the catalog id of a path's latest version.
func latestCatalogID(base, path string) (string, error) {
	resp, err := http.Get(base + "/api/catalog?path=" + url.QueryEscape(path))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var doc struct {
		Entries []struct {
			CatalogID string `json:"catalog_id"`
			Version   int    `json:"version"`
		} `json:"entries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		return "", err
	}
	best, id := 0, ""
	for _, e := range doc.Entries {
		if e.Version > best {
			best, id = e.Version, e.CatalogID
		}
	}
	if id == "" {
		return "", fmt.Errorf("no catalog entry for %s", path)
	}
	return id, nil
}

// TestDashboardTokens: with tokens configured, the page asks for one, a
// wrong one is refused, and with the right one every call it makes carries
// it.
func TestDashboardTokens(t *testing.T) {
	t.Parallel()
	const good = "dash-api-token-0123456789"
	env := map[string]string{"NOETL_API_TOKEN": good, "NOETL_WORKER_TOKEN": "dash-worker-token-0123456789"}
	srv, err := devserver.Start(context.Background(), devserver.Options{Getenv: func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		if strings.HasPrefix(k, "NOETL_") {
			return ""
		}
		return os.Getenv(k)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl := client.New(srv.URL, good)
	if _, err := cl.Register(context.Background(), slowPlaybook); err != nil {
		t.Fatal(err)
	}
	id, err := cl.Execute(context.Background(), wire.ExecuteRequest{Path: "dash/slow", Pool: "nobody-listens"})
	if err != nil {
		t.Fatal(err)
	}
	needDashboard(t)
	b := newBrowser(t, 1280, 800)

	// No token: the page asks for one and shows nothing.
	b.run(t, "open without a token", chromedp.Navigate(srv.URL+"/#/executions/"+strconv.FormatInt(id, 10)),
		chromedp.WaitVisible(`#token-form`, chromedp.ByQuery))
	var status int
	b.run(t, "call the API without a token", chromedp.Evaluate(`fetch('/api/executions').then(r => r.status)`, &status,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	if status != 401 {
		t.Fatalf("the API answered %d without a token, want 401", status)
	}
	b.shot(t, "token-needed")

	// A wrong token is refused and forgotten.
	b.run(t, "enter a wrong token", chromedp.SendKeys(`#token-input`, "wrong-token-0123456789", chromedp.ByQuery),
		chromedp.Click(`#token-form button[type=submit]`, chromedp.ByQuery))
	b.waitJS(t, "the refusal", `document.querySelector('#token-why').textContent.includes('refused') && !document.querySelector('#token-form').hidden`)
	var stored string
	b.run(t, "read the stored token", chromedp.Evaluate(`sessionStorage.getItem('noetl.token') || ''`, &stored))
	if stored != "" {
		t.Fatalf("a refused token stays stored: %q", stored)
	}
	if n := b.countNodes(t, `#graph g.node`); n != 0 {
		t.Fatalf("with a wrong token the page still drew %d steps", n)
	}

	// The right token: the execution shows, and every API call carries it.
	b.mu.Lock()
	b.requests = nil
	b.mu.Unlock()
	b.run(t, "enter the token", chromedp.SendKeys(`#token-input`, good, chromedp.ByQuery),
		chromedp.Click(`#token-form button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#graph g.node[data-step="start"]`, chromedp.ByQuery))
	b.run(t, "read the stored token", chromedp.Evaluate(`sessionStorage.getItem('noetl.token') || ''`, &stored))
	if stored != good {
		t.Fatalf("the accepted token is not kept in sessionStorage (got %q)", stored)
	}
	b.shot(t, "token-accepted")
	b.mu.Lock()
	reqs := append([]apiRequest(nil), b.requests...)
	b.mu.Unlock()
	// probeAuth asks once without the token on purpose, to tell an open
	// stack from a protected one; every other call must carry it.
	bare := 0
	for _, r := range reqs {
		switch r.auth {
		case "Bearer " + good:
		case "":
			bare++
		default:
			t.Errorf("%s carried %q", r.url, r.auth)
		}
	}
	if len(reqs) < 4 || bare > 1 {
		t.Fatalf("%d API calls after the token, %d without it; want every data call to carry it: %v", len(reqs), bare, reqs)
	}
	// 401s were expected here (that is the test); nothing else may be.
	for _, e := range b.consoleErrors() {
		if !strings.Contains(e, "status of 401") {
			t.Errorf("browser error: %s", e)
		}
	}
}

// clickStep clicks a step's node with the mouse, at its centre.
func (b *browser) clickStep(t *testing.T, name string) {
	t.Helper()
	var box []float64
	b.run(t, "find step "+name, chromedp.Evaluate(`(() => { const n = document.querySelector('#graph g.node[data-step="`+name+`"] rect');
		n.scrollIntoView({block: 'center', inline: 'center'}); const r = n.getBoundingClientRect();
		return [r.x + r.width / 2, r.y + r.height / 2]; })()`, &box))
	b.run(t, "click step "+name, chromedp.MouseClickXY(box[0], box[1]))
}

func (b *browser) countNodes(t *testing.T, sel string) int {
	t.Helper()
	var n int
	b.run(t, "count "+sel, chromedp.Evaluate(`document.querySelectorAll('`+sel+`').length`, &n))
	return n
}

// TestDashboardShowsStalledExecutions: an execution that nothing will move
// (its command rows ended behind the engine's back, as a bug would leave
// them) is listed above the executions with why (GET /api/doctor), and the
// list drops it once it is ended.
func TestDashboardShowsStalledExecutions(t *testing.T) {
	s := shared
	ctx := context.Background()
	if _, err := s.cl.Register(ctx, slowPlaybook); err != nil {
		t.Fatal(err)
	}
	// A pool no worker serves: nothing claims its command meanwhile.
	id, err := s.cl.Execute(ctx, wire.ExecuteRequest{Path: "dash/slow", Pool: "dash-nobody"})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := s.srv.Store.ShardFor(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Pool().Exec(ctx, `UPDATE command SET status = 'COMPLETED' WHERE execution_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	exec := strconv.FormatInt(id, 10)

	needDashboard(t)
	b := newBrowser(t, 1280, 800)
	b.run(t, "open the list", chromedp.Navigate(s.srv.URL+"/"),
		chromedp.WaitVisible(`#stalled tr[data-stalled="`+exec+`"]`, chromedp.ByQuery))
	var why string
	b.run(t, "read why", chromedp.Text(`#stalled tr[data-stalled="`+exec+`"] .reason`, &why, chromedp.ByQuery))
	if !strings.Contains(why, "nothing will move it") {
		t.Fatalf("the stalled execution's reason reads %q", why)
	}
	if href := b.attr(t, `#stalled tr[data-stalled="`+exec+`"] a`, "href"); href != "#/executions/"+exec {
		t.Fatalf("the stalled execution links to %q", href)
	}
	b.shot(t, "stalled")
	if _, err := s.cl.Cancel(ctx, id, "the test ends it"); err != nil {
		t.Fatal(err)
	}
	b.waitJS(t, "the stalled list to empty", `document.querySelector('#stalled').hidden === true`)
}
