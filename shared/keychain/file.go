package keychain

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// FileRing is a key ring kept in one file on one machine: its keys are
// random AES-256 keys that wrap data keys. The file is JSON
// {"current": id, "keys": {id: base64 key}} with mode 0600; a file other users
// may read is refused. Old keys stay in the file after a rotation (AddKey), so
// what they sealed still opens.
type FileRing struct {
	path string
	mu   sync.RWMutex
	cur  string
	keys map[string][]byte
}

type keyFile struct {
	Current string            `json:"current"`
	Keys    map[string]string `json:"keys"`
}

// OpenFile opens the key file at path, creating it (mode 0600, with one new
// key, its directory 0700) when it does not exist and create is set.
// Creating and adding keys run under an exclusive lock (keyFileLock), and a
// new file appears whole and only if none exists (createKeyFile), so two
// processes creating it at once end up with the one key file: the second
// reads what the first wrote.
func OpenFile(path string, create bool) (*FileRing, error) {
	if path == "" {
		return nil, errors.New("keychain: no key file named")
	}
	r := &FileRing{path: path, keys: map[string][]byte{}}
	err := r.reload()
	switch {
	case err == nil:
		return r, nil
	case !errors.Is(err, fs.ErrNotExist) || !create:
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("keychain: key file directory: %w", err)
	}
	unlock, err := keyFileLock(path)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := r.reload(); err == nil {
		return r, nil // made meanwhile by another process
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	id, k, err := newFileKey()
	if err != nil {
		return nil, err
	}
	if err := createKeyFile(path, id, map[string][]byte{id: k}); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	// Read back what is there: ours, or (a creator that took no lock) theirs.
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// reload reads the key file into r: its keys and its current key. A file
// other users may read is refused.
func (r *FileRing) reload() error {
	path := r.path
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Errorf("keychain: key file: %w", err)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("keychain: key file %s has mode %04o: others may read the key that protects every credential; chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("keychain: key file: %w", err)
	}
	var kf keyFile
	if err := json.Unmarshal(b, &kf); err != nil {
		return fmt.Errorf("keychain: key file %s is not a key file ({\"current\", \"keys\"}): %w", path, err)
	}
	keys := make(map[string][]byte, len(kf.Keys))
	for id, enc := range kf.Keys {
		k, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || len(k) != KeySize {
			return fmt.Errorf("keychain: key file %s: key %q is not %d bytes of base64", path, id, KeySize)
		}
		keys[id] = k
	}
	if _, ok := keys[kf.Current]; !ok {
		return fmt.Errorf("keychain: key file %s: its current key %q is not among its keys", path, kf.Current)
	}
	r.mu.Lock()
	r.cur, r.keys = kf.Current, keys
	r.mu.Unlock()
	return nil
}

// Path is the key file's path.
func (r *FileRing) Path() string { return r.path }

// Describe implements KeyRing.
func (r *FileRing) Describe() string { return "the key file " + r.path }

// Current implements KeyRing.
func (r *FileRing) Current(context.Context) (string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.cur, nil
}

// NewDataKey implements KeyRing: a random data key, wrapped with AES-256-GCM
// under the current key (nonce, then ciphertext).
func (r *FileRing) NewDataKey(_ context.Context, aad string) (DataKey, error) {
	r.mu.RLock()
	id, kek := r.cur, r.keys[r.cur]
	r.mu.RUnlock()
	plain, err := newKey()
	if err != nil {
		return DataKey{}, err
	}
	nonce, ct, err := gcmSeal(kek, []byte(aad), plain)
	if err != nil {
		return DataKey{}, err
	}
	return DataKey{KeyID: id, Plain: plain, Wrapped: append(nonce, ct...)}, nil
}

// Unwrap implements KeyRing.
func (r *FileRing) Unwrap(_ context.Context, keyID string, wrapped []byte, aad string) ([]byte, error) {
	r.mu.RLock()
	kek, ok := r.keys[keyID]
	r.mu.RUnlock()
	if !ok && r.reload() == nil { // another process may have added it
		r.mu.RLock()
		kek, ok = r.keys[keyID]
		r.mu.RUnlock()
	}
	if !ok {
		return nil, fmt.Errorf("the key file %s has no key %q (was the value sealed with another key file?)", r.path, keyID)
	}
	const nonceSize = 12
	if len(wrapped) < nonceSize {
		return nil, errors.New("the wrapped data key is too short")
	}
	return gcmOpen(kek, wrapped[:nonceSize], []byte(aad), wrapped[nonceSize:])
}

// AddKey makes a new key the current one (old keys stay) and writes the
// file; it returns the new key's id. Under the file's lock it first reads the
// file again, so a key another process added meanwhile is kept.
func (r *FileRing) AddKey() (string, error) {
	unlock, err := keyFileLock(r.path)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := r.reload(); err != nil {
		return "", err
	}
	id, k, err := newFileKey()
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make(map[string][]byte, len(r.keys)+1)
	for kid, v := range r.keys {
		keys[kid] = v
	}
	keys[id] = k
	if err := writeKeyFile(r.path, id, keys); err != nil {
		return "", err
	}
	r.cur, r.keys = id, keys
	return id, nil
}

// newFileKey is a new random key and its id.
func newFileKey() (string, []byte, error) {
	k, err := newKey()
	if err != nil {
		return "", nil, err
	}
	var tag [4]byte
	_, _ = rand.Read(tag[:])
	return "file:" + time.Now().UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(tag[:]), k, nil
}

// keyFileLock takes the exclusive lock of the key file at path (flock on
// path.lock, which stays), waiting for another holder; unlock releases it.
func keyFileLock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("keychain: lock the key file: %w", err)
	}
	if err := lockExclusive(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("keychain: lock the key file %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}

// writeKeyFile replaces the file atomically, with mode 0600 from the start.
func writeKeyFile(path, cur string, keys map[string][]byte) error {
	return putKeyFile(path, cur, keys, os.Rename)
}

// createKeyFile writes the file only if none exists (fs.ErrExist then): a
// hard link of the written file, so it appears whole or not at all.
func createKeyFile(path, cur string, keys map[string][]byte) error {
	return putKeyFile(path, cur, keys, os.Link)
}

// putKeyFile writes the key file next to path and moves it there with place.
func putKeyFile(path, cur string, keys map[string][]byte, place func(tmp, path string) error) error {
	kf := keyFile{Current: cur, Keys: map[string]string{}}
	for id, k := range keys {
		kf.Keys[id] = base64.StdEncoding.EncodeToString(k)
	}
	b, err := json.MarshalIndent(kf, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keychain-*")
	if err != nil {
		return fmt.Errorf("keychain: write the key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("keychain: write the key file: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = place(tmp.Name(), path)
	}
	if werr != nil {
		return fmt.Errorf("keychain: write the key file %s: %w", path, werr)
	}
	return nil
}

// DefaultKeyFile is where `noetl serve` keeps its key file unless told
// otherwise: the user's configuration directory, noetl/keychain.json.
func DefaultKeyFile() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("keychain: no default key file location (%w); name one with NOETL_KEYCHAIN_KEY_FILE", err)
	}
	return filepath.Join(dir, "noetl", "keychain.json"), nil
}
