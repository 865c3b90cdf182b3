// Package seal is the one AES-256-GCM box the BFF seals its records with:
// tokens and idempotency records in Redis, pending logins, and the session
// cookie. A sealed value is nonce | ciphertext, bound to associated data
// (the key it is stored under, the user, the cookie's name) so it cannot be
// moved elsewhere and still open.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// ErrOpen means a value did not authenticate: tampered, truncated, sealed
// under another key or with other associated data.
var ErrOpen = errors.New("seal: value does not open")

// Box seals and opens values under one key. Safe for concurrent use.
type Box struct {
	aead cipher.AEAD
}

// New returns a Box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != 32 {
		return nil, errors.New("seal: the key must be 32 bytes")
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return &Box{aead: aead}, nil
}

// Derive returns a Box for a key derived from master with HKDF-SHA256
// under label, so one configured key serves several purposes safely.
func Derive(master []byte, label string) (*Box, error) {
	k, err := hkdf.Key(sha256.New, master, nil, label, 32)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return New(k)
}

// Overhead is how much longer a sealed value is than its plaintext.
func (b *Box) Overhead() int { return b.aead.NonceSize() + b.aead.Overhead() }

// Seal appends nonce | ciphertext of plain, bound to aad, to dst.
func (b *Box) Seal(dst, plain, aad []byte) []byte {
	ns := b.aead.NonceSize()
	start := len(dst)
	dst = append(dst, make([]byte, ns)...)
	_, _ = rand.Read(dst[start : start+ns])
	return b.aead.Seal(dst, dst[start:start+ns], plain, aad)
}

// Open authenticates nonce | ciphertext against aad and appends the
// plaintext to dst, or returns ErrOpen.
func (b *Box) Open(dst, sealed, aad []byte) ([]byte, error) {
	ns := b.aead.NonceSize()
	if len(sealed) < ns+b.aead.Overhead() {
		return nil, ErrOpen
	}
	out, err := b.aead.Open(dst, sealed[:ns], sealed[ns:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return out, nil
}
