package devstack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// A cluster starts from a copy of a data directory initdb made once.
// initdb's output depends only on its binaries, its arguments and the user it
// runs as, and it costs about 1.5 CPU-seconds; `make test` starts some forty
// clusters and `noetl dev` one per start. The copy costs milliseconds.
//
// The made directory (the template) lives in the same base dir as the
// clusters, under a name that hashes what initdb's output depends on, so new
// binaries get a new one. It is made in a temp dir and renamed into place:
// concurrent starts race to make it and a half-made one is never used (an
// abandoned temp dir is reaped as the clusters' are). A template is used only
// when the server's user owns it and no one else can write it: base is
// usually /tmp, where another user could plant a directory of that name
// (its postgresql.conf could run commands as the server's user).

const (
	initdbPrefix    = "noetl-initdb-"
	initdbTmpPrefix = initdbPrefix + "tmp-"
)

// initdbFlags are initdb's arguments after -D (and --pwfile). TCP connections
// need the superuser's password: every local process reaches 127.0.0.1,
// steps running as nobody included. The socket stays trust: its directory is
// 0700 and the server user's (startLocal), so only that user and root reach it.
const initdbFlags = "-U postgres --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C --no-sync --no-instructions"

// initDataDir makes dataDir a new cluster's data directory, owned by cred's
// user (the caller's when nil). Without a usable template (base not
// writable, a directory of its name this user did not make) initdb runs into
// dataDir itself.
func initDataDir(ctx context.Context, binDir, base, dataDir string, cred *syscall.Credential, log *slog.Logger) error {
	tmpl, err := initdbTemplate(ctx, binDir, base, cred, log)
	if err != nil {
		log.Warn("devstack: no initdb template; running initdb for this cluster", "err", err)
		return runInitdb(ctx, binDir, dataDir, cred, log)
	}
	if err := copyTree(tmpl, dataDir, cred); err != nil {
		return fmt.Errorf("devstack: copy the initdb template %s: %w", tmpl, err)
	}
	return nil
}

// initdbTemplate returns the data directory of the template for binDir and
// cred, making it first when there is none.
func initdbTemplate(ctx context.Context, binDir, base string, cred *syscall.Credential, log *slog.Logger) (string, error) {
	key, err := templateKey(binDir, cred)
	if err != nil {
		return "", err
	}
	final := filepath.Join(base, initdbPrefix+key)
	if err := trustedTemplate(final, cred); err == nil {
		return filepath.Join(final, "data"), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	tmp, err := makeOwnedDir(base, initdbTmpPrefix, cred)
	if err != nil {
		return "", err
	}
	if err := runInitdb(ctx, binDir, filepath.Join(tmp, "data"), cred, log); err != nil {
		return "", errors.Join(err, os.RemoveAll(tmp))
	}
	if err := os.Rename(tmp, final); err != nil {
		// Another start made it first: use theirs.
		_ = os.RemoveAll(tmp)
		if err := trustedTemplate(final, cred); err != nil {
			return "", fmt.Errorf("%w (remove %s to have it made again)", err, final)
		}
		return filepath.Join(final, "data"), nil
	}
	log.Info("devstack: made the initdb template", "dir", final)
	return filepath.Join(final, "data"), nil
}

// runInitdb runs initdb into dataDir, whose parent cred's user can write.
// initdb wants a password for scram-sha-256; it gets a random one that is
// thrown away (each cluster sets its own when it starts: setPassword), from a
// 0600 file in that private parent, removed once initdb has read it.
func runInitdb(ctx context.Context, binDir, dataDir string, cred *syscall.Credential, log *slog.Logger) error {
	log.Debug("devstack: initdb", "dir", dataDir)
	pw, err := randomPassword()
	if err != nil {
		return err
	}
	pwfile := filepath.Join(filepath.Dir(dataDir), "initdb.pw")
	if err := os.WriteFile(pwfile, []byte(pw+"\n"), 0o600); err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	defer os.Remove(pwfile)
	if err := chown(pwfile, cred); err != nil {
		return err
	}
	args := append([]string{"-D", dataDir, "--pwfile", pwfile}, strings.Fields(initdbFlags)...)
	initdb := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"), args...)
	initdb.Dir = filepath.Dir(dataDir) // the server user may not be able to read our working dir
	initdb.SysProcAttr = procAttr(cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return fmt.Errorf("devstack: initdb: %w\n%s", err, tail(out, 2000))
	}
	return nil
}

// templateKey names what initdb's output depends on: its arguments, the
// binaries (path, size, time) and the user it runs as.
func templateKey(binDir string, cred *syscall.Credential) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, initdbFlags, ownerUID(cred))
	for _, bin := range []string{"initdb", "postgres"} {
		p := filepath.Join(binDir, bin)
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("devstack: %w", err)
		}
		fmt.Fprintln(h, p, fi.Size(), fi.ModTime().UnixNano())
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// trustedTemplate checks that dir is a finished template the server's user
// owns and only it can write; fs.ErrNotExist when there is none.
func trustedTemplate(dir string, cred *syscall.Credential) error {
	for _, p := range []string{dir, filepath.Join(dir, "data"), filepath.Join(dir, "data", "PG_VERSION")} {
		fi, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("devstack: initdb template: %w", err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok || st.Uid != ownerUID(cred) || fi.Mode()&0o022 != 0 || fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("devstack: %s is not a template this user made (owner, mode %v): remove it", p, fi.Mode())
		}
	}
	return nil
}

func ownerUID(cred *syscall.Credential) uint32 {
	if cred != nil {
		return cred.Uid
	}
	return uint32(os.Geteuid())
}

// copyTree copies the directories and regular files under src to dst (which
// must not exist) with their permissions, handing each to cred's user.
func copyTree(src, dst string, cred *syscall.Credential) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if err := os.Mkdir(to, info.Mode().Perm()); err != nil {
				return err
			}
		case info.Mode().IsRegular():
			if err := copyFile(path, to, info.Mode().Perm()); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s: not a directory or a regular file", path)
		}
		return chown(to, cred)
	})
}

func copyFile(from, to string, perm fs.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		return errors.Join(err, out.Close())
	}
	return out.Close()
}
