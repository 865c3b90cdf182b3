// Package seal is the one AES-256-GCM box the BFF seals its records with:
// tokens and idempotency records in Redis, pending logins, and the session
// cookie. A sealed value is nonce | ciphertext, bound to associated data
// (the key it is stored under, the user, the cookie's name) so it cannot be
// moved elsewhere and still open.
//
// A Box seals under one key and opens under that key or any older one it
// was given, so the key can rotate while values sealed before still open.
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

// Box seals values under its first key and opens them under any of its
// keys. Safe for concurrent use.
type Box struct {
	aead  cipher.AEAD   // seals and opens
	older []cipher.AEAD // only open
}

// New returns a Box that seals under key and also opens values sealed
// under the older keys. Every key is 32 bytes.
func New(key []byte, older ...[]byte) (*Box, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	b := &Box{aead: aead}
	for _, k := range older {
		a, err := newAEAD(k)
		if err != nil {
			return nil, err
		}
		b.older = append(b.older, a)
	}
	return b, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
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
	return aead, nil
}

// Derive returns a Box for keys derived from master (and from each older
// master) with HKDF-SHA256 under label, so one configured key serves
// several purposes safely.
func Derive(master []byte, label string, older ...[]byte) (*Box, error) {
	k, err := derive(master, label)
	if err != nil {
		return nil, err
	}
	ks := make([][]byte, 0, len(older))
	for _, m := range older {
		o, err := derive(m, label)
		if err != nil {
			return nil, err
		}
		ks = append(ks, o)
	}
	return New(k, ks...)
}

func derive(master []byte, label string) ([]byte, error) {
	k, err := hkdf.Key(sha256.New, master, nil, label, 32)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return k, nil
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

// Open authenticates nonce | ciphertext against aad under the current key,
// then each older one, and appends the plaintext to dst, or returns ErrOpen.
func (b *Box) Open(dst, sealed, aad []byte) ([]byte, error) {
	ns := b.aead.NonceSize()
	if len(sealed) < ns+b.aead.Overhead() {
		return nil, ErrOpen
	}
	if out, err := b.aead.Open(dst, sealed[:ns], sealed[ns:], aad); err == nil {
		return out, nil
	}
	for _, a := range b.older {
		if out, err := a.Open(dst, sealed[:ns], sealed[ns:], aad); err == nil {
			return out, nil
		}
	}
	return nil, ErrOpen
}
