package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/client"
	"github.com/noetl-go/noetl/shared/wire"
)

// TestServeAndWorkerLargeResults: `noetl serve` and `noetl worker` as a
// user starts them, with default flags (the worker told only where the
// server and its NATS are, as serve prints), run a playbook whose steps
// return 100 KiB and 2 MB, over the worker's 64 KiB inline limit, and a
// next step that reads both (one through a template, one through its
// code's context): the worker, with no result store of its own, hands them
// to the server, and the run completes. Given a database, serve keeps them
// in the user's data directory (resultstore.DefaultDir), where they land;
// with its throwaway one, in a temporary directory.
func TestServeAndWorkerLargeResults(t *testing.T) {
	bin := buildNoetl(t)
	t.Run("throwaway database", func(t *testing.T) {
		serveAndWork(t, bin, nil, "")
	})
	t.Run("given a database", func(t *testing.T) {
		// The e2e stack's databases, as a second server instance uses
		// them; its own pool, so the stack's drain announcing the run's
		// commands on its NATS reaches no worker of this test's.
		home := serveAndWork(t, bin, []string{"--database-url", shared.srv.ClusterDSN, "--shard-urls", strings.Join(shared.srv.ShardDSNs, ",")}, "serve-given-db")
		staged, _ := filepath.Glob(filepath.Join(home, ".local", "share", "noetl", "results", "noetl", "*", "*.json"))
		if len(staged) != 2 {
			t.Fatalf("%d results staged under the data directory (%v), want the 2 large ones", len(staged), staged)
		}
	})
}

// serveAndWork runs the test's stack and playbook (see above) with serve's
// extra arguments and the run's pool ("": the default), and returns the
// user's home.
func serveAndWork(t *testing.T, bin string, serveArgs []string, pool string) (home string) {
	home = t.TempDir()
	// The user's environment, none of noetl's settings.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + os.TempDir()}

	var serveLog lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	serve := exec.CommandContext(ctx, bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, serveArgs...)...) // a free port
	serve.Env = env
	serve.Cancel = func() error { return serve.Process.Signal(os.Interrupt) }
	serve.WaitDelay = 30 * time.Second
	serve.Stdout, serve.Stderr = &serveLog, &serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = serve.Wait() })
	listening := regexp.MustCompile(`listening on (\S+)`)
	var m []string
	for deadline := time.Now().Add(2 * time.Minute); m == nil; time.Sleep(50 * time.Millisecond) {
		if m = listening.FindStringSubmatch(serveLog.String()); m == nil && time.Now().After(deadline) {
			t.Fatalf("noetl serve did not come up:\n%s", serveLog.String())
		}
	}
	url := m[1]
	// What serve prints for its workers.
	nats := regexp.MustCompile(`noetl worker --nats ([^\s)]+)`).FindStringSubmatch(serveLog.String())
	if nats == nil {
		t.Fatalf("noetl serve did not print its NATS:\n%s", serveLog.String())
	}
	natsURL := nats[1]

	var workerLog lockedBuffer
	workerArgs := []string{"worker", "--server", url, "--nats", natsURL}
	if pool != "" {
		workerArgs = append(workerArgs, "--pool", pool)
	}
	w := exec.Command(bin, workerArgs...)
	w.Env = env
	w.Stdout, w.Stderr = &workerLog, &workerLog
	w.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard
	defer wcancel()
	exited := make(chan struct{})
	go func() { _ = w.Wait(); close(exited); wcancel() }() // a worker that exits ends the wait
	t.Cleanup(func() { _ = syscall.Kill(-w.Process.Pid, syscall.SIGKILL); <-exited })

	cl := client.New(url, "")
	if _, err := cl.Register(wctx, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: large_results, path: e2e/large_results}
workflow:
  - step: start
    tool: {kind: python, code: "result = {'blob': 'a' * 102400}"}
    next: big
  - step: big
    tool: {kind: python, code: "result = 'b' * 2000000"}
    next: read
  - step: read
    tool:
      kind: python
      input: {blob: "{{ start.blob }}"}
      code: "result = {'start': len(blob), 'big': len(context['big'])}"
`); err != nil {
		t.Fatal(err)
	}
	id, err := cl.Execute(wctx, wire.ExecuteRequest{Path: "e2e/large_results", Pool: pool})
	if err != nil {
		t.Fatal(err)
	}
	view, err := cl.WaitSummary(wctx, id, 100*time.Millisecond)
	if err != nil {
		t.Fatalf("%v\nworker log:\n%s\nserver log:\n%s", err, workerLog.String(), serveLog.String())
	}
	if view.Status != "COMPLETED" {
		t.Fatalf("status %s error %s, want COMPLETED\nworker log:\n%s", view.Status, view.Error, workerLog.String())
	}
	evs, _, err := cl.Events(wctx, id, 0, 500)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := exitOf(evs, "read"); !reflect.DeepEqual(got, map[string]any{"start": int64(102400), "big": int64(2000000)}) {
		t.Fatalf("read saw %v, want both results whole", got)
	}
	for _, e := range evs {
		if e.EventType == "command.completed" && (e.NodeName == "start" || e.NodeName == "big") {
			ref, _ := e.Result["reference"].(map[string]any)
			if uri, _ := ref["logical_uri"].(string); !strings.HasPrefix(uri, "noetl://execution/") {
				t.Errorf("%s's result went as %v, want by reference, staged with the server", e.NodeName, e.Result)
			}
		}
	}
	return home
}
