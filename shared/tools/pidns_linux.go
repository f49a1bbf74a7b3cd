//go:build linux

package tools

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// withOwnPIDs gives cmd a pid namespace of its own, cmd its first process:
// when cmd exits the kernel kills every process left in the namespace, so
// nothing a run starts outlives it, not even what left its process group
// (setsid, a double fork). cmd's SysProcAttr must be set (setProcAttr).
func withOwnPIDs(cmd *exec.Cmd) { cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID }

// probeOwnPIDs starts /bin/true in a pid namespace of its own: nil when this
// worker may make them (root, on a kernel and in a sandbox that allow it).
// again says the failure may pass (the system was short of processes or
// memory, or a signal interrupted it): probe again later rather than run without for good.
func probeOwnPIDs() (again bool, err error) {
	if os.Geteuid() != 0 {
		return false, errors.New("only root may make pid namespaces (the worker does not run as root)")
	}
	cmd := exec.Command("/bin/true")
	setProcAttr(cmd, nil)
	withOwnPIDs(cmd)
	err = cmd.Run()
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.EINTR), err
}
