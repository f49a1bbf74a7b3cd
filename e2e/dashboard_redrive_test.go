package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/noetl-go/noetl/shared/wire"
)

// graphProblems is a script answering what keeps a reader from the graph:
// a node outside the pane that the pane cannot scroll to, a node cut at the
// pane's edge while the pane does not scroll, an edge label covered by a
// node, or one that does not read its condition whole.
const graphProblems = `(() => {
  const wrap = document.querySelector('#graph');
  const box = wrap.getBoundingClientRect();
  const scrolls = ['auto', 'scroll'].includes(getComputedStyle(wrap).overflowX);
  const out = [];
  const nodes = [...wrap.querySelectorAll('g.node')].map((g) => ({ name: g.dataset.step, r: g.querySelector('rect').getBoundingClientRect() }));
  for (const n of nodes) {
    const right = n.r.right - box.left + wrap.scrollLeft, bottom = n.r.bottom - box.top + wrap.scrollTop;
    if (right > wrap.scrollWidth + 1 || bottom > wrap.scrollHeight + 1) out.push(n.name + ' lies outside what the pane holds');
    else if ((right > wrap.clientWidth + 1 || bottom > wrap.clientHeight + 1) && !scrolls) out.push(n.name + ' is cut off and the pane does not scroll');
  }
  for (const l of wrap.querySelectorAll('g.edge-label')) {
    const r = l.querySelector('rect').getBoundingClientRect();
    for (const n of nodes) {
      if (r.left < n.r.right && n.r.left < r.right && r.top < n.r.bottom && n.r.top < r.bottom) out.push('the label of ' + l.dataset.from + ' → ' + l.dataset.to + ' is under ' + n.name);
    }
    const t = l.querySelector('text');
    if (t.getComputedTextLength() > r.width / (wrap.querySelector('svg').getBoundingClientRect().width / wrap.querySelector('svg').viewBox.baseVal.width) + 1) out.push('the label ' + t.textContent + ' overflows its box');
  }
  return out;
})()`

