// Package keychain seals credentials for storage with envelope encryption:
// every sealing draws a fresh 256-bit data key from a KeyRing, encrypts the
// plaintext with it (AES-256-GCM), and keeps the data key only wrapped by the
// ring's key-encryption key. A database row then holds the ring's key id, the
// wrapped data key, the nonce and the ciphertext, never the plaintext nor an
// unwrapped key; opening asks the ring to unwrap the data key again.
//
// Two rings exist: a key file on one machine (FileRing, created with mode 0600
// by `noetl dev` and `noetl serve`) and AWS KMS (package kmsring, linked only
// by the keychain function and the CLI, so the other functions' binaries carry
// no KMS client).
//
// The associated data binds a sealed value to what it belongs to (the
// credential's name): a ciphertext copied onto another row does not open.
//
// Rotation: a ring's current key seals new values; values sealed under an
// older key still open as long as the ring knows that key (a key file keeps
// its old keys; KMS keeps key material and old keys decrypt), and Reseal
// moves a value under the current key.
package keychain

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// DataKey is a fresh data key: Plain encrypts one value and is then dropped,
// Wrapped (Plain under the ring's key KeyID) is what is stored.
type DataKey struct {
	KeyID   string
	Plain   []byte
	Wrapped []byte
}

// KeyRing holds the key-encryption keys. aad binds a wrapped key to the value
// it protects (KMS's encryption context); the same aad must be given to open.
type KeyRing interface {
	// NewDataKey makes a fresh 32-byte data key wrapped under the current key.
	NewDataKey(ctx context.Context, aad string) (DataKey, error)
	// Unwrap returns the data key that keyID wrapped.
	Unwrap(ctx context.Context, keyID string, wrapped []byte, aad string) ([]byte, error)
	// Current is the id of the key new values are sealed under.
	Current(ctx context.Context) (string, error)
	// Describe names the ring for messages and logs (no secret in it).
	Describe() string
}

// Sealed is a value as stored: nothing in it is secret without the ring.
type Sealed struct {
	KeyID      string
	WrappedKey []byte
	Nonce      []byte
	Ciphertext []byte
}

// ErrOpen is wrapped by every failure to open a sealed value (a wrong key, a
// tampered row, a ciphertext moved onto another row).
var ErrOpen = errors.New("keychain: the sealed value does not open")

// Seal encrypts plaintext under a fresh data key from ring.
func Seal(ctx context.Context, ring KeyRing, aad string, plaintext []byte) (Sealed, error) {
	dk, err := ring.NewDataKey(ctx, aad)
	if err != nil {
		return Sealed{}, fmt.Errorf("keychain: a data key from %s: %w", ring.Describe(), err)
	}
	defer clear(dk.Plain)
	nonce, ct, err := gcmSeal(dk.Plain, []byte(aad), plaintext)
	if err != nil {
		return Sealed{}, err
	}
	return Sealed{KeyID: dk.KeyID, WrappedKey: dk.Wrapped, Nonce: nonce, Ciphertext: ct}, nil
}

// Open decrypts a sealed value; aad must be the one it was sealed with.
func Open(ctx context.Context, ring KeyRing, aad string, s Sealed) ([]byte, error) {
	key, err := ring.Unwrap(ctx, s.KeyID, s.WrappedKey, aad)
	if err != nil {
		return nil, fmt.Errorf("%w: unwrapping its data key with key %q of %s: %v", ErrOpen, s.KeyID, ring.Describe(), err)
	}
	defer clear(key)
	pt, err := gcmOpen(key, s.Nonce, []byte(aad), s.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOpen, err)
	}
	return pt, nil
}

// Reseal moves a sealed value under the ring's current key (key rotation).
// moved is false when it already is there.
func Reseal(ctx context.Context, ring KeyRing, aad string, s Sealed) (out Sealed, moved bool, err error) {
	cur, err := ring.Current(ctx)
	if err != nil {
		return s, false, err
	}
	if s.KeyID == cur {
		return s, false, nil
	}
	pt, err := Open(ctx, ring, aad, s)
	if err != nil {
		return s, false, err
	}
	defer clear(pt)
	out, err = Seal(ctx, ring, aad, pt)
	return out, err == nil, err
}

// gcmSeal encrypts with AES-256-GCM under key and a random nonce.
func gcmSeal(key, aad, plaintext []byte) (nonce, ciphertext []byte, err error) {
	g, err := newGCM(key)
	if err != nil {
		return nil, nil, err
	}
	nonce = make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, fmt.Errorf("keychain: nonce: %w", err)
	}
	return nonce, g.Seal(nil, nonce, plaintext, aad), nil
}

func gcmOpen(key, nonce, aad, ciphertext []byte) ([]byte, error) {
	g, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	if len(nonce) != g.NonceSize() {
		return nil, fmt.Errorf("keychain: nonce of %d bytes, want %d", len(nonce), g.NonceSize())
	}
	return g.Open(nil, nonce, ciphertext, aad)
}

func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("keychain: key of %d bytes, want %d", len(key), KeySize)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("keychain: %w", err)
	}
	return cipher.NewGCM(b)
}

// KeySize is the size of data keys and of a key file's keys (AES-256).
const KeySize = 32

// newKey returns KeySize random bytes.
func newKey() ([]byte, error) {
	k := make([]byte, KeySize)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("keychain: random key: %w", err)
	}
	return k, nil
}
