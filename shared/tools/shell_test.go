package tools

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/toolresult"
)

func TestShell(t *testing.T) {
	t.Parallel()
	r := New(Options{})
	env := execTool(t, r, map[string]any{"kind": "shell", "command": "echo out; echo err >&2; printf '%s' \"$GREETING\""},
		nil)
	mustSucceed(t, env)
	same(t, "data", env.Data, map[string]any{"exit_code": 0, "stdout": "out\n", "stderr": "err\n"})
	if env.Stdout != "out\n" || env.Stderr != "err\n" || env.ExitCode == nil || *env.ExitCode != 0 {
		t.Fatalf("envelope process fields: %q %q %v", env.Stdout, env.Stderr, env.ExitCode)
	}

	// A non-zero exit is an error naming the code; data stays.
	env = execTool(t, r, map[string]any{"kind": "shell", "command": "echo partial; echo bad thing >&2; exit 3"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "exited with code 3")
	if !strings.Contains(env.Error.Message, "bad thing") {
		t.Fatalf("message %q lacks the last stderr line", env.Error.Message)
	}
	same(t, "data on error", env.Data, map[string]any{"exit_code": 3, "stdout": "partial\n", "stderr": "bad thing\n"})

	// cwd, a list command, another shell.
	dir := t.TempDir()
	env = execTool(t, r, map[string]any{"kind": "shell", "command": []any{"x=1", "pwd"}, "cwd": dir, "shell": "bash"}, nil)
	mustSucceed(t, env)
	got := strings.TrimSpace(dataMap(t, env)["stdout"].(string))
	want, _ := filepath.EvalSymlinks(dir)
	if got != dir && got != want {
		t.Fatalf("pwd = %q, want %q", got, dir)
	}

	env = execTool(t, r, map[string]any{"kind": "shell"}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "command is required")
}

func TestShellEnvIsolation(t *testing.T) {
	t.Setenv("NOETL_SECRET", "s3cr3t")
	r := New(Options{})
	env := execTool(t, r, map[string]any{"kind": "shell", "command": "env | cut -d= -f1 | sort; echo \"secret=$NOETL_SECRET mine=$MINE\"",
		"env": map[string]any{"MINE": "yes", "DROPPED": nil}}, nil)
	mustSucceed(t, env)
	out := dataMap(t, env)["stdout"].(string)
	if !strings.Contains(out, "secret= mine=yes") {
		t.Fatalf("stdout = %q", out)
	}
	// sh itself adds PWD (and some shells SHLVL, _); nothing of the worker's.
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "TMPDIR": true, "MINE": true, "PWD": true, "SHLVL": true, "_": true, "OLDPWD": true}
	for _, line := range strings.Split(out, "\n") {
		if line == "" || strings.HasPrefix(line, "secret=") {
			continue
		}
		if !allowed[line] {
			t.Fatalf("unexpected variable %q in the shell environment:\n%s", line, out)
		}
	}
}

func TestShellTimeoutKillsTheProcessGroup(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	pidFile := filepath.Join(t.TempDir(), "sleep.pid")
	r := New(Options{})
	cmd := "sleep 300 & echo $! > " + pidFile + ".tmp; mv " + pidFile + ".tmp " + pidFile + "; wait"

	env := execTool(t, r, map[string]any{"kind": "shell", "command": cmd, "timeout": 2}, nil)
	mustFail(t, env, toolresult.StatusTimeout, toolresult.KindTimeout, "tool timeout of 2s exceeded")
	waitGone(t, readPid(t, pidFile))

	pidFile2 := filepath.Join(t.TempDir(), "sleep.pid")
	cmd2 := strings.ReplaceAll(cmd, pidFile, pidFile2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	env = execCtx(ctx, r, map[string]any{"kind": "shell", "command": cmd2}, nil)
	mustFail(t, env, toolresult.StatusTimeout, toolresult.KindTimeout, "step deadline exceeded")
	waitGone(t, readPid(t, pidFile2))
}
