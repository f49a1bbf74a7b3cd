package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/store/storetest"
	"github.com/noetl-go/noetl/shared/wire"
)

// registerYAML registers a playbook written in the test.
func registerYAML(t *testing.T, yaml string) string {
	t.Helper()
	r, err := shared.cl.Register(context.Background(), yaml)
	if err != nil {
		t.Fatalf("register: %v", err)
	}
	return r.Path
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	var out []int
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name, which is in parentheses: state ppid …
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			if ppid, _ := strconv.Atoi(fields[1]); ppid == pid {
				out = append(out, child)
			}
		}
	}
	return out
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestWorkerKilledMidCommand: a worker is killed while its python step runs,
// together with the python subprocess group; the lease expires, the command is
// re-issued (attempt 2, R-L3) and another worker completes it.
func TestWorkerKilledMidCommand(t *testing.T) {
	t.Parallel()
	marker := filepath.Join(t.TempDir(), "first-attempt")
	path := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: killed, path: e2e/killed}
workflow:
  - step: start
    retry: {delay: 0}
    tool:
      kind: python
      input: {marker: "{{ marker }}"}
      code: |
        import os, time
        if not os.path.exists(marker):
            open(marker, "w").write("attempt 1")
            time.sleep(300)
        result = {"survived": True}
`)
	bin := buildNoetl(t)
	// Tools run as the worker (--tool-user=): the marker lives in this test's
	// private temp dir, which a separate tool user could not write.
	victim := exec.Command(bin, "worker", "--server", shared.srv.URL, "--nats", shared.srv.NATSURL,
		"--pool", "faults-kill", "--id", "victim", "--concurrency", "1", "--tool-user=")
	victim.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// SIGKILL leaves the python tool's work directory behind: keep it in the test's.
	victim.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	victim.Stderr = testWriter{t}
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = victim.Wait(); close(exited) }()
	t.Cleanup(func() { _ = syscall.Kill(-victim.Process.Pid, syscall.SIGKILL) })

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	id, err := shared.cl.Execute(ctx, wire.ExecuteRequest{Path: path, Pool: "faults-kill", Payload: map[string]any{"marker": marker}})
	if err != nil {
		t.Fatal(err)
	}
	for !exists(marker) {
		if ctx.Err() != nil {
			t.Fatal("the victim never started the python step")
		}
		time.Sleep(50 * time.Millisecond)
	}
	pythons := children(victim.Process.Pid)
	if len(pythons) == 0 {
		t.Fatal("no python subprocess under the victim worker")
	}
	// The worker first: killed after its python, it could see the python
	// die and report the step failed before its own end (a step that
	// failed, not a worker killed mid-command).
	_ = syscall.Kill(-victim.Process.Pid, syscall.SIGKILL)
	<-exited
	for _, p := range pythons {
		_ = syscall.Kill(-p, syscall.SIGKILL) // its own process group (the tool's)
	}
	for _, p := range pythons {
		for alive(p) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
		}
	}

	shared.startWorkers(t, "faults-kill", 1)
	view, err := shared.cl.Wait(ctx, id, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if view.Status != "COMPLETED" || step(view, "start").Attempts != 2 {
		t.Fatalf("status %v, start %v", view.Status, step(view, "start"))
	}
	evs := shared.events(t, id)
	if count(evs, "command.expired", "start") != 1 || count(evs, "command.retry", "start") != 1 || count(evs, "command.issued", "start") != 1 {
		t.Fatalf("expected one expiry and one retry of one command: %d %d %d",
			count(evs, "command.expired", "start"), count(evs, "command.retry", "start"), count(evs, "command.issued", "start"))
	}
	claims := 0
	for _, e := range evs {
		if e.EventType == "command.claimed" {
			claims++
			meta := e.Meta
			if meta["attempt"] != int64(claims) {
				t.Fatalf("claim %d has attempt %v", claims, meta["attempt"])
			}
		}
	}
	if claims != 2 {
		t.Fatalf("%d claims, want 2", claims)
	}
	shared.verify(t, id)
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestToolTimeout: the step timeout is enforced (the python process is killed)
// and the step fails with a timeout; with retry.on timeout it is retried first.
func TestToolTimeout(t *testing.T) {
	t.Parallel()
	shared.startWorkers(t, "faults-timeout", 1)
	for _, c := range []struct {
		name, retry string
		attempts    int
	}{{"no retry", "", 1}, {"retried", "    retry: {max_attempts: 2, delay: 0, on: [timeout]}\n", 2}} {
		t.Run(c.name, func(t *testing.T) {
			path := registerYAML(t, fmt.Sprintf(`apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: slow, path: e2e/slow-%d}
