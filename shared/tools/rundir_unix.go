//go:build unix

package tools

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openDir opens a run's folder (not through a link) for making and reading
// its files by handle.
func openDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
}

// createIn makes name in dir, new (an existing name, a link included, is an
// error), writes data and gives it to u through its own handle.
func createIn(dir *os.File, name string, data []byte, u *User) error {
	fd, err := unix.Openat(int(dir.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir.Name(), name))
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if u != nil {
		if err := f.Chown(int(u.UID), int(u.GID)); err != nil {
			return fmt.Errorf("give it to tool user %s: %w", u.Name, err)
		}
	}
	return f.Close()
}

// readResult reads the file name the run left in its folder, at most max
// bytes. The step controls that folder, so the file is opened through the
// folder's handle, never through a link (a link to a root-only file would
// hand its content to the step), without waiting (a FIFO would block the
// worker past the step's timeout), and read only when it is a regular file,
// owned by the tool user when there is one, of at most max bytes (a link to
// /dev/zero, or a huge file, would exhaust the worker's memory). A missing
// file is an error satisfying errors.Is(err, fs.ErrNotExist).
func (d *runDir) readResult(name string, max int64, u *User) ([]byte, error) {
	fd, err := unix.Openat(int(d.dir.Fd()), name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EMLINK) {
			return nil, fmt.Errorf("%s is a symbolic link, which the worker does not follow: the result must be the file the harness wrote", name)
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	refuse := func(err error) ([]byte, error) {
		_ = unix.Close(fd)
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return refuse(fmt.Errorf("%s: %w", name, err))
	}
	const must = "so it was not read: the result must be the file the harness wrote"
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return refuse(fmt.Errorf("%s is not a regular file (%s), %s", name, fileType(uint32(st.Mode)), must))
	case u != nil && st.Uid != u.UID:
		return refuse(fmt.Errorf("%s is owned by uid %d, not the tool user %s, %s", name, st.Uid, u, must))
	case st.Size > max:
		return refuse(fmt.Errorf("%s is %d bytes, over the %d-byte result limit (MaxPythonResult): return less, or write large data elsewhere", name, st.Size, max))
	}
	// A regular file: reading it may block as any file read does.
	if err := unix.SetNonblock(fd, false); err != nil {
		return refuse(fmt.Errorf("%s: %w", name, err))
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.path, name))
	defer f.Close()
	// The size was checked, but the file may still grow.
	return readAtMost(f, name, max)
}

func fileType(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "a device"
	case unix.S_IFSOCK:
		return "a socket"
	}
	return fmt.Sprintf("mode %o", mode&unix.S_IFMT)
}
