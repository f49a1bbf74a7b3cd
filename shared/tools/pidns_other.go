//go:build !linux

package tools

import (
	"errors"
	"os/exec"
)

// withOwnPIDs: pid namespaces are Linux's; a run's processes end with its
// process group only.
func withOwnPIDs(*exec.Cmd) {}

func probeOwnPIDs() (again bool, err error) { return false, errors.New("pid namespaces need Linux") }
