package keychain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/noetl-go/noetl/shared/keychain"
)

// creatorEnv makes this test binary a key file creator of
// TestKeyFileConcurrentCreate: it opens (creating) the key file the variable
// names at the time creatorAtEnv gives, seals a value and prints its current
// key and the sealed value as JSON.
const (
	creatorEnv   = "NOETL_TEST_KEYFILE_CREATOR"
	creatorAtEnv = "NOETL_TEST_KEYFILE_CREATE_AT"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(creatorEnv); path != "" {
		at, _ := strconv.ParseInt(os.Getenv(creatorAtEnv), 10, 64)
		out, err := createAndSeal(path, time.Unix(0, at), fmt.Sprintf("from process %d", os.Getpid()))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(out)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// created is what one creator saw: its ring's current key and a value it
// sealed under it.
type created struct {
	Current string
	Plain   string
	Sealed  keychain.Sealed
}

func createAndSeal(path string, at time.Time, plain string) (created, error) {
	time.Sleep(time.Until(at)) // every creator starts at once
	r, err := keychain.OpenFile(path, true)
	if err != nil {
		return created{}, err
	}
	ctx := context.Background()
	cur, err := r.Current(ctx)
	if err != nil {
		return created{}, err
	}
	s, err := keychain.Seal(ctx, r, "alias", []byte(plain))
	return created{Current: cur, Plain: plain, Sealed: s}, err
}

// TestKeyFileConcurrentCreate (issue 33, finding 8): processes and
// goroutines creating the key file at once end up with one key — every
// creator's current key is the file's only key, and what each sealed opens
// with the file as it is.
func TestKeyFileConcurrentCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cfg", "keychain.json")
	at := time.Now().Add(700 * time.Millisecond)
	var mu sync.Mutex
	var all []created
	var wg sync.WaitGroup
	fail := make(chan error, 32)
	for i := range 6 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), creatorEnv+"="+path, creatorAtEnv+"="+strconv.FormatInt(at.UnixNano(), 10))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := cmd.Wait(); err != nil {
				fail <- fmt.Errorf("creator process %d: %v: %s", i, err, stderr.String())
				return
			}
			var c created
			if err := json.Unmarshal(stdout.Bytes(), &c); err != nil {
				fail <- fmt.Errorf("creator process %d wrote %q: %v", i, stdout.String(), err)
				return
			}
			mu.Lock()
			all = append(all, c)
			mu.Unlock()
		}()
	}
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := createAndSeal(path, at, fmt.Sprintf("from goroutine %d", i))
			if err != nil {
				fail <- err
				return
			}
			mu.Lock()
			all = append(all, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(fail)
	for err := range fail {
		t.Fatal(err)
	}
	var kf struct{ Current string }
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &kf) != nil {
		t.Fatalf("the key file: %v\n%s", err, b)
	}
	ring, err := keychain.OpenFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		if c.Current != kf.Current {
			t.Errorf("a creator sealed under key %q; the file's current key is %q", c.Current, kf.Current)
		}
		if got, err := keychain.Open(context.Background(), ring, "alias", c.Sealed); err != nil || string(got) != c.Plain {
			t.Errorf("%q does not open with the key file: %q %v", c.Plain, got, err)
		}
	}
	if len(all) != 12 || bytes.Count(b, []byte(`"file:`)) != 2 { // current and the one key
		t.Fatalf("%d creators; the key file:\n%s", len(all), b)
	}
}

// TestKeyFileConcurrentAddKey: keys added at once by two rings over one
// file are all kept (each AddKey reads the file again under its lock), so
// what either sealed still opens.
func TestKeyFileConcurrentAddKey(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keychain.json")
	a, err := keychain.OpenFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := keychain.OpenFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for _, r := range []*keychain.FileRing{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.AddKey(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	sa, err := keychain.Seal(ctx, a, "x", []byte("sealed by a"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := keychain.Seal(ctx, b, "x", []byte("sealed by b"))
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := keychain.OpenFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []keychain.Sealed{sa, sb} {
		if _, err := keychain.Open(ctx, fresh, "x", s); err != nil {
			t.Errorf("a value sealed under %s does not open with the file: %v", s.KeyID, err)
		}
	}
	if raw, _ := os.ReadFile(path); bytes.Count(raw, []byte(`"file:`)) != 6 { // current + 5 keys
		t.Fatalf("keys lost:\n%s", raw)
	}
}
