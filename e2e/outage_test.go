package e2e

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/wire"
)

// lateProxy is a TCP address that refuses connections until Open, then
// forwards them to target: a dependency that is not up yet.
type lateProxy struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
}

// newLateProxy reserves a free address for target.
func newLateProxy(t *testing.T, target string) *lateProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lateProxy{addr: ln.Addr().String(), target: target}
	ln.Close()
	t.Cleanup(func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.ln != nil {
			p.ln.Close()
		}
	})
	return p
}

// Open starts accepting on the reserved address.
func (p *lateProxy) Open(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("reopen %s: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

// logLines passes a process's log to the test log and lets the test wait for
// a line.
type logLines struct {
	mu    sync.Mutex
	lines []string
	more  chan struct{}
}

func watchLog(t *testing.T, r io.Reader) *logLines {
	l := &logLines{more: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			t.Log(sc.Text())
			l.mu.Lock()
			l.lines = append(l.lines, sc.Text())
			close(l.more)
			l.more = make(chan struct{})
			l.mu.Unlock()
		}
	}()
	return l
}

// wait returns the first line holding msg; false when ctx ends first.
func (l *logLines) wait(ctx context.Context, msg string) (string, bool) {
	for {
		l.mu.Lock()
		for _, line := range l.lines {
			if strings.Contains(line, msg) {
				l.mu.Unlock()
				return line, true
			}
		}
		more := l.more
		l.mu.Unlock()
		select {
		case <-ctx.Done():
			return "", false
		case <-more:
		}
	}
}

// TestWorkerWaitsOutOutages: issue 10's outage defect. `noetl worker` started
// while NATS is unreachable keeps running and says it retries (it exited at
// once, rc 1, before); once NATS is up it takes the pool's work. With the API
// unreachable it keeps the claimed command, says it retries, and completes the
// playbook once the API is back; each outage's end is said too (issue 23).
func TestWorkerWaitsOutOutages(t *testing.T) {
	t.Parallel()
	natsURL, err := url.Parse(shared.srv.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	natsProxy := newLateProxy(t, natsURL.Host)
	apiProxy := newLateProxy(t, strings.TrimPrefix(shared.srv.URL, "http://"))
	path := registerYAML(t, `apiVersion: noetl.io/v2
kind: Playbook
metadata: {name: outage, path: e2e/outage}
workflow:
  - step: start
    tool: {kind: shell, command: "printf survived"}
`)
	bin := buildNoetl(t)
	worker := exec.Command(bin, "worker", "--server", "http://"+apiProxy.addr, "--nats", "nats://"+natsProxy.addr,
		"--pool", "e2e-outage", "--id", "outage-worker", "--concurrency", "1", "--tool-user=")
	worker.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	worker.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "NOETL_WORKER_TOKEN=", "NOETL_API_TOKEN=")
	stderr, err := worker.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := watchLog(t, stderr)
	if err := worker.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = worker.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-worker.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-worker.Process.Pid, syscall.SIGKILL)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // a hang guard
	defer cancel()
	// waitLog waits for a line while the worker runs; its exit fails the test.
	waitLog := func(msg string) {
		t.Helper()
		lineCtx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			select {
			case <-exited:
				stop()
			case <-lineCtx.Done():
			}
		}()
		if _, ok := logs.wait(lineCtx, msg); !ok {
			select {
			case <-exited:
				t.Fatalf("the worker exited (%v) instead of logging %q", exitErr, msg)
			default:
				t.Fatalf("the worker never logged %q", msg)
			}
		}
	}

	// NATS down: the worker stays up and retries the pool's consumer.
	waitLog("NATS is not reachable yet; retrying")
	waitLog("NATS is unavailable; retrying with backoff")
	natsProxy.Open(t)
	waitLog("connected to NATS")
	waitLog("NATS is available again")
	waitLog("worker started")

	// API down: the claim cannot be reported; the worker retries.
	id, err := shared.cl.Execute(ctx, wire.ExecuteRequest{Path: path, Pool: "e2e-outage"})
	if err != nil {
		t.Fatal(err)
	}
	waitLog("the server is unavailable; retrying with backoff")
	apiProxy.Open(t)
	view, err := shared.cl.Wait(ctx, id, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if s := step(view, "start"); view.Status != "COMPLETED" || s.Attempts != 1 {
		t.Fatalf("status %v, start %v", view.Status, s)
	}
	waitLog("the server is available again")
	select {
	case <-exited:
		t.Fatalf("the worker exited: %v", exitErr)
	default:
	}
}
