package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/dev/devserver"
	"github.com/noetl-go/noetl/shared/notify"
	"github.com/noetl-go/noetl/shared/worker"
)

// echoPlaybook echoes two payload values back, in its step's result and in the
// execution's context (the execution view's result).
const echoPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: echo, path: cli/echo}
workload:
  greeting: default greeting
  count: 0
workflow:
  - step: start
    tool:
      kind: noop
      result: {greeting: "{{ greeting }}", count: "{{ count }}"}
    set:
      ctx.echoed_greeting: "{{ output.greeting }}"
      ctx.echoed_count: "{{ output.count }}"
`

const failingPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fails, path: cli/fails}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        raise ValueError("this step always fails")
`

// slowPlaybook runs until it is cancelled (the worker's heartbeat learns of the
// cancel and stops the python process).
const slowPlaybook = `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: slow, path: cli/slow}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        import time
        time.sleep(30)
        result = {"never": True}
`

// cliStack is a throwaway control plane with two in-process workers on the
// shared pool, for driving the client commands in-process.
type cliStack struct {
	t   *testing.T
	ctx context.Context
	url string
	dir string
	srv *devserver.Server
}

func startCLIStack(t *testing.T) *cliStack {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Postgres and NATS")
	}
	// The client commands read these as flag defaults; the test names the server.
	t.Setenv("NOETL_API_TOKEN", "")
	t.Setenv("NOETL_SERVER_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	// Only what the test sets: throwaway parts, no tokens, and a short lease so a
	// worker learns of a cancel within a heartbeat (a third of the lease).
	env := map[string]string{"NOETL_LEASE_SECONDS": "3"}
	srv, err := devserver.Start(ctx, devserver.Options{Listen: "127.0.0.1:0", DrainEvery: 200 * time.Millisecond,
		Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatalf("start the stack: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close the stack: %v", err)
		}
	})
	// Registered after srv.Close, so run before it: workers stop first.
	wctx, stopWorkers := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stopWorkers(); wg.Wait() })
	logger := slog.New(slog.NewJSONHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	for i := range 2 {
		w, err := worker.Standard{Server: srv.URL, JS: srv.JS, Pool: notify.PoolShared, ID: fmt.Sprintf("cli-test-%d", i+1),
			Concurrency: 4, Python: "python3", Results: srv.Results, Logger: logger}.Build(ctx)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(wctx) }()
	}
	return &cliStack{t: t, ctx: ctx, url: srv.URL, dir: t.TempDir(), srv: srv}
}

// testLog sends worker logs to the test log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// cli runs `noetl ARGS --server URL` in-process.
func (s *cliStack) cli(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(s.ctx, append(args, "--server", s.url), &out, &errb)
	return code, out.String(), errb.String()
}

// file writes a file into the test's directory and returns its path.
func (s *cliStack) file(name, body string) string {
	s.t.Helper()
	f := filepath.Join(s.dir, name)
	if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
		s.t.Fatal(err)
	}
	return f
}

// decode decodes one JSON object.
func decode(t *testing.T, text string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, text)
	}
	return m
}

// decodeLines decodes JSON lines, one object a line.
func decodeLines(t *testing.T, text string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		out = append(out, decode(t, line))
	}
	return out
}

func stepOf(view map[string]any, name string) map[string]any {
	steps, _ := view["steps"].(map[string]any)
	st, _ := steps[name].(map[string]any)
	return st
}

