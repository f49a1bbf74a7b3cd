package devstack

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	pgDirPrefix   = "noetl-pg-"
	natsDirPrefix = "noetl-nats-"
	ownerFile     = "owner.pid" // pid of the process that made the temp dir
)

// makeOwnedDir creates a temp dir under base that records its owner's pid, so a later
// start can tell it was abandoned (reapStale), and hands it to cred's user.
func makeOwnedDir(base, prefix string, cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp(base, prefix)
	if err != nil {
		return "", fmt.Errorf("devstack: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return "", errors.Join(fmt.Errorf("devstack: %w", err), os.RemoveAll(dir))
	}
	if err := chown(dir, cred); err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	return dir, nil
}

// reapStale removes devstack temp dirs in base whose owner process is gone (it was
// killed before it could clean up), first killing a postmaster that still serves one
// (the parent-death signal normally stops it; this covers the rare miss).
func reapStale(base string, log *slog.Logger) {
	for _, prefix := range []string{pgDirPrefix, natsDirPrefix, initdbTmpPrefix} {
		dirs, _ := filepath.Glob(filepath.Join(base, prefix+"*"))
		for _, dir := range dirs {
			owner, ok := readPID(filepath.Join(dir, ownerFile))
			if !ok || alive(owner) {
				continue // not ours, or still in use
			}
			// The marker is written right after the dir is made; a dir this young
			// without a live owner may be another process mid-start on a reused pid.
			if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < time.Second {
				continue
			}
			if pid, ok := readPID(filepath.Join(dir, "data", "postmaster.pid")); ok && alive(pid) && servesDir(pid, dir) {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				waitGone(pid, 5*time.Second)
			}
			if err := os.RemoveAll(dir); err != nil {
				log.Warn("devstack: could not remove an abandoned temp dir", "dir", dir, "err", err)
				continue
			}
			log.Info("devstack: removed an abandoned temp dir", "dir", dir, "owner_pid", owner)
		}
	}
}

// readPID reads the first line of a pid file (postmaster.pid has more lines).
func readPID(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil && pid > 0
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// servesDir guards against pid reuse: the process's command line must name our dir.
func servesDir(pid int, dir string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && bytes.Contains(cmdline, []byte(dir))
}

func waitGone(pid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}
