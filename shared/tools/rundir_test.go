//go:build linux

package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/toolresult"
)

func uidOf(t *testing.T, path string) uint32 {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Uid
}

// TestRunDirPlantedLinks (security review, root takeover): a process a step
// left behind, running as the tool user, could swap a new run folder's file
// names for links to root's files before the worker wrote them, and the
// worker wrote and chowned the targets. Now the folder is still the worker's
// (0700) while its files are made, and they are made new, never through a
// link: links planted there (here by the test, which can) fail the step and
// leave their targets as they were. Runs as any user; as root it also runs
// as the tool user nobody and checks who owned the folder then.
func TestRunDirPlantedLinks(t *testing.T) {
	work := dirAnyone(t, "noetl-work-")
	var u *User
	python := realPython(t)
	if os.Geteuid() == 0 {
		var err error
		if u, err = LookupUser("nobody"); err != nil || u == nil {
			t.Fatalf("LookupUser(nobody) = %v, %v", u, err)
		}
		python = ResolvePython(context.Background(), "python3", u)
	} else {
		t.Log("not root: the tool user part is skipped")
	}
	victims := t.TempDir()
	harnessVictim, requestVictim := filepath.Join(victims, "passwd"), filepath.Join(victims, "shadow")
	for _, p := range []string{harnessVictim, requestVictim} {
		if err := os.WriteFile(p, []byte("victim\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	type seen struct {
		uid  uint32
		perm os.FileMode
	}
	var atHook []seen
	testHookRunDir = func(path string) {
		if filepath.Dir(path) != work {
			return
		}
		fi, err := os.Lstat(path)
		if err != nil {
			t.Errorf("the run folder: %v", err)
			return
		}
		atHook = append(atHook, seen{fi.Sys().(*syscall.Stat_t).Uid, fi.Mode().Perm()})
		for name, target := range map[string]string{"noetl_harness.py": harnessVictim, "request.json": requestVictim} {
			if err := os.Symlink(target, filepath.Join(path, name)); err != nil {
				t.Errorf("plant %s: %v", name, err)
			}
		}
	}
	t.Cleanup(func() { testHookRunDir = nil })

	r := New(Options{WorkDir: work, User: u, Python: python})
	env := execTool(t, r, py("result = 1"), nil)
	for _, p := range []string{harnessVictim, requestVictim} {
		if b, err := os.ReadFile(p); err != nil || string(b) != "victim\n" {
			t.Errorf("%s was written through a planted link (now %d bytes, %v)", p, len(b), err)
		}
		if got := uidOf(t, p); got != uint32(os.Geteuid()) {
			t.Errorf("%s was given to uid %d through a planted link", p, got)
		}
	}
	if len(atHook) != 1 {
		t.Fatalf("the hook saw %d run folders, want 1", len(atHook))
	}
	if atHook[0].uid != uint32(os.Geteuid()) || atHook[0].perm != 0o700 {
		t.Errorf("while its files were made the run folder was uid %d, mode %o; want the worker's (uid %d), 0700",
			atHook[0].uid, atHook[0].perm, os.Geteuid())
	}
	mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "write noetl_harness.py in the work dir")
	if left, _ := os.ReadDir(work); len(left) != 0 {
		t.Errorf("the failed run left %d entries in the work dir", len(left))
	}

	if u == nil {
		return
	}
	// An unplanted run: the folder and its files are the tool user's.
	testHookRunDir = nil
	env = execTool(t, r, py(`import sys
result = [os.stat(p).st_uid for p in (sys.argv[0], sys.argv[1], os.getcwd())]`), nil)
	mustSucceed(t, env)
	same(t, "owners of the harness, the request and the folder", env.Data, []any{int64(u.UID), int64(u.UID), int64(u.UID)})
}

// replaceResult is python code that, after the harness wrote the result,
// replaces result.json by what how does with its path p.
func replaceResult(how string) string {
	return fmt.Sprintf(`import atexit, os, sys
def swap(p=sys.argv[2]):
    os.remove(p)
    %s
atexit.register(swap)
result = 1`, how)
}

// TestPythonResultFile (security review, root read): the worker reads the
// file a step leaves as its result without following a link (a root-only
// file's content would become the step's result), without waiting on a FIFO
// (the worker slot would be lost past the step's timeout), and up to a
// bounded size (a link to /dev/zero would exhaust its memory). Any user.
func TestPythonResultFile(t *testing.T) {
	r := New(Options{Python: realPython(t)})

	t.Run("a link is not followed", func(t *testing.T) {
		secret := filepath.Join(t.TempDir(), "secret.json")
		if err := os.WriteFile(secret, []byte(`{"ok": true, "data": "leaked-4711"}`), 0o600); err != nil {
			t.Fatal(err)
		}
		env := execTool(t, r, py(replaceResult(fmt.Sprintf("os.symlink(%q, p)", secret))), nil)
		mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "result.json is a symbolic link")
		if all := fmt.Sprint(env.Error, env.Data, env.Stdout, env.Stderr); strings.Contains(all, "leaked-4711") {
			t.Fatalf("the link's target became the result: %s", all)
		}
	})

	t.Run("a FIFO does not block", func(t *testing.T) {
		done := make(chan struct {
			msg    string
			failed bool
		}, 1)
		go func() {
			env := execTool(t, r, py(replaceResult("os.mkfifo(p)")), nil)
			msg := ""
			if env.Error != nil {
				msg = env.Error.Message
			}
			done <- struct {
				msg    string
				failed bool
			}{msg, env.Status == toolresult.StatusError}
		}()
		// Only a guard so a blocked read fails the test instead of hanging it;
		// the run itself takes well under a second.
		select {
		case res := <-done:
			if !res.failed || !strings.Contains(res.msg, "result.json is not a regular file (a FIFO)") {
				t.Fatalf("a FIFO as the result: failed %v, %q", res.failed, res.msg)
			}
		case <-time.After(time.Minute):
			t.Fatal("the worker blocked reading a FIFO left as result.json")
		}
	})

	t.Run("over the limit", func(t *testing.T) {
		small := New(Options{Python: realPython(t)})
		small.maxResult = 100
		env := execTool(t, small, py(`result = "x" * 1000`), nil)
		mustFail(t, env, toolresult.StatusError, toolresult.KindTool, "over the 100-byte result limit (MaxPythonResult)")
		env = execTool(t, small, py(`result = "x" * 10`), nil)
		mustSucceed(t, env)
		same(t, "a result under the limit", env.Data, "xxxxxxxxxx")
	})
}

// TestPythonResultOwner: with a tool user, a result file the tool user does
// not own (one it could only have linked to) is not read. Needs root.
func TestPythonResultOwner(t *testing.T) {
	u := toolUser(t)
	r := New(Options{WorkDir: dirAnyone(t, "noetl-work-"), User: u})
	d, err := r.newRunDir("noetl-python-")
	if err != nil {
		t.Fatal(err)
	}
	defer d.remove()
	if err := os.WriteFile(filepath.Join(d.path, "result.json"), []byte(`{"ok": true, "data": "root's"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := d.readResult("result.json", MaxPythonResult, u)
	if err == nil || !strings.Contains(err.Error(), "owned by uid 0, not the tool user nobody") {
		t.Fatalf("a root-owned result.json: %q, %v", b, err)
	}
}
