package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/api"
	"github.com/noetl-go/noetl/shared/api/apitest"
	"github.com/noetl-go/noetl/shared/replay"
)

// aliasPlaybook is a playbook of a few KiB whose workload's aliases expand
// to almost MaxExpandedBytes (31 × 31 copies of 4,000 bytes): it registers,
// and its payload's JSON is about 3.9 MB.
func aliasPlaybook(path string) string {
	var b strings.Builder
	b.WriteString("workload:\n  a: &a '" + strings.Repeat("x", 4000) + "'\n  b: &b [")
	b.WriteString(strings.TrimSuffix(strings.Repeat("*a, ", 31), ", ") + "]\n  c: [")
	b.WriteString(strings.TrimSuffix(strings.Repeat("*b, ", 31), ", ") + "]\n")
	return strings.Replace(playbook(path), "workload: {n: 1}\n", b.String(), 1)
}

// A catalog page is budgeted on the payload JSON it answers, not on the
// YAML stored: entries whose aliases expand past the budget come one a page,
// and paging on lists each once.
func TestCatalogPageBudgetsPayloads(t *testing.T) {
	s := apitest.New(t, apitest.Options{})
	a := s.API
	const n = 3
	want := map[string]bool{}
	for i := range n {
		p := fmt.Sprintf("alias/p%d", i)
		must(t, a, 200, call{method: "POST", target: "/api/catalog/register", token: tAPI, body: map[string]any{"content": aliasPlaybook(p)}})
		want[p+"@1"] = true
	}
	got := map[string]int{}
	cursor, pages := "", 0
	for ; pages <= n+1; pages++ {
		target := "/api/catalog"
		if cursor != "" {
			target += "?cursor=" + cursor
		}
		r := must(t, a, 200, call{method: "GET", target: target, token: tAPI})
		es := r.json["entries"].([]any)
		if len(es) != 1 {
			t.Errorf("page %d holds %d entries of about 3.9 MB of payload each; the budget is %d bytes", pages, len(es), api.MaxCatalogPageBytes)
		}
		for _, e := range es {
			m := e.(map[string]any)
			got[fmt.Sprintf("%s@%d", m["path"], m["version"])]++
			if m["payload"] == nil {
				t.Errorf("%s: no payload", m["path"])
			}
		}
		next, _ := r.json["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	for k := range want {
		if got[k] != 1 {
			t.Errorf("%s listed %d times", k, got[k])
		}
	}
	if len(got) != n {
		t.Errorf("listed %v, want %v", got, want)
	}
}

// A replay folds at most replay.MaxLimit events: a larger limit, or verify
// (a fold of the whole log) of a longer log, is a 400 naming the parameter
// and the limit, as NoETL's replay answers its parameter errors.
func TestReplayLimitCapped(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	ep := fmt.Sprintf("/api/executions/%d/replay", f.exec)
	must(t, a, 200, call{method: "GET", target: fmt.Sprintf("%s?limit=%d", ep, replay.MaxLimit), token: tAPI})
	r := must(t, a, 400, call{method: "GET", target: fmt.Sprintf("%s?limit=%d", ep, replay.MaxLimit+1), token: tAPI})
	if e := r.str("error"); !strings.Contains(e, "limit") || !strings.Contains(e, "replay.MaxLimit") {
		t.Errorf("limit over the cap: %q", e)
	}
	must(t, a, 200, call{method: "GET", target: ep + "?verify=true", token: tAPI})
	// The row says how long the log is; verify is refused before reading it.
	sh, err := f.s.Store.ShardFor(f.exec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Pool().Exec(f.s.Ctx, `UPDATE execution SET last_seq = $2 WHERE execution_id = $1`, f.exec, replay.MaxLimit+1); err != nil {
		t.Fatal(err)
	}
	r = must(t, a, 400, call{method: "GET", target: ep + "?verify=true", token: tAPI})
	if e := r.str("error"); !strings.Contains(e, "verify") || !strings.Contains(e, "replay.MaxLimit") {
		t.Errorf("verify of a log over the cap: %q", e)
	}
}

// Events pages are budgeted by bytes (MaxEventsPageBytes): a page of the
// events route ends early and says where to go on (next_after_seq), so
// paging on reads each event once; a page of the view holds the newest
// events of its range that fit.
func TestEventPagesBudgetBytes(t *testing.T) {
	f := newFixture(t, apitest.Options{})
	a := f.s.API
	sh, err := f.s.Store.ShardFor(f.exec)
	if err != nil {
		t.Fatal(err)
	}
	// Five events of 900 KB each after the fixture's three (as large
	// commands would be): two fit a page, a third would pass it.
	const big = 900_000
	var last int64
	if err := sh.Pool().QueryRow(f.s.Ctx, `SELECT last_seq FROM execution WHERE execution_id = $1`, f.exec).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Pool().Exec(f.s.Ctx, `
		INSERT INTO event (execution_id, seq, event_id, event_type, context, created_at)
		SELECT $1, $2 + g, 900000000 + $2 + g, 'command.issued', jsonb_build_object('blob', repeat('x', $3)), now()
		FROM generate_series(1, 5) g`, f.exec, last, big); err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Pool().Exec(f.s.Ctx, `UPDATE execution SET last_seq = $2 WHERE execution_id = $1`, f.exec, last+5); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	var pages []int
	after := int64(0)
	for range 10 {
		r := must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d/events?limit=1000&after_seq=%d", f.exec, after), token: tAPI})
		es := r.json["events"].([]any)
		pages = append(pages, len(es))
		for _, e := range es {
			seen[e.(map[string]any)["seq"].(int64)]++
		}
		next, ok := r.json["next_after_seq"].(int64)
		if !ok {
			break
		}
		after = next
	}
	for seq := int64(1); seq <= last+5; seq++ {
		if seen[seq] != 1 {
			t.Errorf("seq %d read %d times", seq, seen[seq])
		}
	}
	if want := fmt.Sprint([]int{int(last) + 2, 2, 1}); fmt.Sprint(pages) != want {
		t.Errorf("events per page %v, want %s (two of %d bytes fit %d)", pages, want, big, api.MaxEventsPageBytes)
	}
	r := must(t, a, 200, call{method: "GET", target: fmt.Sprintf("/api/executions/%d?page_size=100", f.exec), token: tAPI})
	es := r.json["events"].([]any)
	if len(es) != 2 || es[0].(map[string]any)["seq"] != last+5 || es[1].(map[string]any)["seq"] != last+4 {
		t.Errorf("the view's page holds %d events, want the newest two", len(es))
	}
	if p := r.json["pagination"].(map[string]any); p["total_events"] != last+5 || p["page_size"] != int64(100) {
		t.Errorf("the view's pagination: %v", p)
	}
}
