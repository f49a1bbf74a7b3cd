package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/wire"
)

// addressSpaceLimit is issue 10's 3 GB, in the KiB `ulimit -v` takes.
const addressSpaceLimit = 3 << 20

// limited runs the noetl binary under the address-space limit.
func limited(bin string, args ...string) *exec.Cmd {
	return exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, addressSpaceLimit), bin}, args...)...)
}

// hostilePlaybook is a playbook at path with the given workload/workbook/workflow text.
func hostilePlaybook(path, rest string) string {
	return "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: hostile, path: " + path + "}\n" + rest
}

const noopStart = "workflow:\n  - step: start\n    tool: {kind: noop}\n"

// laughsIn is a billion laughs of levels lists of width aliases, indented under a
// mapping at indent.
func laughsIn(indent string, levels, width int) string {
	var b strings.Builder
	items := make([]string, width)
	for i := range items {
		items[i] = "lol"
	}
	fmt.Fprintf(&b, "%sl0: &l0 [%s]\n", indent, strings.Join(items, ", "))
	for l := 1; l < levels; l++ {
		for i := range items {
			items[i] = fmt.Sprintf("*l%d", l-1)
		}
		fmt.Fprintf(&b, "%sl%d: &l%d [%s]\n", indent, l, l, strings.Join(items, ", "))
	}
	return b.String()
}

// repeated is n copies of s joined by sep.
func repeated(s string, n int, sep string) string {
	return strings.TrimSuffix(strings.Repeat(s+sep, n), sep)
}

// hostileRegistrations are alias bombs of several shapes, each refused at
// register with a 4xx naming the limit.
func hostileRegistrations() []struct{ name, content, want string } {
	manyAliases := hostilePlaybook("hostile/many", "workload:\n  a: &a ["+repeated("1", 1000, ",")+"]\n  l: ["+repeated("*a", 60000, ",")+"]\n"+noopStart)
	var merge strings.Builder
	merge.WriteString("workload:\n  m0: &m0 {a: 1, b: 2, c: 3, d: 4, e: 5, f: 6, g: 7, h: 8}\n")
	for l := 1; l < 14; l++ {
		fmt.Fprintf(&merge, "  m%d: &m%d {w: {<<: *m%d}, x: {<<: *m%d}, y: {<<: [*m%d, *m%d]}}\n", l, l, l-1, l-1, l-1, l-1)
	}
	var refs strings.Builder
	refs.WriteString("workbook:\n  - name: w\n    tool: {kind: noop, input: {rows: [" + repeated("1", 4000, ",") + "]}}\nworkflow:\n")
	for i := range 40 { // 40 references to 4,000 values: past MaxExpandedNodes, within MaxSteps
		name := fmt.Sprintf("s%d", i)
		if i == 0 {
			name = "start"
		}
		fmt.Fprintf(&refs, "  - step: %s\n    tool: {kind: workbook, name: w}\n", name)
	}
	var templates strings.Builder
	for i := range 13000 {
		fmt.Fprintf(&templates, "        k%d: \"{{ %d }}\"\n", i, i)
	}
	return []struct{ name, content, want string }{
		{"13,000 templates", hostilePlaybook("hostile/templates", "workflow:\n  - step: start\n    tool:\n      kind: noop\n      input:\n"+templates.String()), "limit MaxTemplates"},
		{"long template aliased", hostilePlaybook("hostile/longtemplate", "workload:\n  t: &t \"{{ 1 }}"+strings.Repeat("x", 60<<10)+"\"\n  l: ["+repeated("*t", 18, ",")+"]\n"+noopStart), "limit MaxTemplateBytes"},
		{"billion laughs", hostilePlaybook("hostile/laughs", "workload:\n"+laughsIn("  ", 9, 9)+noopStart), "limit MaxExpandedNodes"},
		{"2^40 laughs", hostilePlaybook("hostile/deep", "workload:\n"+laughsIn("  ", 40, 2)+noopStart), "limit MaxExpandedNodes"},
		{"laughs in tool input", hostilePlaybook("hostile/input", "workflow:\n  - step: start\n    tool:\n      kind: noop\n      input:\n"+laughsIn("        ", 9, 9)), "limit MaxExpandedNodes"},
		{"long scalar aliased", hostilePlaybook("hostile/long", "workload:\n  s: &s "+strings.Repeat("x", 400<<10)+"\n  l: ["+repeated("*s", 200, ",")+"]\n"+noopStart), "limit MaxExpandedBytes"},
		{"many aliases", manyAliases, "limit MaxExpandedNodes"},
		{"many aliases, base64", base64.StdEncoding.EncodeToString([]byte(manyAliases)), "limit MaxExpandedNodes"},
		{"merge keys", hostilePlaybook("hostile/merge", merge.String()+noopStart), "limit MaxExpandedNodes"},
		{"recursive alias", hostilePlaybook("hostile/loop", "workload: &w {a: *w}\n"+noopStart), "a recursive alias never ends"},
		{"workbook references", hostilePlaybook("hostile/refs", refs.String()), "once workbook references are expanded"},
	}
}

