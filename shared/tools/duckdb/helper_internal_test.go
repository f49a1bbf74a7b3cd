//go:build unix

package duckdb

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/tools"
)

// TestOwnDataDir: the data dir is made when missing and given to the user,
// but a link in its place is refused (chowning through it would give its
// target away). As any user: it gives the dir to the test's own user.
func TestOwnDataDir(t *testing.T) {
	self := &tools.User{Name: "self", UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	link := filepath.Join(t.TempDir(), "noetl-data")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := ownDataDir(link, self); err == nil || !strings.Contains(err.Error(), "is a symbolic link, not a directory") {
		t.Fatalf("a link as the data dir: %v", err)
	}
	fresh := filepath.Join(t.TempDir(), "a", "noetl-data")
	if err := ownDataDir(fresh, self); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(fresh); err != nil || !fi.IsDir() {
		t.Fatalf("the data dir was not made: %v, %v", fi, err)
	}
}
