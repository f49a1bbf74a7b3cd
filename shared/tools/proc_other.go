//go:build !unix

package tools

import (
	"errors"
	"os"
	"os/exec"
)

// Without process groups only the child itself can be killed; without
// credentials it runs as the worker.
func setProcAttr(*exec.Cmd, *User) {}

// RunAs: switching users needs unix; cmd runs as the worker.
func RunAs(cmd *exec.Cmd, u *User) { setProcAttr(cmd, u) }

// LookupUser: switching users needs unix.
func LookupUser(name string) (*User, error) {
	return nil, errors.New("tool user " + name + ": running tools as another user needs a unix system")
}

func killGroup(p *os.Process) error {
	if p == nil {
		return nil
	}
	return p.Kill()
}

func exitSignal(*os.ProcessState) string { return "" }