workflow:
  - step: start
    timeout: 2
%s    tool:
      kind: python
      code: |
        import time
        time.sleep(60)
        result = {"never": True}
`, c.attempts, c.retry))
			id, view := shared.run(t, wire.ExecuteRequest{Path: path, Pool: "faults-timeout"})
			e := string(view.Error)
			if view.Status != "FAILED" || !(strings.Contains(e, "deadline") || strings.Contains(e, "timed out") || strings.Contains(e, "timeout")) {
				t.Fatalf("status %v error %q", view.Status, e)
			}
			if a := step(view, "start").Attempts; a != c.attempts {
				t.Fatalf("attempts %v, want %d", a, c.attempts)
			}
			for _, ev := range shared.events(t, id) {
				if ev.EventType == "command.failed" {
					if meta := ev.Meta; meta["class"] != "timeout" {
						t.Fatalf("command.failed class %v, want timeout", meta["class"])
					}
				}
			}
		})
	}
}

// TestPythonException: a python exception fails the step with the exception's
// last line.
func TestPythonException(t *testing.T) {
	t.Parallel()
	shared.startWorkers(t, "faults-exception", 1)
	path := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: raises, path: e2e/raises}
workflow:
  - step: start
    tool:
      kind: python
      code: |
        def helper():
            raise ValueError("the input was not a number")
        helper()
    next: never
  - step: never
    tool: {kind: noop}
`)
	id, view := shared.run(t, wire.ExecuteRequest{Path: path, Pool: "faults-exception"})
	if view.Status != "FAILED" || view.Error != "ValueError: the input was not a number" {
		t.Fatalf("status %v error %q", view.Status, view.Error)
	}
	if step(view, "never").Status != "pending" {
		t.Fatalf("never is %v", step(view, "never").Status)
	}
	shared.verify(t, id)
}

// TestUndecodableCommand: a command whose config the tool cannot decode (made so
// directly in the database) fails with a clear error, and the worker keeps
// running.
func TestUndecodableCommand(t *testing.T) {
	t.Parallel()
	path := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: fine, path: e2e/fine}
workflow:
  - step: start
    tool: {kind: noop, message: hi}
`)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, err := shared.cl.Execute(ctx, wire.ExecuteRequest{Path: path, Pool: "faults-decode"})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := shared.srv.Store.ShardFor(id)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := sh.Pool().Exec(ctx, `UPDATE command SET context = '{"tool_config": "not an object"}'::jsonb WHERE execution_id = $1`, id)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("corrupt the command: %v (%d rows)", err, tag.RowsAffected())
	}
	shared.startWorkers(t, "faults-decode", 1)
	view, err := shared.cl.Wait(ctx, id, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if e := string(view.Error); view.Status != "FAILED" || !strings.Contains(e, "cannot decode the command") || !strings.Contains(e, "tool_config") {
		t.Fatalf("status %v error %q", view.Status, e)
	}
	cmds, err := storetest.ActiveCommands(ctx, sh.Pool(), id)
	if err != nil || len(cmds) != 0 {
		t.Fatalf("active commands left: %v %v", cmds, err)
	}
	// The same worker still runs the next command.
	if _, v := shared.run(t, wire.ExecuteRequest{Path: path, Pool: "faults-decode"}); v.Status != "COMPLETED" {
		t.Fatalf("the worker stopped: %v %v", v.Status, v.Error)
	}
}
