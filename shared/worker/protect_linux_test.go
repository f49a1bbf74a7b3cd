package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/noetl-go/noetl/shared/pipeline"
	"github.com/noetl-go/noetl/shared/tools"
)

// protectHelper, when set, makes the test binary a stand-in worker process
// (see TestProtect) instead of running the tests.
const protectHelper = "NOETL_TEST_PROTECT_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(protectHelper); mode != "" {
		os.Exit(standInWorker(mode))
	}
	os.Exit(m.Run())
}

// standInWorker runs, as a worker would, a shell step that reads its
// parent's /proc/<pid>/environ, and a child that inherits its environment;
// mode "protect" calls Protect first. It prints what both saw as JSON.
func standInWorker(mode string) int {
	if mode == "protect" {
		if err := Protect(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	env := tools.New(tools.Options{}).Exec(context.Background(), pipeline.Item{Kind: "shell",
		Config: map[string]any{"command": "cat /proc/$PPID/environ"}})
	inherited, err := exec.Command("/bin/sh", "-c", `printf %s "$NOETL_WORKER_TOKEN"`).Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"tool": env.Data, "inherited": string(inherited)})
	return 0
}

// TestProtect: once a worker has called Protect, a step running as the
// worker's own user cannot read the worker's tokens and credentials from
// /proc/<worker>/environ (which still shows the environment the worker
// started with), and a child inheriting the environment gets none of them.
// Without Protect the same step reads them: the control that shows the test
// can see a leak. Under root the stand-in runs as nobody, since root reads
// any process's environ whatever it is marked.
func TestProtect(t *testing.T) {
	bin := standInBinary(t)
	run := func(mode string) (tool map[string]any, inherited string) {
		t.Helper()
		cmd := exec.Command(bin)
		cmd.Dir = filepath.Dir(bin)
		cmd.Env = []string{protectHelper + "=" + mode, "PATH=" + os.Getenv("PATH"),
			"NOETL_WORKER_TOKEN=tok-protect-test-1", `NOETL_CREDENTIAL_DB={"password": "pw-protect-test-2"}`}
		if os.Geteuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("stand-in worker (%s): %v\n%s", mode, err, out)
		}
		var got struct {
			Tool      map[string]any
			Inherited string
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("stand-in output: %v\n%s", err, out)
		}
		return got.Tool, got.Inherited
	}

	tool, inherited := run("plain")
	if s, _ := tool["stdout"].(string); !strings.Contains(s, "tok-protect-test-1") || !strings.Contains(s, "pw-protect-test-2") {
		t.Fatalf("control: an unprotected worker's environ should be readable by its step, got %v", tool)
	}
	if inherited != "tok-protect-test-1" {
		t.Fatalf("control: a child should inherit the token, got %q", inherited)
	}

	tool, inherited = run("protect")
	stdout, _ := tool["stdout"].(string)
	stderr, _ := tool["stderr"].(string)
	if strings.Contains(stdout, "protect-test") || !strings.Contains(stderr, "Permission denied") {
		t.Fatalf("protected: the step read the worker's environ: %v", tool)
	}
	if inherited != "" {
		t.Fatalf("protected: a child inherited %q", inherited)
	}
}

// standInBinary is a copy of the test binary that nobody can run too.
func standInBinary(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin := filepath.Join(dir, "stand-in-worker")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}
