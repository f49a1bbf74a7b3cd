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
// target away), as is one another user made first or others may write in.
// As any user: it gives the dir to the test's own user; as root also one
// another uid owns.
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
	// A directory others may write in (a data dir set to /tmp, say) would be
	// given away whole, with what others put there.
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	if err := ownDataDir(shared, self); err == nil || !strings.Contains(err.Error(), "is writable by other users") {
		t.Fatalf("a world-writable data dir: %v", err)
	}
	if os.Geteuid() != 0 {
		return // only root can make a directory another user's
	}
	theirs := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(theirs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(theirs, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	nobody := &tools.User{Name: "nobody", UID: 65534, GID: 65534}
	if err := ownDataDir(theirs, nobody); err == nil || !strings.Contains(err.Error(), "belongs to uid 4242") {
		t.Fatalf("a data dir another user made first: %v", err)
	}
}
