package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// procSpec is one subprocess run.
type procSpec struct {
	Path string
	Args []string
	Dir  string
	Env  []string
	// KillGroupOnExit also kills what is left of the process group after the leader
	// exits (python: a harness has no business leaving background processes behind).
	KillGroupOnExit bool
	// OwnPIDs runs it in a pid namespace of its own, so a process that left
	// the group (setsid, a double fork) ends with the leader too
	// (withOwnPIDs; Registry.ownPIDs says whether this worker can).
	OwnPIDs   bool
	MaxOutput int
	// User runs it as another account (nil: the worker's).
	User *User
}

// procResult is what happened to it.
type procResult struct {
	ExitCode int // -1 when killed by a signal or never started
	Stdout   string
	Stderr   string
	Signal   string // the signal that ended it, when one did
	Stopped  bool   // ctx ended first; the process group was killed
	Err      error  // could not start, or waiting failed for another reason than the exit status
}

// pipeGrace bounds how long we wait for output pipes held open by orphaned
// grandchildren after the leader exits or is killed.
const pipeGrace = 2 * time.Second

// runProcess runs a command in its own process group with bounded output capture. When
// ctx ends, the whole group gets SIGKILL (grandchildren included) and Stopped is set.
func runProcess(ctx context.Context, spec procSpec) procResult {
	cmd := exec.CommandContext(ctx, spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would inherit the worker's environment
	}
	stdout := &boundedBuffer{max: spec.MaxOutput}
	stderr := &boundedBuffer{max: spec.MaxOutput}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	setProcAttr(cmd, spec.User)
	if spec.OwnPIDs {
		withOwnPIDs(cmd)
	}
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	cmd.WaitDelay = pipeGrace

	err := cmd.Run()
	if spec.KillGroupOnExit && cmd.Process != nil {
		_ = killGroup(cmd.Process) // ESRCH when nothing is left: expected
	}
	res := procResult{ExitCode: -1, Stdout: stdout.String(), Stderr: stderr.String()}
	if cmd.ProcessState != nil {
		res.ExitCode = cmd.ProcessState.ExitCode()
		res.Signal = exitSignal(cmd.ProcessState)
	}
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		res.Stopped = true
	case errors.As(err, &exitErr):
		// a non-zero exit: reported through ExitCode
	case errors.Is(err, exec.ErrWaitDelay):
		// the process succeeded but a background child kept the pipes open; its
		// output after that point is lost, the result stands
		res.Stderr += "\n[noetl: output pipes still open " + pipeGrace.String() + " after exit; closed]"
	case cmd.ProcessState == nil:
		res.Err = fmt.Errorf("start %s: %w", spec.Path, err)
	default:
		res.Err = fmt.Errorf("wait for %s: %w", spec.Path, err)
	}
	return res
}

// baseEnv is the environment every subprocess starts from (R-P3): the worker's PATH,
// HOME, LANG and TMPDIR when set, nothing else (no worker secrets).
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// mergeEnv appends extra over base: a later NAME replaces an earlier one, so the
// child sees exactly one value per name.
func mergeEnv(base, extra []string) []string {
	out := make([]string, 0, len(base)+len(extra))
	idx := map[string]int{}
	for _, kv := range append(append([]string{}, base...), extra...) {
		name, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[name]; ok {
			out[i] = kv
			continue
		}
		idx[name] = len(out)
		out = append(out, kv)
	}
	return out
}

// boundedBuffer keeps the first max bytes written and counts the rest. Write never
// fails: a failing writer would stop the copy and block the child on a full pipe.
type boundedBuffer struct {
	max     int
	buf     []byte
	dropped int64
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	room := b.max - len(b.buf)
	if room > 0 {
		n := min(room, len(p))
		b.buf = append(b.buf, p[:n]...)
		b.dropped += int64(len(p) - n)
	} else {
		b.dropped += int64(len(p))
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	if b.dropped == 0 {
		return string(b.buf)
	}
	return fmt.Sprintf("%s\n[noetl: output truncated, %d more bytes dropped]", b.buf, b.dropped)
}

// lastLine is the last non-blank line of s (the exception line of a traceback).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, " \t\r\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	return ""
}
