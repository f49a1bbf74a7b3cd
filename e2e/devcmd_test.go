package e2e

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/client"
)

// devStack is `noetl dev` run as a user runs it: the binary, on a free port,
// with the throwaway parts, stopped with Ctrl-C when the test ends.
type devStack struct {
	url, nats string
	cl        *client.Client
	cmd       *exec.Cmd
	mu        sync.Mutex
	log       strings.Builder // what it printed
}

// devOptions adjusts a devStack.
type devOptions struct {
	workers  int               // in-process workers; 0: another worker runs the steps
	examples map[string]string // playbooks registered at start (--examples), by file name
	env      []string          // more environment (NOETL_CORS_ORIGINS=…)
}

func startDev(t *testing.T, o devOptions) *devStack {
	t.Helper()
	bin := buildNoetl(t)
	dir := t.TempDir()
	for name, src := range o.examples {
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "dev", "--workers", strconv.Itoa(o.workers), "--demo=false", "--listen", "127.0.0.1:0",
		"--examples", dir, "--drain-every", "500ms")
	cmd.Env = append(append(cmd.Environ(), "NOETL_DATABASE_URL=", "NOETL_SHARD_URLS=", "NOETL_NATS_URL=", "NOETL_API_TOKEN=",
		"NOETL_WORKER_TOKEN=", "NOETL_INTERNAL_TOKEN=", "NOETL_INTERNAL_API_TOKEN=", "NOETL_LISTEN=", "NOETL_CORS_ORIGINS="), o.env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	d := &devStack{cmd: cmd}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			d.mu.Lock()
			d.log.WriteString(line + "\n")
			if m := regexp.MustCompile(`NATS at (\S+)`).FindStringSubmatch(line); m != nil {
				d.nats = m[1]
			}
			if m := regexp.MustCompile(`API on (\S+) with \d+ workers`).FindStringSubmatch(line); m != nil {
				d.url = m[1]
			}
			d.mu.Unlock()
			if strings.Contains(line, "running; press") {
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case <-ready:
	case <-time.After(2 * time.Minute):
		t.Fatalf("noetl dev did not come up:\n%s", d.printed())
	}
	d.mu.Lock()
	d.cl = client.New(d.url, "")
	d.mu.Unlock()
	return d
}

// printed is what noetl dev printed so far.
func (d *devStack) printed() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.log.String()
}
