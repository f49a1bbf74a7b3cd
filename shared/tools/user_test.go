//go:build linux

package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/toolresult"
)

// toolUser is nobody, for tests that switch users; they need root (CI runs
// as root: there a test that cannot run fails).
func toolUser(t *testing.T) *User {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("running tools as another user needs root, and CI is set: run the tests as root")
		}
		t.Skip("running tools as another user needs root")
	}
	u, err := LookupUser("nobody")
	if err != nil || u == nil {
		t.Fatalf("LookupUser(nobody) = %v, %v", u, err)
	}
	return u
}

// TestToolUser: with a tool user, python and shell run as that user in a
// directory of their own (cwd, HOME and TMPDIR, writable), and cannot read
// what only the worker's user can: a root-only credentials file, or the
// worker's /proc/<pid>/environ with its tokens.
func TestToolUser(t *testing.T) {
	u := toolUser(t)
	t.Setenv("NOETL_WORKER_TOKEN", "tok-in-the-worker-env")
	secret := filepath.Join(t.TempDir(), "credentials.json")
	if err := os.WriteFile(secret, []byte(`{"db": {"password": "root-only-pw"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	python := ResolvePython(context.Background(), "python3", u)
	if !filepath.IsAbs(python) {
		t.Fatalf("no python the tool user can run: %q", python)
	}
	r := New(Options{User: u, Python: python})
	if err := r.CheckUser(context.Background()); err != nil {
		t.Fatal(err)
	}

	env := execTool(t, r, map[string]any{"kind": "python", "code": `
import os
open(os.path.join(os.environ["HOME"], "h"), "w").write("x")
open(os.path.join(os.environ["TMPDIR"], "t"), "w").write("x")
def read(p):
    try:
        return open(p, "rb").read().decode(errors="replace")
    except OSError as e:
        return type(e).__name__
result = {"uid": os.getuid(), "same": os.environ["HOME"] == os.environ["TMPDIR"] == os.getcwd(),
          "file": read(path), "environ": read("/proc/%d/environ" % worker)}
`}, map[string]any{"path": secret, "worker": os.Getpid()})
	mustSucceed(t, env)
	same(t, "python as the tool user", env.Data, map[string]any{"uid": int64(u.UID), "same": true,
		"file": "PermissionError", "environ": "PermissionError"})

	env = execTool(t, r, map[string]any{"kind": "shell",
		"command": `id -u; touch "$HOME/h" "$TMPDIR/t" ./c && echo wrote; cat ` + secret + ` /proc/$PPID/environ 2>&1; true`}, nil)
	mustSucceed(t, env)
	out := dataMap(t, env)["stdout"].(string)
	if !strings.HasPrefix(out, "65534\nwrote\n") || strings.Count(out, "Permission denied") != 2 ||
		strings.Contains(out, "root-only-pw") || strings.Contains(out, "tok-in-the-worker-env") {
		t.Fatalf("shell as the tool user:\n%s", out)
	}

	// A cwd closed to the tool user: the error says who the step ran as.
	env = execTool(t, r, map[string]any{"kind": "shell", "command": "pwd", "cwd": t.TempDir()}, nil)
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "tools run as nobody")
}

// TestCheckUser: a work dir the tool user cannot reach fails the check with
// a message naming the user; a tool user equal to the worker's is none.
func TestCheckUser(t *testing.T) {
	u := toolUser(t)
	closed := t.TempDir() // 0700, root's
	err := New(Options{User: u, WorkDir: closed}).CheckUser(context.Background())
	if err == nil || !strings.Contains(err.Error(), "nobody") {
		t.Fatalf("CheckUser in a closed dir = %v", err)
	}
	if me, err := LookupUser("0"); me != nil || err != nil {
		t.Fatalf("LookupUser(own uid) = %v, %v; want nil: nothing to switch", me, err)
	}
	if _, err := LookupUser("no-such-user-here"); err == nil || !strings.Contains(err.Error(), "no-such-user-here") {
		t.Fatalf("unknown user: %v", err)
	}
}

// dirAnyone is a fresh folder anyone may enter (0755; t.TempDir's parent is
// the test user's alone), removed after the test.
func dirAnyone(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rootOnlyFile writes content to a file only root may read (0600) in a
// folder anyone may enter (0755), so only the file's own mode stops the tool
// user; it returns the file and the folder.
func rootOnlyFile(t *testing.T, name, content string) (file, dir string) {
	t.Helper()
	dir = dirAnyone(t, "noetl-root-only-")
	file = filepath.Join(dir, name)
	if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, dir
}

// TestScriptAsToolUser (issue 33, finding 2): a step's script file is read
// with the tool user's rights, so a root-only file is refused (and its
// content appears nowhere in the step's answer) while a file the tool user
// may read runs.
func TestScriptAsToolUser(t *testing.T) {
	u := toolUser(t)
	python := ResolvePython(context.Background(), "python3", u)
	r := New(Options{User: u, Python: python})
	secret, dir := rootOnlyFile(t, "secret.py", "root-only-script-content-4711 = 1\nresult = 'root-only-result-4711'\n")
	for _, script := range []any{secret, map[string]any{"uri": secret, "source": "file"}} {
		env := execTool(t, r, map[string]any{"kind": "python", "script": script}, nil)
		mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "Permission denied")
		if !strings.Contains(env.Error.Message, "read as the tool user nobody") {
			t.Errorf("the error does not say who read it: %q", env.Error.Message)
		}
		if all := fmt.Sprint(env.Error, env.Data, env.Stdout, env.Stderr); strings.Contains(all, "-4711") {
			t.Fatalf("the root-only script leaked: %s", all)
		}
	}
	public := filepath.Join(dir, "public.py")
	if err := os.WriteFile(public, []byte("result = {'uid': os.getuid()}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := execTool(t, r, map[string]any{"kind": "python", "script": public}, nil)
	mustSucceed(t, env)
	same(t, "a script the tool user may read", env.Data, map[string]any{"uid": int64(u.UID)})
}