// TestClientCommands drives register, exec, status, watch, events, cancel and
// replay in-process against a real stack, checking exit codes and output.
func TestClientCommands(t *testing.T) {
	s := startCLIStack(t)
	echoFile := s.file("echo.yaml", echoPlaybook)

	t.Run("register", func(t *testing.T) {
		code, out, errOut := s.cli("register", echoFile)
		if code != exitOK || !regexp.MustCompile(`^`+regexp.QuoteMeta(echoFile)+`: registered cli/echo version \d+ \(catalog id \d+\)\n$`).MatchString(out) {
			t.Fatalf("register: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = s.cli("register", "--json", echoFile)
		r := decode(t, out)
		if code != exitOK || r["file"] != echoFile || r["path"] != "cli/echo" {
			t.Fatalf("register --json: exit %d %v\n%s", code, r, errOut)
		}
		if v, _ := r["version"].(float64); v < 1 {
			t.Fatalf("register --json: version %v", r["version"])
		}
		if id, err := strconv.ParseInt(fmt.Sprint(r["catalog_id"]), 10, 64); err != nil || id <= 0 {
			t.Fatalf("register --json: catalog_id %v", r["catalog_id"])
		}
		// A broken playbook is refused (exit 1) and named.
		bad := s.file("bad.yaml", "apiVersion: noetl.io/v2\nkind: Playbook\nmetadata: {name: b, path: cli/bad}\nworkflow: []\n")
		if code, out, errOut := s.cli("register", bad); code != exitFail || !strings.Contains(errOut, bad+": ") {
			t.Fatalf("register of a broken playbook: exit %d\n%s%s", code, out, errOut)
		}
	})

	// exec --wait --json: --set and --payload both reach the workload, --set wins.
	payload := s.file("payload.json", `{"greeting": "from the file", "count": 7}`)
	code, out, errOut := s.cli("exec", "cli/echo", "--set", "greeting=hello from --set", "--payload", payload, "--wait", "--json")
	if code != exitOK {
		t.Fatalf("exec --wait --json: exit %d\n%s%s", code, out, errOut)
	}
	view := decode(t, out)
	result, _ := view["result"].(map[string]any)
	if view["status"] != "COMPLETED" || view["path"] != "cli/echo" ||
		result["echoed_greeting"] != "hello from --set" || result["echoed_count"] != float64(7) {
		t.Fatalf("exec --wait --json: %s", out)
	}
	stepResult := fmt.Sprint(stepOf(view, "start")["result"])
	if !strings.Contains(stepResult, "hello from --set") || !strings.Contains(stepResult, "7") {
		t.Fatalf("the step's result does not echo the payload: %s", stepResult)
	}
	echoID := view["execution_id"].(string)

	t.Run("exec human", func(t *testing.T) {
		code, out, errOut := s.cli("exec", "cli/echo", "--set", "count=3", "--wait")
		if code != exitOK || !strings.Contains(out, "of cli/echo: COMPLETED") || !strings.Contains(out, `"echoed_count": 3`) {
			t.Fatalf("exec --wait: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = s.cli("exec", "cli/echo", "--json")
		if r := decode(t, out); code != exitOK || r["status"] != "started" || r["execution_id"] == "" {
			t.Fatalf("exec --json without --wait: exit %d\n%s%s", code, out, errOut)
		}
	})

	// A playbook file is registered first; a failed run exits 1 with --wait.
	failFile := s.file("fails.yaml", failingPlaybook)
	code, out, errOut = s.cli("exec", failFile, "--wait")
	if code != exitFail || !strings.Contains(out, "of cli/fails: FAILED") || !strings.Contains(out, "error: ValueError: this step always fails") {
		t.Fatalf("exec of a failing playbook: exit %d, want %d\n%s%s", code, exitFail, out, errOut)
	}
	failedID := regexp.MustCompile(`execution (\d+) of`).FindStringSubmatch(out)[1]

	t.Run("status", func(t *testing.T) {
		code, out, errOut := s.cli("status", echoID)
		if code != exitOK || !strings.Contains(out, "execution "+echoID+": COMPLETED\n") || !strings.Contains(out, "steps: 1 total, 1 completed, 0 running, 0 failed, 0 skipped") {
			t.Fatalf("status: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = s.cli("status", echoID, "--json")
		st := decode(t, out)
		progress, _ := st["progress"].(map[string]any)
		if code != exitOK || st["execution_id"] != echoID || st["status"] != "COMPLETED" || progress["completed_steps"] != float64(1) {
			t.Fatalf("status --json: exit %d\n%s%s", code, out, errOut)
		}
		// status reports; it does not judge: a FAILED execution is still exit 0.
		code, out, _ = s.cli("status", failedID, "--json")
		if st := decode(t, out); code != exitOK || st["status"] != "FAILED" {
			t.Fatalf("status --json of the failed run: exit %d\n%s", code, out)
		}
		if code, _, errOut := s.cli("status", "987654321"); code != exitFail || !strings.Contains(errOut, "404") {
			t.Fatalf("status of an unknown execution: exit %d\n%s", code, errOut)
		}
	})

	// whatif: the fix of cli/fails (its error handled) over the recorded failed
	// run: it would now complete, diverging at start; nothing runs.
	t.Run("whatif", func(t *testing.T) {
		fixed := s.file("fails-v2.yaml", strings.Replace(failingPlaybook, "  - step: start\n", "  - step: start\n    spec: {on_error: continue}\n", 1))
		code, out, errOut := s.cli("whatif", fixed, "--path", "cli/fails", "--status", "FAILED", "--since", "24h")
		row := regexp.MustCompile(`(?m)^` + failedID + `\s+FAILED v\d+\s+would_complete\s+start\s+status: recorded failed, now completed`)
		if code != exitOK || !row.MatchString(out) || !strings.Contains(out, "1 execution: 0 same, 1 would complete, 0 would fail, 0 need a live run") {
			t.Fatalf("whatif: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = s.cli("whatif", fixed, "--executions", failedID, "--json")
		if r := decode(t, out); code != exitOK || fmt.Sprint(r["summary"]) != "map[needs_live:0 same:0 would_complete:1 would_fail:0]" {
			t.Fatalf("whatif --json: exit %d\n%s%s", code, out, errOut)
		}
		// Another playbook's version: refused, naming both paths.
		code, _, errOut = s.cli("whatif", echoFile, "--path", "cli/fails")
		if code != exitFail || !strings.Contains(errOut, "cli/fails") || !strings.Contains(errOut, "cli/echo") {
			t.Fatalf("whatif of another playbook: exit %d\n%s", code, errOut)
		}
		if code, _, errOut := s.cli("whatif"); code != exitUsage || !strings.Contains(errOut, "--version") {
			t.Fatalf("whatif without a version: exit %d\n%s", code, errOut)
		}
	})

	t.Run("events", func(t *testing.T) {
		code, out, errOut := s.cli("events", echoID, "--json")
		if code != exitOK {
			t.Fatalf("events --json: exit %d\n%s", code, errOut)
		}
		evs := decodeLines(t, out)
		var types []string
		for i, e := range evs {
			if e["execution_id"] != echoID {
				t.Fatalf("event %d belongs to %v", i, e["execution_id"])
			}
			if i > 0 && e["seq"].(float64) <= evs[i-1]["seq"].(float64) {
				t.Fatalf("events out of order at %d: %v after %v", i, e["seq"], evs[i-1]["seq"])
			}
			types = append(types, e["event_type"].(string))
		}
		started, completed := slices.Index(types, "playbook.started"), slices.Index(types, "playbook.completed")
		if started < 0 || completed < started || completed != len(types)-1 {
			t.Fatalf("event types %v", types)
		}
		code, out, _ = s.cli("events", echoID)
		if code != exitOK || strings.Count(out, "\n") != len(evs) || !strings.Contains(out, "playbook.completed") {
			t.Fatalf("events: exit %d\n%s", code, out)
		}
	})

	t.Run("watch finished", func(t *testing.T) {
		code, out, errOut := s.cli("watch", echoID)
		if code != exitOK || !strings.HasPrefix(out, "execution "+echoID+"  COMPLETED") || !strings.Contains(out, "STEP") ||
			!regexp.MustCompile(`\n  start +completed +1 +1\n`).MatchString(out) || !strings.Contains(out, "1/1 steps finished") {
			t.Fatalf("watch: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = s.cli("watch", echoID, "--json")
		lines := decodeLines(t, out)
		if code != exitOK || len(lines) != 1 || lines[0]["status"] != "COMPLETED" || lines[0]["execution_id"] != echoID ||
			stepOf(lines[0], "start")["status"] != "completed" {
			t.Fatalf("watch --json: exit %d\n%s%s", code, out, errOut)
		}
		// Exit codes as exec --wait: 1 unless COMPLETED.
		code, out, _ = s.cli("watch", failedID, "--json")
		if lines := decodeLines(t, out); code != exitFail || len(lines) != 1 || lines[0]["status"] != "FAILED" {
			t.Fatalf("watch --json of the failed run: exit %d\n%s", code, out)
		}
		if code, out, _ := s.cli("watch", failedID); code != exitFail || !strings.Contains(out, "error: ValueError") {
			t.Fatalf("watch of the failed run: exit %d\n%s", code, out)
		}
	})

	t.Run("replay verify", func(t *testing.T) {
		for _, id := range []string{echoID, failedID} {
			code, out, errOut := s.cli("replay", id, "--verify", "--json")
			v, _ := decode(t, out)["verify"].(map[string]any)
			if code != exitOK || v["consistent"] != true {
				t.Fatalf("replay %s --verify --json: exit %d verify %v\n%s", id, code, v, errOut)
			}
		}
	})

	t.Run("cancel", func(t *testing.T) {
		slowFile := s.file("slow.yaml", slowPlaybook)
		code, out, errOut := s.cli("exec", slowFile, "--json")
		if code != exitOK {
			t.Fatalf("exec slow: exit %d\n%s%s", code, out, errOut)
		}
		slowID := decode(t, out)["execution_id"].(string)
		// Wait until a worker runs the step.
		for {
			code, out, errOut := s.cli("status", slowID, "--json")
			st := decode(t, out)
			if code != exitOK || st["status"] != "RUNNING" {
				t.Fatalf("status of the slow run: exit %d\n%s%s", code, out, errOut)
			}
			if p, _ := st["progress"].(map[string]any); p["running_steps"] == float64(1) {
				break
			}
			select {
			case <-s.ctx.Done():
				t.Fatal("the slow step never started")
			case <-time.After(50 * time.Millisecond):
			}
		}
		// noetl workers: both workers alive, the one running the step busy
		// once it has claimed it (the step runs from its command's issue).
		for {
			code, out, errOut := s.cli("workers", "--json", "--status", "alive")
			items, _ := decode(t, out)["items"].([]any)
			busy := 0.0
			for _, it := range items {
				busy += it.(map[string]any)["in_flight"].(float64)
			}
			if code != exitOK || len(items) != 2 || busy > 1 {
				t.Fatalf("workers --json: exit %d, %d items, %v in flight\n%s%s", code, len(items), busy, out, errOut)
			}
			if busy == 1 {
				break
			}
			select {
			case <-s.ctx.Done():
				t.Fatalf("no worker ever held the slow step: %s", out)
			case <-time.After(50 * time.Millisecond):
			}
		}
		code, out, errOut = s.cli("workers")
		if code != exitOK || !regexp.MustCompile(`(?m)^cli-test-1\s+shared\s+go\s+ready\s+[01]/4\s`).MatchString(out) ||
			!regexp.MustCompile(`(?m)^cli-test-2\s+shared\s+go\s+ready\s+[01]/4\s`).MatchString(out) ||
			!strings.Contains(out, "2 of 2 workers alive; 1 in flight on 8 declared slots") {
			t.Fatalf("workers: exit %d\n%s%s", code, out, errOut)
		}

		// watch --json follows it: a line per change, the last one final.
		var watchOut, watchErr syncWriter
		watched := make(chan int, 1)
		go func() {
			watched <- run(s.ctx, []string{"watch", slowID, "--json", "--every", "50ms", "--server", s.url}, &watchOut, &watchErr)
		}()
		for !strings.Contains(watchOut.String(), "\n") {
			select {
			case code := <-watched:
				t.Fatalf("watch ended early: exit %d\n%s%s", code, watchOut.String(), watchErr.String())
			case <-time.After(20 * time.Millisecond):
			}
		}

		code, out, errOut = s.cli("cancel", slowID)
		if code != exitOK || out != "execution "+slowID+" cancelled\n" {
			t.Fatalf("cancel: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = s.cli("status", slowID, "--json")
		if st := decode(t, out); code != exitOK || st["status"] != "CANCELLED" || st["is_cancelled"] != true {
			t.Fatalf("status after cancel: exit %d\n%s%s", code, out, errOut)
		}

		var watchCode int
		select {
		case watchCode = <-watched:
		case <-s.ctx.Done():
			t.Fatal("watch did not end after the cancel")
		}
		lines := decodeLines(t, watchOut.String())
		if watchCode != exitFail || len(lines) < 2 || lines[0]["status"] != "RUNNING" || lines[len(lines)-1]["status"] != "CANCELLED" {
			t.Fatalf("watch --json of a cancelled run: exit %d, %d lines\n%s%s", watchCode, len(lines), watchOut.String(), watchErr.String())
		}
		for i := 1; i < len(lines); i++ {
			a, _ := json.Marshal(lines[i-1])
			b, _ := json.Marshal(lines[i])
			if bytes.Equal(a, b) {
				t.Fatalf("watch --json printed an unchanged view twice (lines %d and %d)", i, i+1)
			}
		}

		// Cancelling again succeeds (no-op, NoETL's already_completed answer);
		// --json prints the API's answer.
		code, out, errOut = s.cli("cancel", slowID, "--json")
		if r := decode(t, out); code != exitOK || r["execution_id"] != slowID || r["status"] != "already_completed" || r["already"] != "CANCELLED" ||
			r["message"] != "Execution "+slowID+" is already CANCELLED" || len(r["cancelled_executions"].([]any)) != 0 {
			t.Fatalf("cancel --json of a cancelled run: exit %d\n%s%s", code, out, errOut)
		}
		// A COMPLETED execution is left as it is: exit 1, the answer says why.
		code, out, errOut = s.cli("cancel", echoID, "--json")
		if r := decode(t, out); code != exitFail || r["already"] != "COMPLETED" {
			t.Fatalf("cancel --json of a completed run: exit %d\nstdout %q\nstderr %q", code, out, errOut)
		}
		code, out, errOut = s.cli("cancel", echoID)
		if code != exitFail || out != "" || errOut != "execution "+echoID+" had already ended COMPLETED: nothing cancelled\n" {
			t.Fatalf("cancel of a completed run: exit %d\nstdout %q\nstderr %q", code, out, errOut)
		}
		if code, out, _ := s.cli("status", echoID, "--json"); code != exitOK || decode(t, out)["status"] != "COMPLETED" {
			t.Fatalf("the completed run changed: %s", out)
		}
		code, out, errOut = s.cli("replay", slowID, "--verify", "--json")
		if v, _ := decode(t, out)["verify"].(map[string]any); code != exitOK || v["consistent"] != true {
			t.Fatalf("replay of the cancelled run: exit %d verify %v\n%s", code, v, errOut)
		}
	})

	// noetl doctor: nothing to name, then an execution that nothing will
	// move (its command ended behind the engine's back, as a bug would
	// leave it), named with why and exit 1; json is the route's answer.
	t.Run("doctor", func(t *testing.T) {
		if code, out, errOut := s.cli("doctor"); code != exitOK || out != "every running execution has something that will move it\n" {
			t.Fatalf("doctor: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut := s.cli("exec", "cli/echo", "--pool", "cli-nobody", "--json")
		if code != exitOK {
			t.Fatalf("exec: exit %d\n%s%s", code, out, errOut)
		}
		id := decode(t, out)["execution_id"].(string)
		n, _ := strconv.ParseInt(id, 10, 64)
		sh, err := s.srv.Store.ShardFor(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sh.Pool().Exec(s.ctx, `UPDATE command SET status = 'COMPLETED' WHERE execution_id = $1`, n); err != nil {
			t.Fatal(err)
		}
		code, out, errOut = s.cli("doctor")
		if code != exitFail || !strings.HasPrefix(out, id+"  cli/echo  RUNNING") || !strings.Contains(out, "nothing will move it") ||
			!strings.HasSuffix(out, "1 execution(s) stalled\n") {
			t.Fatalf("doctor with a stalled execution: exit %d\n%s%s", code, out, errOut)
		}
		code, out, _ = s.cli("doctor", "--json")
		stalled, _ := decode(t, out)["stalled"].([]any)
		if code != exitFail || len(stalled) != 1 || stalled[0].(map[string]any)["execution_id"] != id {
			t.Fatalf("doctor --json: exit %d\n%s", code, out)
		}
		if code, _, errOut := s.cli("cancel", id); code != exitOK {
			t.Fatalf("cancel: exit %d\n%s", code, errOut)
		}
		if code, _, _ := s.cli("doctor"); code != exitOK {
			t.Fatalf("doctor after the cancel: exit %d", code)
		}
	})

	t.Run("redrive", func(t *testing.T) {
		// A completed execution is refused, naming its status.
		code, out, errOut := s.cli("redrive", echoID)
		if code != exitFail || out != "" || !strings.Contains(errOut, "is COMPLETED") {
			t.Fatalf("redrive of a completed execution: exit %d\n%s%s", code, out, errOut)
		}
		// The fix registered as version 2; the failed run continues under it.
		fixed := strings.Replace(failingPlaybook, `raise ValueError("this step always fails")`, `result = {"fixed": True}`, 1)
		if code, out, errOut := s.cli("register", s.file("fixed.yaml", fixed)); code != exitOK {
			t.Fatalf("register the fix: exit %d\n%s%s", code, out, errOut)
		}
		code, out, errOut = s.cli("redrive", failedID, "--version", "2", "--wait")
		if code != exitOK || !strings.Contains(out, "execution "+failedID+" redriven: cli/fails version 2 (was FAILED under version 1), 1 command(s) issued\n") ||
			!strings.HasSuffix(out, "execution "+failedID+": COMPLETED\n") {
			t.Fatalf("redrive --version 2 --wait: exit %d\n%s%s", code, out, errOut)
		}
		// Several ids go in one bulk request; each refused one is listed.
		code, out, errOut = s.cli("redrive", failedID, echoID, "--json")
		b := decode(t, out)
		if code != exitFail || b["refused"] != float64(2) || b["redriven"] != float64(0) {
			t.Fatalf("bulk redrive of two ended executions: exit %d\n%s%s", code, out, errOut)
		}
	})

	t.Run("bad usage", func(t *testing.T) {
		for _, args := range [][]string{{"status", "abc"}, {"status", "0"}, {"status"}, {"status", "1", "2"},
			{"watch", "abc", "--json"}, {"events", "abc"}, {"cancel", "abc", "--json"}, {"replay", "abc"}, {"exec"}, {"register"},
			{"workers", "extra"}, {"redrive"}, {"redrive", "abc"}} {
			code, out, errOut := s.cli(args...)
			if code != exitUsage || out != "" || errOut == "" {
				t.Errorf("noetl %v: exit %d, want %d\nstdout %q\nstderr %q", args, code, exitUsage, out, errOut)
			}
		}
		if _, _, errOut := s.cli("status", "abc"); !strings.Contains(errOut, `"abc" is not an execution id`) {
			t.Errorf("status abc: %s", errOut)
		}
	})
}
