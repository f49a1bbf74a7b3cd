//go:build !unix

package tools

import (
	"fmt"
	"os"
	"path/filepath"
)

// Without unix there is no tool user (LookupUser): the run's folder is the
// worker's own, so by path is as safe as the worker itself.

func openDir(path string) (*os.File, error) { return os.Open(path) }

func createIn(dir *os.File, name string, data []byte, _ *User) error {
	f, err := os.OpenFile(filepath.Join(dir.Name(), name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (d *runDir) readResult(name string, max int64, _ *User) ([]byte, error) {
	path := filepath.Join(d.path, name)
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s), so it was not read: the result must be the file the harness wrote", name, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	return readAtMost(f, name, max)
}
