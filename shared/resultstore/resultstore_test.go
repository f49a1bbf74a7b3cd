package resultstore_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/noetl-go/noetl/shared/resultstore"
)

// openDir opens a directory store under a fresh temp dir and returns it with
// its root.
func openDir(t *testing.T, maxBytes int64) (resultstore.Store, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "results")
	s, err := resultstore.Open(context.Background(), "file://"+root, resultstore.Options{MaxBytes: maxBytes})
	if err != nil {
		t.Fatalf("Open file://%s: %v", root, err)
	}
	return s, root
}

func fileURI(p string) string { return (&url.URL{Scheme: "file", Path: p}).String() }

func TestOpen(t *testing.T) {
	abs := filepath.Join(t.TempDir(), "a", "b")
	cases := []struct {
		name, url string
		want      string // "" = success; else a substring of the error
	}{
		{"absolute dir", "file://" + abs, ""},
		{"localhost", "file://localhost" + abs, ""},
		{"trailing slash", "file://" + abs + "/", ""},
		{"s3", "s3://bucket/prefix", ""},
		{"s3 without prefix", "s3://bucket", ""},
		{"relative dir (two slashes)", "file://relative/dir", "must be local"},
		{"opaque relative", "file:relative/dir", "must be absolute"},
		{"no path", "file://", "must be absolute"},
		{"remote host", "file://server" + abs, "must be local"},
		{"s3 without bucket", "s3:///prefix", "s3://bucket/prefix"},
		{"s3 empty", "s3://", "s3://bucket/prefix"},
		{"unknown scheme", "gs://bucket/prefix", "expected file:///absolute/dir or s3://bucket/prefix"},
		{"http", "http://example.com/x", "expected file:///absolute/dir or s3://bucket/prefix"},
		{"no scheme", "/abs/dir", "expected file:///absolute/dir or s3://bucket/prefix"},
		{"empty", "", "expected file:///absolute/dir or s3://bucket/prefix"},
		{"unparseable", "file://%zz/x", "result store"},
	}
	// s3:// stores get an explicit SDK config so the test never reads ~/.aws.
	awsCfg := motoFreeConfig()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := resultstore.Open(context.Background(), tc.url, resultstore.Options{AWS: &awsCfg})
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Open(%q): %v", tc.url, err)
				}
				if s == nil || s.URL() == "" {
					t.Fatalf("Open(%q) returned %v", tc.url, s)
				}
				return
			}
			if err == nil {
				t.Fatalf("Open(%q) succeeded (%s), want an error mentioning %q", tc.url, s.URL(), tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open(%q): %v, want it to mention %q", tc.url, err, tc.want)
			}
		})
	}
	if _, err := os.Stat(abs); err != nil {
		t.Errorf("opening a file store did not create its directory: %v", err)
	}
}

// TestOpenS3RefusesHostInjection: the region and the bucket go into the
// request's host name, so a python step's script source region
// "x@127.0.0.1:port/" sent the signed request to that listener (the security
// review of 2026-11-29, finding 5). Both are checked as host labels now.
func TestOpenS3RefusesHostInjection(t *testing.T) {
	for _, c := range []struct{ url, region, want string }{
		{"s3://bucket/p", "x@127.0.0.1:9/", `region "x@127.0.0.1:9/" is not an AWS region name`},
		{"s3://bucket/p", "evil.example/", `region "evil.example/" is not an AWS region name`},
		{"s3://evil.example:443/p", "us-east-1", `bucket "evil.example:443" is not a bucket name`},
	} {
		cfg := motoFreeConfig()
		cfg.Region = c.region
		_, err := resultstore.Open(context.Background(), c.url, resultstore.Options{AWS: &cfg})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%q) in region %q: %v, want %q", c.url, c.region, err, c.want)
		}
	}
	cfg := motoFreeConfig()
	cfg.Region = "eu-west-2"
	if _, err := resultstore.Open(context.Background(), "s3://my.bucket-1/p", resultstore.Options{AWS: &cfg}); err != nil {
		t.Errorf("a well-formed region and bucket: %v", err)
	}
}

func TestOpenDirNotCreatable(t *testing.T) {
	f := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := resultstore.Open(context.Background(), "file://"+f+"/sub", resultstore.Options{}); err == nil {
		t.Fatal("Open under a regular file succeeded")
	}
}

func TestDirURL(t *testing.T) {
	s, root := openDir(t, 0)
	if got := s.URL(); got != fileURI(root) {
		t.Errorf("URL() = %q, want %q", got, fileURI(root))
	}
	// Reopening through URL() names the same store.
	again, err := resultstore.Open(context.Background(), s.URL(), resultstore.Options{})
	if err != nil || again.URL() != s.URL() {
		t.Fatalf("reopen %q: %v %v", s.URL(), again, err)
	}
}