// TestDashboardGraphFits: on examples/demo the whole graph is in its pane,
// and every edge label reads whole, not under a node (issue 31: the steps
// right of decide were cut off at the pane's edge, labels read "{{ c"); on
// a phone the pane scrolls to every step. Cancel is offered while the
// execution runs, and not once it has ended.
func TestDashboardGraphFits(t *testing.T) {
	s := shared
	ctx := context.Background()
	s.register(t, "../examples/summary.yaml")
	path := s.register(t, "../examples/demo.yaml")
	// No worker serves this pool: the execution stays RUNNING.
	id, err := s.cl.Execute(ctx, wire.ExecuteRequest{Path: path, Pool: "dash-nobody"})
	if err != nil {
		t.Fatal(err)
	}
	b := openExecution(t, id, chromedp.WaitVisible(`#graph g.node[data-step="summarise"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#cancel`, chromedp.ByQuery))
	b.shot(t, "demo-graph")
	var problems []string
	b.eval(t, "check the graph", graphProblems, &problems)
	if len(problems) > 0 {
		t.Errorf("the demo's graph at 1280×800: %s", strings.Join(problems, "; "))
	}
	// Fits without scrolling at this size: every step in sight.
	var inSight bool
	b.eval(t, "every node in sight", `(() => { const w = document.querySelector('#graph').getBoundingClientRect();
		return [...document.querySelectorAll('#graph g.node rect')].every((r) => { const b = r.getBoundingClientRect();
			return b.left >= w.left - 1 && b.right <= w.right + 1 && b.top >= w.top - 1 && b.bottom <= w.bottom + 1; }); })()`, &inSight)
	if !inSight {
		t.Error("at 1280×800 some step of the demo is out of sight in the graph pane")
	}
	var label string
	b.eval(t, "read the label", `document.querySelector('#graph g.edge-label[data-from="decide"][data-to="long_names"] text').textContent`, &label)
	if label != "ctx.letters > 20" {
		t.Errorf("the arc decide → long_names is labelled %q, want its condition ctx.letters > 20", label)
	}
	// Left to right, as chosen, the graph still fits or scrolls.
	b.run(t, "left to right", chromedp.SetValue(`#direction`, "LR", chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#direction').dispatchEvent(new Event('change'))`, nil),
		chromedp.WaitVisible(`#graph svg[data-direction="LR"]`, chromedp.ByQuery))
	b.eval(t, "check the graph left to right", graphProblems, &problems)
	if len(problems) > 0 {
		t.Errorf("the demo's graph left to right: %s", strings.Join(problems, "; "))
	}
	b.shot(t, "demo-graph-lr")

	// On a phone the pane scrolls to every step.
	b.run(t, "narrow", chromedp.EmulateViewport(390, 844), chromedp.Reload(),
		chromedp.WaitVisible(`#graph g.node[data-step="summarise"]`, chromedp.ByQuery))
	b.eval(t, "check the graph on a phone", graphProblems, &problems)
	if len(problems) > 0 {
		t.Errorf("the demo's graph on a phone: %s", strings.Join(problems, "; "))
	}
	b.shot(t, "demo-graph-phone")
	b.run(t, "wide", chromedp.EmulateViewport(1280, 800))

	// Cancelled, it offers no Cancel, and Redrive instead.
	if _, err := s.cl.Cancel(ctx, id, "test"); err != nil {
		t.Fatal(err)
	}
	b.run(t, "the cancelled demo", chromedp.Reload(),
		chromedp.WaitVisible(`#redrive`, chromedp.ByQuery))
	var cancelShown bool
	b.eval(t, "is Cancel offered", `!document.querySelector('#cancel').hidden && document.querySelector('#cancel').offsetParent !== null`, &cancelShown)
	if cancelShown {
		t.Error("a cancelled execution still offers Cancel")
	}
	b.shot(t, "demo-cancelled")
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Fatalf("the browser reported %d errors:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// TestDashboardRedrive: a failed execution's page offers Redrive (and no
// Cancel) with the playbook's newer versions; redriven under the fix it
// completes, its completed steps not run again.
func TestDashboardRedrive(t *testing.T) {
	s := shared
	ctx := context.Background()
	s.startWorkers(t, "dash-redrive", 1)
	v1 := strings.Replace(strings.Replace(ordersV1, "e2e/redrive_orders", "dash/redrive_orders", 1), "name: redrive_orders", "name: dash_redrive_orders", 1)
	path := registerYAML(t, v1)
	id, view := s.run(t, wire.ExecuteRequest{Path: path, Pool: "dash-redrive", Payload: wire.Object{"lines": []any{"1", "2.50"}}})
	if view.Status != "FAILED" {
		t.Fatalf("v1: %s, want FAILED", view.Status)
	}
	fix, err := s.cl.Register(ctx, strings.Replace(v1, "int(line) * 100", "int(round(float(line) * 100))", 1))
	if err != nil {
		t.Fatal(err)
	}
	b := openExecution(t, id, chromedp.WaitVisible(`#graph g.node[data-step="parse"][data-state="failed"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#redrive`, chromedp.ByQuery),
		chromedp.Poll(`document.querySelectorAll('#redrive-version option').length === 2`, nil, chromedp.WithPollingTimeout(20*time.Second)))
	var state struct {
		Cancel  bool     `json:"cancel"`
		Options []string `json:"options"`
		Chosen  string   `json:"chosen"`
	}
	b.eval(t, "read the actions", `({cancel: document.querySelector('#cancel').offsetParent !== null,
		options: [...document.querySelectorAll('#redrive-version option')].map((o) => o.textContent),
		chosen: document.querySelector('#redrive-version').value})`, &state)
	if state.Cancel || strings.Join(state.Options, ",") != "v"+strconv.Itoa(fix.Version)+",v1 (its own)" || state.Chosen != strconv.Itoa(fix.Version) {
		t.Fatalf("the failed execution's actions: %+v, want no Cancel and Redrive under v%d (chosen) or v1", state, fix.Version)
	}
	b.shot(t, "redrive-offered")
	b.run(t, "redrive", chromedp.Click(`#redrive`, chromedp.ByQuery))
	b.waitJS(t, "the completed badge", `(document.querySelector('h1 .badge') || {}).textContent === 'COMPLETED' &&
		document.querySelector('#graph g.node[data-step="total"]').dataset.state === 'completed'`)
	var meta string
	b.run(t, "read the version", chromedp.Text(`.meta`, &meta, chromedp.ByQuery))
	if !strings.Contains(meta, path+" v"+strconv.Itoa(fix.Version)) {
		t.Errorf("after the redrive the page says %q, want version %d", meta, fix.Version)
	}
	b.waitJS(t, "the verify badge", `document.querySelector('#verify').textContent.includes('replay matches')`)
	if label := b.attr(t, `#graph g.node[data-step="parse"]`, "aria-label"); !strings.Contains(label, "2 of 2 iterations") {
		t.Errorf("the resumed loop says %q, want 2 of 2 iterations (one kept, one run)", label)
	}
	b.shot(t, "redriven")
	v, err := s.cl.Execution(ctx, id)
	if err != nil || v.Status != "COMPLETED" || v.Version != fix.Version {
		t.Fatalf("after Redrive: %v %v", v, err)
	}
	n := issuedPerStep(s.events(t, id))
	if n["start"] != 1 || n["parse[0]"] != 1 || n["parse[1]"] != 2 || n["total"] != 1 {
		t.Errorf("commands per step after the redrive: %v, want start, parse[0] and total once, parse[1] twice", n)
	}
	var hidden bool
	b.eval(t, "Redrive gone", `document.querySelector('#redrive-box').hidden && document.querySelector('#cancel').hidden`, &hidden)
	if !hidden {
		t.Error("a completed execution offers Redrive or Cancel")
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Fatalf("the browser reported %d errors:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}

// openExecution opens an execution's page in a new 1280×800 browser and
// waits for ready.
func openExecution(t *testing.T, id int64, ready ...chromedp.Action) *browser {
	t.Helper()
	needDashboard(t)
	b := newBrowser(t, 1280, 800)
	b.run(t, "open execution "+strconv.FormatInt(id, 10), append([]chromedp.Action{
		chromedp.Navigate(shared.srv.URL + "/#/executions/" + strconv.FormatInt(id, 10))}, ready...)...)
	return b
}
