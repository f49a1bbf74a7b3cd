package resultstore

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// DefaultDir is the store `noetl serve` keeps when given a database but no
// store, so results over a worker's inline limit work with no setting: the
// directory noetl/results under the user's data directory ($XDG_DATA_HOME,
// else ~/.local/share; on macOS ~/Library/Application Support, on Windows
// %AppData%), as file:///… It must outlive the server as the database does.
func DefaultDir() (string, error) {
	base := os.Getenv("XDG_DATA_HOME")
	if !filepath.IsAbs(base) {
		var err error
		switch runtime.GOOS {
		case "darwin", "windows", "ios", "plan9":
			base, err = os.UserConfigDir()
		default:
			if base, err = os.UserHomeDir(); err == nil {
				base = filepath.Join(base, ".local", "share")
			}
		}
		if err != nil {
			return "", fmt.Errorf("result store: no default directory (%w); name one with NOETL_RESULT_STORE", err)
		}
	}
	return (&url.URL{Scheme: "file", Path: filepath.Join(base, "noetl", "results")}).String(), nil
}

// dirStore keeps results as files under one directory.
type dirStore struct {
	root string // absolute, cleaned
	max  int64
}

func openDir(u *url.URL, opt Options) (*dirStore, error) {
	if u.Host != "" && u.Host != "localhost" {
		return nil, fmt.Errorf("result store %q: a file store must be local (file:///absolute/dir)", u.String())
	}
	if u.Path == "" || !filepath.IsAbs(u.Path) {
		return nil, fmt.Errorf("result store %q: the directory must be absolute (file:///absolute/dir)", u.String())
	}
	root := filepath.Clean(u.Path)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("result store %q: %w", u.String(), err)
	}
	return &dirStore{root: root, max: opt.MaxBytes}, nil
}

func (d *dirStore) URL() string { return (&url.URL{Scheme: "file", Path: d.root}).String() }

func (d *dirStore) Put(_ context.Context, name string, data []byte) (string, error) {
	name, err := cleanName(name)
	if err != nil {
		return "", err
	}
	p := filepath.Join(d.root, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", fmt.Errorf("resultstore: %w", err)
	}
	// Write then rename, so a reader never sees half a result.
	tmp, err := os.CreateTemp(filepath.Dir(p), ".put-*")
	if err != nil {
		return "", fmt.Errorf("resultstore: %w", err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("resultstore: writing %s: %w", p, werr)
	}
	return (&url.URL{Scheme: "file", Path: p}).String(), nil
}

// Name returns the path, relative to the root, of the file a URI names when
// it lies inside the root. A path that is not clean (`.`, `..`, `//`) names
// nothing, as in the S3 store: a check on the path as written (whose
// execution it is) would otherwise read another object than the one it
// checked.
func (d *dirStore) Name(uri string) (string, bool) {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "file" || (u.Host != "" && u.Host != "localhost") || filepath.Clean(u.Path) != u.Path {
		return "", false
	}
	p, ok := strings.CutPrefix(u.Path, d.root+string(filepath.Separator))
	return p, ok && p != ""
}

func (d *dirStore) Get(_ context.Context, uri string) ([]byte, error) {
	rel, err := locate(d, uri)
	if err != nil {
		return nil, err
	}
	// OpenInRoot also refuses symlinks that lead out of the root.
	f, err := os.OpenInRoot(d.root, rel)
	if err != nil {
		return nil, fmt.Errorf("resultstore: %w", err)
	}
	defer f.Close()
	return readLimited(f, d.max, uri)
}

func readLimited(r io.Reader, limit int64, uri string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("resultstore: reading %s: %w", uri, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s is over %d bytes", ErrTooLarge, uri, limit)
	}
	return b, nil
}