func TestDirPutGet(t *testing.T) {
	ctx := context.Background()
	s, root := openDir(t, 0)
	cases := []struct {
		name string
		data []byte
		file string // where the bytes must land, relative to root
	}{
		{"exec-1/step-a.json", []byte(`{"rows":[1,2,3]}`), "exec-1/step-a.json"},
		{"deep/a/b/c/d.json", []byte(`[]`), "deep/a/b/c/d.json"},
		{"empty.json", []byte{}, "empty.json"},
		{"a/./b/../c.json", []byte(`"cleaned"`), "a/c.json"},
		{"odd name #1 ?x=%41.json", []byte(`"escaped"`), "odd name #1 ?x=%41.json"},
		{"binary", bytes.Repeat([]byte{0, 0xff, '\n'}, 1000), "binary"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			uri, err := s.Put(ctx, tc.name, tc.data)
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if !strings.HasPrefix(uri, s.URL()+"/") {
				t.Errorf("URI %q is not under the store URL %q", uri, s.URL())
			}
			if !resultstore.Owns(s, uri) {
				t.Errorf("the store does not own the URI Put returned: %q", uri)
			}
			got, err := s.Get(ctx, uri)
			if err != nil {
				t.Fatalf("Get(%q): %v", uri, err)
			}
			if !bytes.Equal(got, tc.data) {
				t.Errorf("Get returned %d bytes %q, want %q", len(got), trim(got), trim(tc.data))
			}
			onDisk, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(tc.file)))
			if err != nil || !bytes.Equal(onDisk, tc.data) {
				t.Errorf("file %s: %q %v, want the data", tc.file, trim(onDisk), err)
			}
		})
	}

	// Overwriting replaces the object.
	uri, err := s.Put(ctx, "exec-1/step-a.json", []byte(`"v2"`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, uri); err != nil || string(got) != `"v2"` {
		t.Errorf("after overwrite: %q %v", got, err)
	}

	// Puts write to a temp file and rename: none is left behind.
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".put-") {
			t.Errorf("temp file left behind: %s", p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func trim(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

func TestDirPutBadNames(t *testing.T) {
	ctx := context.Background()
	s, root := openDir(t, 0)
	for _, name := range []string{"", ".", "..", "/abs", "/abs/x.json", "../x", "../../etc/passwd", "a/../../x", "a/../..", "./../x"} {
		t.Run(name, func(t *testing.T) {
			uri, err := s.Put(ctx, name, []byte("x"))
			if err == nil {
				t.Fatalf("Put(%q) succeeded with %q", name, uri)
			}
			if !strings.Contains(err.Error(), "relative path inside the store") {
				t.Errorf("Put(%q): %v, want it to say the name must be relative and inside", name, err)
			}
		})
	}
	// Nothing was written next to the root.
	entries, err := os.ReadDir(filepath.Dir(root))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "results" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the root's parent holds %q, want only results", names)
	}
}

func TestDirOwns(t *testing.T) {
	s, root := openDir(t, 0)
	parent := filepath.Dir(root)
	cases := []struct {
		uri  string
		want bool
	}{
		{fileURI(root + "/x.json"), true},
		{fileURI(root + "/a/b/c.json"), true},
		{"file://localhost" + root + "/x.json", true},
		{fileURI(root + "/a/../x.json"), false}, // not clean: names no object (issue 33, finding 7)
		{fileURI(root + "/a//x.json"), false},
		{fileURI(root), false}, // the root itself is no object
		{fileURI(root + "/"), false},
		{fileURI(root + "/."), false},
		{fileURI(root + "/../x.json"), false},
		{fileURI(root + "/a/../../x.json"), false},
		{"file://" + root + "/%2e%2e/x.json", false}, // percent-encoded ..
		{fileURI(root + "-other/x.json"), false},     // a prefix sibling
		{fileURI(root + "x/y.json"), false},
		{fileURI(parent + "/x.json"), false},
		{"file:///etc/passwd", false},
		{"file://evil" + root + "/x.json", false}, // another host
		{"file:" + root + "/x.json", true},        // file:/abs is the same URI without authority
		{"file:results/x.json", false},            // opaque, relative
		{root + "/x.json", false},                 // no scheme
		{"s3://bucket" + root + "/x.json", false},
		{"http://localhost" + root + "/x.json", false},
		{"", false},
		{"file://%zz/x", false},
	}
	for _, tc := range cases {
		if got := resultstore.Owns(s, tc.uri); got != tc.want {
			t.Errorf("Owns(%q) = %v, want %v", tc.uri, got, tc.want)
		}
	}
}

func TestDirGetNotOwned(t *testing.T) {
	ctx := context.Background()
	s, root := openDir(t, 0)
	// Real files outside the root: Get must refuse them, not read them.
	secret := []byte("outside the store")
	for _, p := range []string{root + "-other/x.json", filepath.Dir(root) + "/x.json"} {
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, secret, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, uri := range []string{
		fileURI(root + "-other/x.json"),
		fileURI(root + "/../x.json"),
		"file://" + root + "/%2e%2e/x.json",
		"file:///etc/passwd",
		"s3://bucket/x.json",
		"",
	} {
		got, err := s.Get(ctx, uri)
		if err == nil {
			t.Errorf("Get(%q) read %q, want an error", uri, got)
			continue
		}
		if !strings.Contains(err.Error(), "is not inside the result store") {
			t.Errorf("Get(%q): %v, want it to say the URI is outside the store", uri, err)
		}
		if got != nil {
			t.Errorf("Get(%q) returned data with its error", uri)
		}
	}
}

// TestDirGetSymlinkEscape: a symlink inside the root that leads out of it is
// not followed.
func TestDirGetSymlinkEscape(t *testing.T) {
	s, root := openDir(t, 0)
	outside := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(outside, []byte(`"secret"`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "link.json")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(context.Background(), fileURI(filepath.Join(root, "link.json"))); err == nil {
		t.Fatalf("Get through a symlink out of the root read %q, want an error", got)
	}
}

func TestDirGetMissing(t *testing.T) {
	s, root := openDir(t, 0)
	_, err := s.Get(context.Background(), fileURI(root+"/never-put.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Get of a missing object: %v, want fs.ErrNotExist", err)
	}
	if errors.Is(err, resultstore.ErrTooLarge) {
		t.Errorf("a missing object is not too large: %v", err)
	}
}

func TestDirTooLarge(t *testing.T) {
	ctx := context.Background()
	const limit = 10
	s, _ := openDir(t, limit)
	cases := []struct {
		size    int
		tooLarg bool
	}{{0, false}, {1, false}, {limit, false}, {limit + 1, true}, {10 * limit, true}}
	for _, tc := range cases {
		data := bytes.Repeat([]byte("x"), tc.size)
		// Put does not enforce the read limit: the worker decides what to store.
		uri, err := s.Put(ctx, "sized.json", data)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, uri)
		if tc.tooLarg {
			if !errors.Is(err, resultstore.ErrTooLarge) {
				t.Errorf("%d bytes over a %d-byte limit: %v, want ErrTooLarge", tc.size, limit, err)
			}
			if got != nil {
				t.Errorf("%d bytes: ErrTooLarge came with %d bytes of data", tc.size, len(got))
			}
			continue
		}
		if err != nil || len(got) != tc.size {
			t.Errorf("%d bytes within a %d-byte limit: %d bytes, %v", tc.size, limit, len(got), err)
		}
	}
}

// TestDefaultMaxBytes: MaxBytes <= 0 means DefaultMaxBytes, not "nothing".
func TestDefaultMaxBytes(t *testing.T) {
	if resultstore.DefaultMaxBytes < 1<<20 {
		t.Fatalf("DefaultMaxBytes %d is below 1 MiB, less than a Lambda body", resultstore.DefaultMaxBytes)
	}
	ctx := context.Background()
	for _, limit := range []int64{0, -1} {
		s, _ := openDir(t, limit)
		data := bytes.Repeat([]byte("y"), 1<<20)
		uri, err := s.Put(ctx, "mib.json", data)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.Get(ctx, uri); err != nil || len(got) != len(data) {
			t.Errorf("MaxBytes %d: Get of 1 MiB: %d bytes, %v", limit, len(got), err)
		}
	}
}

// TestDefaultDir: `noetl serve` given a database keeps results under the
// user's data directory, as it keeps the keychain's key under the
// configuration directory: $XDG_DATA_HOME when absolute, else ~/.local/share.
func TestDefaultDir(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the XDG layout is Linux's") // macOS and Windows use their configuration directory
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, tc := range []struct{ xdg, want string }{
		{"", "file://" + home + "/.local/share/noetl/results"},
		{"relative/data", "file://" + home + "/.local/share/noetl/results"},
		{home + "/xdg", "file://" + home + "/xdg/noetl/results"},
	} {
		t.Setenv("XDG_DATA_HOME", tc.xdg)
		got, err := resultstore.DefaultDir()
		if err != nil || got != tc.want {
			t.Errorf("XDG_DATA_HOME=%q: %q %v, want %q", tc.xdg, got, err, tc.want)
		}
		st, err := resultstore.Open(context.Background(), got, resultstore.Options{})
		if err != nil || st.URL() != tc.want {
			t.Errorf("XDG_DATA_HOME=%q: the default does not open as a store: %v", tc.xdg, err)
		}
	}
}
