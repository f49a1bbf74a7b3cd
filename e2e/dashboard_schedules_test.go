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

// TestDashboardSchedules drives the schedules view in the browser (the
// harness of dashboard_test.go): the list shows a schedule's next and last
// run and links its last execution; the schedule's page lists its runs,
// each linking its execution, starts one with Run now and pauses it; an
// execution's page says which schedule and due time started it.
func TestDashboardSchedules(t *testing.T) {
	s := shared
	s.startWorkers(t, "shared", 1)
	ctx := context.Background()
	path := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: tick, path: dash/sched/tick}
workflow:
  - step: start
    tool: {kind: noop}
`)
	sc, err := s.cl.CreateSchedule(ctx, wire.ScheduleRequest{PlaybookPath: new(path), IntervalSeconds: new(int64(3600)), InputPayload: map[string]any{"from": "dashboard"}})
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.FormatInt(int64(sc.ScheduleID), 10)
	t.Cleanup(func() { _ = s.cl.DeleteSchedule(context.Background(), int64(sc.ScheduleID)) })
	// Two past due times, run by the stack's firing loop.
	to := time.Now().Add(-2 * time.Hour).Truncate(time.Hour)
	if _, err := s.cl.BackfillSchedule(ctx, int64(sc.ScheduleID), to.Add(-time.Hour), to); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the backfill", time.Minute, func() bool {
		v, err := s.cl.Schedule(ctx, int64(sc.ScheduleID))
		return err == nil && v.Backfill == nil && v.LastStatus == "COMPLETED"
	})
	last, err := s.cl.Schedule(ctx, int64(sc.ScheduleID))
	if err != nil {
		t.Fatal(err)
	}
	lastExec := strconv.FormatInt(int64(last.LastExecutionID), 10)

	b := newBrowser(t, 1280, 800)
	base := s.srv.URL
	row := `#schedules tr[data-schedule="` + id + `"]`
	b.run(t, "open the schedules", chromedp.Navigate(base+"/#/schedules"), chromedp.WaitVisible(row, chromedp.ByQuery))
	var next, lastRun string
	b.run(t, "read the runs", chromedp.Text(row+` .next-run`, &next, chromedp.ByQuery), chromedp.Text(row+` .last-run`, &lastRun, chromedp.ByQuery))
	if next == "—" || next == "" || lastRun == "—" || lastRun == "" {
		t.Errorf("the list shows next run %q and last run %q, want both", next, lastRun)
	}
	if href := b.attr(t, row+` a[href^="#/executions/"]`, "href"); href != "#/executions/"+lastExec {
		t.Errorf("the list links the last run to %q, want #/executions/%s", href, lastExec)
	}
	if cur := b.attr(t, `nav a[data-nav="schedules"]`, "aria-current"); cur != "page" {
		t.Errorf("the Schedules tab is not marked current (%q)", cur)
	}
	b.shot(t, "schedules")

	// The schedule's page: its runs, each with its execution.
	b.run(t, "open the schedule", chromedp.Click(row+` a[href="#/schedules/`+id+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#runs tr[data-outcome="started"]`, chromedp.ByQuery))
	b.waitJS(t, "two runs", `document.querySelectorAll('#runs tr[data-outcome="started"] a[href^="#/executions/"]').length === 2`)
	b.run(t, "run now", chromedp.Click(`#trigger`, chromedp.ByQuery))
	b.waitJS(t, "the triggered run", `document.querySelector('#schedule-msg').textContent.startsWith('Started execution ') &&
		document.querySelectorAll('#runs tr[data-outcome="started"]').length === 3`)
	var msg string
	b.run(t, "read the message", chromedp.Text(`#schedule-msg`, &msg, chromedp.ByQuery))
	triggered := strings.TrimSuffix(strings.TrimPrefix(msg, "Started execution "), ".")
	b.shot(t, "schedule")

	// The execution's page names its schedule and due time.
	b.run(t, "open the triggered run", chromedp.Click(`#runs a[href="#/executions/`+triggered+`"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`#exec-schedule`, chromedp.ByQuery))
	var says string
	b.run(t, "read the schedule line", chromedp.Text(`#exec-schedule`, &says, chromedp.ByQuery))
	if !strings.Contains(says, "schedule "+id+" for ") {
		t.Errorf("the execution page says %q, want the schedule and its due time", says)
	}
	if href := b.attr(t, `#exec-schedule a`, "href"); href != "#/schedules/"+id {
		t.Errorf("the execution links its schedule as %q", href)
	}
	b.shot(t, "scheduled-execution")

	// Pause from the page.
	b.run(t, "back to the schedule", chromedp.Click(`#exec-schedule a`, chromedp.ByQuery), chromedp.WaitVisible(`#toggle`, chromedp.ByQuery))
	b.waitJS(t, "the Pause button", `document.querySelector('#toggle').textContent === 'Pause'`)
	b.run(t, "pause", chromedp.Click(`#toggle`, chromedp.ByQuery))
	b.waitJS(t, "paused", `document.querySelector('h1').textContent.includes('paused') && document.querySelector('#toggle').textContent === 'Resume'`)
	if v, err := s.cl.Schedule(ctx, int64(sc.ScheduleID)); err != nil || v.Enabled {
		t.Fatalf("after Pause the schedule is %+v (%v)", v, err)
	}
	if errs := b.consoleErrors(); len(errs) > 0 {
		t.Fatalf("the browser reported %d errors:\n%s", len(errs), strings.Join(errs, "\n"))
	}
}
