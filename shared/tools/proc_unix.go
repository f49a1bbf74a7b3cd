//go:build unix

package tools

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
)

// setProcAttr starts the child as the leader of a new process group, so one
// signal reaches it and everything it spawned, and as u when given.
func setProcAttr(cmd *exec.Cmd, u *User) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if u != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
}

// RunAs makes cmd start as u (nil: as the worker) in a process group of its
// own: the one rule every tool that runs code follows (runProcess, and the
// duckdb engine's helper process).
func RunAs(cmd *exec.Cmd, u *User) { setProcAttr(cmd, u) }

// LookupUser finds the account tools run as, by name or numeric uid. It
// returns nil when that is the worker's own user (nothing to switch).
func LookupUser(name string) (*User, error) {
	acct, err := user.Lookup(name)
	if _, nerr := strconv.ParseUint(name, 10, 32); err != nil && nerr == nil {
		acct, err = user.LookupId(name)
	}
	if err != nil {
		return nil, fmt.Errorf("tool user %q: %w (name an existing user, or none to run tools as the worker)", name, err)
	}
	uid, err := strconv.ParseUint(acct.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("tool user %q: uid %q: %w", name, acct.Uid, err)
	}
	gid, err := strconv.ParseUint(acct.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("tool user %q: gid %q: %w", name, acct.Gid, err)
	}
	if int(uid) == os.Geteuid() {
		return nil, nil
	}
	u := &User{Name: acct.Username, UID: uint32(uid), GID: uint32(gid), Groups: []uint32{uint32(gid)}}
	if ids, err := acct.GroupIds(); err == nil {
		u.Groups = u.Groups[:0]
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil {
				u.Groups = append(u.Groups, uint32(g))
			}
		}
	}
	return u, nil
}

// killGroup sends SIGKILL to the whole group led by p.
func killGroup(p *os.Process) error {
	if p == nil {
		return nil
	}
	err := syscall.Kill(-p.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	return err
}

func exitSignal(ps *os.ProcessState) string {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}
