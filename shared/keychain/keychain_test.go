package keychain_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/noetl-go/noetl/shared/keychain"
)

// TestFileRing: the key file is created 0600, seals and opens, refuses the
// wrong associated data and a tampered ciphertext, and survives a reopen.
func TestFileRing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "keychain.json")
	r, err := keychain.OpenFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	secret := []byte(`{"password":"s3cr3t-value"}`)
	s, err := keychain.Seal(ctx, r, "pg_prod", secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(s.Ciphertext, []byte("s3cr3t")) || bytes.Contains(s.WrappedKey, []byte("s3cr3t")) {
		t.Fatal("plaintext in the sealed value")
	}
	got, err := keychain.Open(ctx, r, "pg_prod", s)
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("open: %q %v", got, err)
	}
	if _, err := keychain.Open(ctx, r, "pg_other", s); !errors.Is(err, keychain.ErrOpen) {
		t.Fatalf("another row's associated data opened it: %v", err)
	}
	bad := s
	bad.Ciphertext = append([]byte(nil), s.Ciphertext...)
	bad.Ciphertext[0] ^= 1
	if _, err := keychain.Open(ctx, r, "pg_prod", bad); !errors.Is(err, keychain.ErrOpen) {
		t.Fatalf("a tampered ciphertext opened: %v", err)
	}
	again, err := keychain.OpenFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := keychain.Open(ctx, again, "pg_prod", s); err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("reopened ring: %q %v", got, err)
	}
}

// TestFileRingRotation: after AddKey new values use the new key, old ones
// still open, and Reseal moves them under the new key.
func TestFileRingRotation(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "keychain.json")
	r, err := keychain.OpenFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := r.Current(ctx)
	s, err := keychain.Seal(ctx, r, "a", []byte("value-one"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.AddKey()
	if err != nil || id == old {
		t.Fatalf("AddKey: %q %v", id, err)
	}
	if cur, _ := r.Current(ctx); cur != id {
		t.Fatalf("current %q, want %q", cur, id)
	}
	if got, err := keychain.Open(ctx, r, "a", s); err != nil || string(got) != "value-one" {
		t.Fatalf("old value after rotation: %q %v", got, err)
	}
	moved, did, err := keychain.Reseal(ctx, r, "a", s)
	if err != nil || !did || moved.KeyID != id {
		t.Fatalf("reseal: %+v %v %v", moved.KeyID, did, err)
	}
	if _, did, _ := keychain.Reseal(ctx, r, "a", moved); did {
		t.Fatal("a value under the current key was resealed again")
	}
	if got, err := keychain.Open(ctx, r, "a", moved); err != nil || string(got) != "value-one" {
		t.Fatalf("resealed value: %q %v", got, err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("rewritten key file mode %v", fi.Mode().Perm())
	}
	// The rotated file carries both keys.
	again, err := keychain.OpenFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := keychain.Open(ctx, again, "a", s); err != nil {
		t.Fatalf("old value through the reopened file: %v", err)
	}
}

// TestFileRingRefusals: a key file others can read, a missing one without
// create, and a value sealed by another key file.
func TestFileRingRefusals(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "k.json")
	if _, err := keychain.OpenFile(path, false); err == nil {
		t.Fatal("a missing key file opened without create")
	}
	r, err := keychain.OpenFile(path, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := keychain.OpenFile(path, false); err == nil || !bytes.Contains([]byte(err.Error()), []byte("chmod 600")) {
		t.Fatalf("a world-readable key file: %v", err)
	}
	other, err := keychain.OpenFile(filepath.Join(dir, "other.json"), true)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := keychain.Seal(ctx, other, "x", []byte("v"))
	if _, err := keychain.Open(ctx, r, "x", s); !errors.Is(err, keychain.ErrOpen) {
		t.Fatalf("another key file's value: %v", err)
	}
}
