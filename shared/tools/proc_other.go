//go:build !unix

package tools

import (
	"os"
	"os/exec"
)

// Without process groups only the child itself can be killed.
func setProcessGroup(*exec.Cmd) {}

func killGroup(p *os.Process) error {
	if p == nil {
		return nil
	}
	return p.Kill()
}

func exitSignal(*os.ProcessState) string { return "" }
