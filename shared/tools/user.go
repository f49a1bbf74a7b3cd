package tools

import (
	"context"
	"fmt"
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

// runDir makes a fresh directory for one tool run under the work dir: the
// python side files live there, and with a tool user it is also the run's
// HOME, TMPDIR and default cwd, owned by that user (the worker's own may be
// unreadable to it). remove deletes it.
func (r *Registry) runDir(prefix string) (dir string, remove func(), err error) {
	dir, err = os.MkdirTemp(r.workDir, prefix)
	if err != nil {
		return "", nil, fmt.Errorf("work dir: %w", err)
	}
	remove = func() {
		if err := os.RemoveAll(dir); err != nil {
			r.log.Warn("remove a tool's work dir", "dir", dir, "err", err)
		}
	}
	if err := r.own(dir); err != nil {
		remove()
		return "", nil, err
	}
	return dir, remove, nil
}

// own gives path to the tool user, when there is one.
func (r *Registry) own(path string) error {
	if r.user == nil {
		return nil
	}
	if err := os.Chown(path, int(r.user.UID), int(r.user.GID)); err != nil {
		return fmt.Errorf("give %s to tool user %s: %w", path, r.user.Name, err)
	}
	return nil
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
	dir, remove, err := r.runDir("noetl-check-")
	if err != nil {
		return err
	}
	defer remove()
	res := runProcess(ctx, procSpec{Path: "/bin/sh", Args: []string{"-c", `test -w "$HOME"`}, Dir: dir,
		Env: r.runEnv(dir), User: r.user, MaxOutput: 4096})
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