// multiplied is a playbook whose templates multiply what they build, and what its
// execution must end with: a 422 at execute naming the limit (workload
// templates render there), or FAILED naming it.
type multiplied struct {
	name, content string
	atExecute     bool // a 422 at execute instead of a FAILED execution
	want          string
}

func hostileTemplates() []multiplied {
	replace3 := `('a' * 100000)|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa')`
	var leaves, keys, set, next, fan strings.Builder
	for i := range 4500 {
		fmt.Fprintf(&leaves, "        k%d: \"{{ 'x' * 1000000 }}\"\n", i)
		fmt.Fprintf(&keys, "  k%d: \"{{ 'x' * 1000000 }}\"\n", i)
		fmt.Fprintf(&set, "      v%d: \"{{ 'x' * 1000000 }}\"\n", i)
	}
	for i := range 1999 { // with start, playbook.MaxSteps
		fmt.Fprintf(&next, "s%d,", i)
		fmt.Fprintf(&fan, "  - step: s%d\n    tool: {kind: noop, message: \"{{ 'x' * 1000000 }}\"}\n", i)
	}
	step := func(tool string) string { return "workflow:\n  - step: start\n    tool: " + tool + "\n" }
	return []multiplied{
		{"chained replace", hostilePlaybook("hostile/replace", step(`{kind: noop, message: "{{ `+replace3+` }}"}`)), false, "limit MaxRenderBytes"},
		{"repetition", hostilePlaybook("hostile/repeat", step(`{kind: noop, input: {s: "{{ 'x' * 1000000000 }}"}}`)), false, "limit MaxRenderBytes"},
		{"nested lists", hostilePlaybook("hostile/lists", step(`{kind: noop, input: {l: "{{ [[[[1] * 1000] * 1000] * 1000] * 1000 }}"}}`)), false, "limit MaxRenderElements"},
		{"loop collection", hostilePlaybook("hostile/range", "workflow:\n  - step: start\n    loop: {in: \"{{ range(100000000) }}\", iterator: i}\n    tool: {kind: noop}\n"), false, "limit MaxRenderElements"},
		{"nested for", hostilePlaybook("hostile/for", step(`{kind: noop, message: "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"}`)), false, "render budget exceeded"},
		{"indented deep value", hostilePlaybook("hostile/indent", "workload:\n  deep: "+strings.Repeat("[", 3000)+strings.Repeat("]", 3000)+"\n"+step(`{kind: noop, message: "{{ workload.deep|tojson(16) }}"}`)), false, "limit MaxRenderBytes"},
		{"4,500 input leaves", hostilePlaybook("hostile/leaves", "workflow:\n  - step: start\n    tool:\n      kind: noop\n      input:\n"+leaves.String()), false, "limit MaxRenderBytes"},
		{"4,500 workload templates", hostilePlaybook("hostile/workload", "workload:\n"+keys.String()+noopStart), true, "limit MaxRenderBytes"},
		// These render after the start step ran on a worker.
		{"replace of a result", hostilePlaybook("hostile/result", "workflow:\n  - step: start\n    tool: {kind: python, code: \"result = 'a' * 100000\"}\n    next: grow\n"+
			"  - step: grow\n    tool: {kind: noop, message: \"{{ start|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa')|replace('a', 'aaaaaaaaaa') }}\"}\n"), false, "limit MaxRenderBytes"},
		{"4,500 set values", hostilePlaybook("hostile/set", "workflow:\n  - step: start\n    tool: {kind: noop}\n    set:\n"+set.String()), false, "limit MaxRenderBytes"},
		{"fan-out of 1,999 steps", hostilePlaybook("hostile/fan", "workflow:\n  - step: start\n    tool: {kind: noop}\n    next: ["+strings.TrimSuffix(next.String(), ",")+"]\n"+fan.String()), false, "limit MaxRenderBytes"},
		{"pipeline item", hostilePlaybook("hostile/pipeline", "workflow:\n  - step: start\n    tool:\n      - a: {kind: noop, message: \"{{ "+replace3+" }}\"}\n"), false, "render budget exceeded"},
	}
}

