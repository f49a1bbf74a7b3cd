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
