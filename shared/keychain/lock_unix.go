//go:build unix

package keychain

import (
	"os"
	"syscall"
)

// lockExclusive takes f's exclusive flock, waiting for another holder.
func lockExclusive(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}