// post sends a JSON body and returns the status and the decoded answer.
func post(ctx context.Context, url string, body any) (int, map[string]any, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("answer %q: %w", raw, err)
	}
	return resp.StatusCode, out, nil
}

// TestHostileInputsUnderAddressSpaceLimit is issue 10's "done when": under a 3 GB
// address-space limit, `noetl serve` survives alias bombs and multiplying
// templates of every shape up to the body limit: each request gets a 4xx naming
// the limit, or its execution ends FAILED naming it, and the server stays
// healthy. Before the budgets the first bomb ran it out of memory.
func TestHostileInputsUnderAddressSpaceLimit(t *testing.T) {
	t.Parallel()
	bin := buildNoetl(t)
	// The Go runtime must start at all under the limit on this machine.
	if out, err := limited(bin, "routes").CombinedOutput(); err != nil {
		t.Fatalf("noetl does not start under ulimit -v %d: %v\n%s", addressSpaceLimit, err, out)
	}

	dir := t.TempDir()
	logFile, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	// One result store for both, as a deployment has: results over the
	// worker's 64 KiB go there (the replace case reads one).
	results := "file://" + filepath.Join(dir, "results")
	serve := limited(bin, "serve", "--listen", "127.0.0.1:0", "--drain-every", "500ms", "--shards", "1", "--result-store", results)
	serve.Env = append(os.Environ(), "NOETL_DATABASE_URL=", "NOETL_SHARD_URLS=", "NOETL_NATS_URL=", "NOETL_API_TOKEN=",
		"NOETL_WORKER_TOKEN=", "NOETL_INTERNAL_TOKEN=", "NOETL_INTERNAL_API_TOKEN=", "NOETL_LISTEN=", "NOETL_SERVER_URL=", "NOETL_LOG_LEVEL=warn")
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	serve.Stderr = logFile
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- serve.Wait()
	}()
	t.Cleanup(func() {
		_ = serve.Process.Signal(syscall.SIGINT) // it removes its Postgres on the way out
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = serve.Process.Kill()
		}
	})
	serverLog := func() string {
		b, _ := os.ReadFile(logFile.Name())
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		return string(b)
	}
	var url, natsURL string
	var printed []string
	startup := time.After(3 * time.Minute)
	for url == "" || natsURL == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("serve exited before listening: %v\n%s\n%s", <-exited, strings.Join(printed, "\n"), serverLog())
			}
			printed = append(printed, line)
			if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(line); m != nil {
				url = m[1]
			}
			if m := regexp.MustCompile(`embedded NATS at (\S+)`).FindStringSubmatch(line); m != nil {
				natsURL = m[1]
			}
		case <-startup:
			t.Fatalf("serve did not start:\n%s\n%s", strings.Join(printed, "\n"), serverLog())
		}
	}
	go func() {
		for range lines { // keep its stdout flowing
		}
	}()

	// --tool-user=: the test's directory is root's alone.
	worker := exec.Command(bin, "worker", "--server", url, "--nats", natsURL, "--pool", "hostile", "--id", "hostile-worker",
		"--concurrency", "4", "--tool-user=", "--result-store", results)
	worker.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	worker.Env = append(os.Environ(), "TMPDIR="+dir, "NOETL_WORKER_TOKEN=", "NOETL_API_TOKEN=")
	worker.Stderr = testWriter{t}
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	workerExited := make(chan error, 1)
	go func() {
		workerExited <- worker.Wait()
		cancel() // nothing would end the executions the test waits for
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-worker.Process.Pid, syscall.SIGKILL)
		<-workerExited
	})
	cl := client.New(url, "")
	var wg sync.WaitGroup
	jobs := make(chan func(), 4)
	for range 4 { // a few requests at once, as a hostile client would send them
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range jobs {
				job()
			}
		}()
	}
	for _, c := range hostileRegistrations() {
		jobs <- func() {
			status, body, err := post(ctx, url+"/api/catalog/register", map[string]any{"content": c.content})
			msg, _ := body["error"].(string)
			if err != nil || status != http.StatusUnprocessableEntity || !strings.Contains(msg, c.want) {
				t.Errorf("%s (%d bytes): status %d, error %.300q, %v; want 422 naming %q", c.name, len(c.content), status, msg, err, c.want)
			}
		}
	}
	for _, c := range hostileTemplates() {
		jobs <- func() {
			if len(c.content) > 512<<10 {
				t.Errorf("%s: %d bytes, over the playbook limit", c.name, len(c.content))
				return
			}
			reg, err := cl.Register(ctx, c.content)
			if err != nil {
				t.Errorf("%s: register: %v", c.name, err)
				return
			}
			status, body, err := post(ctx, url+"/api/execute", map[string]any{"path": reg.Path, "execution_pool": "hostile"})
			msg, _ := body["error"].(string)
			if c.atExecute {
				if err != nil || status != http.StatusUnprocessableEntity || !strings.Contains(msg, c.want) {
					t.Errorf("%s: execute: status %d, error %.300q, %v; want 422 naming %q", c.name, status, msg, err, c.want)
				}
				return
			}
			id, _ := body["execution_id"].(string)
			if err != nil || status != http.StatusOK || id == "" {
				t.Errorf("%s: execute: status %d, body %v, %v", c.name, status, body, err)
				return
			}
			var n int64
			fmt.Sscan(id, &n)
			view, err := cl.Wait(ctx, n, 200*time.Millisecond)
			if err != nil {
				t.Errorf("%s: execution %s: %v", c.name, id, err)
			} else if e := string(view.Error); view.Status != "FAILED" || !strings.Contains(e, c.want) {
				t.Errorf("%s: execution %s: status %v, error %.300q; want FAILED naming %q", c.name, id, view.Status, e, c.want)
			}
		}
	}
	close(jobs)
	wg.Wait()

	select {
	case err := <-exited:
		t.Fatalf("serve died: %v\n%s", err, serverLog())
	default:
	}
	h, err := cl.Health(ctx)
	if err != nil || h.Status.V != "ok" || h.Database != "ok" {
		t.Fatalf("health after the hostile batch: %v %v\n%s", h, err, serverLog())
	}
	// And it still does its work.
	reg, err := cl.Register(ctx, hostilePlaybook("hostile/benign", "workflow:\n  - step: start\n    tool: {kind: python, code: \"result = {'ok': True}\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := cl.Execute(ctx, wire.ExecuteRequest{Path: reg.Path, Pool: "hostile"})
	if err != nil {
		t.Fatal(err)
	}
	if view, err := cl.Wait(ctx, id, 200*time.Millisecond); err != nil || view.Status != "COMPLETED" {
		t.Fatalf("benign execution after the batch: %v %v", view, err)
	}
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", serve.Process.Pid)); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmPeak") || strings.HasPrefix(line, "VmHWM") {
				t.Logf("noetl serve %s", strings.Join(strings.Fields(line), " "))
			}
		}
	}
}
