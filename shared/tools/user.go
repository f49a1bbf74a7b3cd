package tools

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// User is an account tool subprocesses run as instead of the worker's own
// (Options.User). A worker that runs as root and starts python or shell as
// root hands them everything root can read: the worker's /proc entries (its
// tokens and every NOETL_CREDENTIAL_* in the environment it started with)
// and a root-only credentials file. Run as User, they read neither.
type User struct {
	Name     string
	UID, GID uint32
	// Groups are the supplementary groups; the worker's own are dropped.
	Groups []uint32
}

func (u *User) String() string { return fmt.Sprintf("%s (uid %d)", u.Name, u.UID) }

// DefaultToolUser is the tool user a worker takes when none is configured:
// "nobody" when it runs as root, else "" (the worker's own user: only root
// can switch users).
func DefaultToolUser() string {
	if os.Geteuid() == 0 {
		return "nobody"
	}
	return ""
}

// runDir is a fresh directory for one tool run under the work dir: the
// python side files live there, and with a tool user it is also the run's
// HOME, TMPDIR and default cwd, owned by that user (the worker's own may be
// unreadable to it).
//
// The worker may run as root, and a step may leave a process behind, running
// as the tool user, that waits for the next run's folder to swap its files
// for links to root's. So the worker never writes, chowns or opens by name a
// path that user can change: the folder is made root's (0700) and kept open;
// its files are made through that handle while it is still root's (created
// new, never through a link) and given away through their own handles; the
// folder is given to the tool user last; and after that the worker only
// reads through the handle (readResult).
type runDir struct {
	path string
	dir  *os.File
	log  *slog.Logger
}

// runFile is a file a run's folder starts with.
type runFile struct {
	name string
	data []byte
}

// testHookRunDir, when set, is called with a new run folder's path before
// its files are made (tests plant what a leftover process could).
var testHookRunDir func(path string)

// newRunDir makes a run's folder with files in it (see runDir). Remove it
// when the run ends.
func (r *Registry) newRunDir(prefix string, files ...runFile) (*runDir, error) {
	path, err := os.MkdirTemp(r.workDir, prefix) // 0700, the worker's
	if err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	d := &runDir{path: path, log: r.log}
	if d.dir, err = openDir(path); err != nil {
		d.remove()
		return nil, fmt.Errorf("work dir %s: %w", path, err)
	}
	if testHookRunDir != nil {
		testHookRunDir(path)
	}
	for _, f := range files {
		if err := createIn(d.dir, f.name, f.data, r.user); err != nil {
			d.remove()
			return nil, fmt.Errorf("write %s in the work dir %s: %w", f.name, path, err)
		}
	}
	if r.user != nil {
		if err := d.dir.Chown(int(r.user.UID), int(r.user.GID)); err != nil {
			d.remove()
			return nil, fmt.Errorf("give %s to tool user %s: %w", path, r.user.Name, err)
		}
	}
	return d, nil
}

// remove deletes the folder and what the run left in it (os.RemoveAll does
// not follow links).
func (d *runDir) remove() {
	if d.dir != nil {
		_ = d.dir.Close()
	}
	if err := os.RemoveAll(d.path); err != nil {
		d.log.Warn("remove a tool's work dir", "dir", d.path, "err", err)
	}
}

// readAtMost reads f, the run's file name, to its end, failing when it has
// more than max bytes.
func readAtMost(f io.Reader, name string, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is over the %d-byte result limit (MaxPythonResult): return less, or write large data elsewhere", name, max)
	}
	return b, nil
}

// runEnv is a subprocess's environment before the step's own env (R-P3):
// with a tool user, HOME and TMPDIR are the run's directory, since the
// worker's may not be writable by that user.
func (r *Registry) runEnv(dir string) []string {
	if r.user == nil {
		return baseEnv()
	}
	return mergeEnv(baseEnv(), []string{"HOME=" + dir, "TMPDIR=" + dir})
}

// userNote explains a subprocess that could not start under a tool user.
func (r *Registry) userNote() string {
	if r.user == nil {
		return ""
	}
	return fmt.Sprintf(" (tools run as %s: the program and the cwd must be ones that user can use)", r.user.Name)
}

// CheckUser verifies that tools can run as the configured tool user: a
// directory made under the work dir is usable by it and sh starts there. A
// worker calls it at start, so a tool user it cannot switch to (the worker is
// not root) or a work dir the user cannot reach fails the start, not every
// step. Without a tool user it does nothing.
func (r *Registry) CheckUser(ctx context.Context) error {
	if r.user == nil {
		return nil
	}
	d, err := r.newRunDir("noetl-check-")
	if err != nil {
		return err
	}
	defer d.remove()
	res := runProcess(ctx, procSpec{Path: "/bin/sh", Args: []string{"-c", `test -w "$HOME"`}, Dir: d.path,
		Env: r.runEnv(d.path), User: r.user, MaxOutput: 4096})
	switch {
	case res.Err != nil:
		return fmt.Errorf("tools cannot run as %s in %s: %w", r.user, r.workDir, res.Err)
	case res.ExitCode != 0:
		return fmt.Errorf("tool user %s cannot write its work dir under %s (exit %d%s)", r.user, r.workDir, res.ExitCode, stderrNote(res.Stderr))
	}
	return nil
}

func stderrNote(s string) string {
	if l := lastLine(s); l != "" {
		return ": " + l
	}
	return ""
}
