package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"
)

// The app's state is two files in one directory (-dir): the private key and
// the session. Both are for the user alone: they are written 0600 in a 0700
// directory, and a file others may read is refused rather than used, since
// whoever holds the key and the token is the user to the BFF.
const (
	keyFile     = "key.pem"
	sessionFile = "session.json"
)

// errNoSession is what commands that need a session say before a login.
var errNoSession = errors.New("not logged in: run login first")

// privateFile checks that path is a regular file only its owner may read
// or write: no bit for the group or others. Windows has no such bits; its
// ACLs are left to the user there.
func privateFile(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s); refusing to use it", path, fi.Mode().Type())
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("%s has permissions %#o: others may read it; refusing to use it (chmod 600 %s, or remove it and log in again)",
			path, fi.Mode().Perm(), path)
	}
	return nil
}

// loadOrCreateKey reads the app's P-256 key from path, or creates one there
// (0600) when there is none yet; created says which.
func loadOrCreateKey(path string) (key *ecdsa.PrivateKey, created bool, err error) {
	switch err := privateFile(path); {
	case errors.Is(err, fs.ErrNotExist):
		key, err := createKey(path)
		return key, err == nil, err
	case err != nil:
		return nil, false, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "EC PRIVATE KEY" {
		return nil, false, fmt.Errorf("%s holds no EC PRIVATE KEY", path)
	}
	key, err = x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	if key.Curve != elliptic.P256() {
		return nil, false, fmt.Errorf("%s holds a key on %s; DPoP with ES256 needs P-256", path, key.Curve.Params().Name)
	}
	return key, false, nil
}

func createKey(path string) (*ecdsa.PrivateKey, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	// O_EXCL: two runs at once must not each write a key and each log in
	// with a different one.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := pem.Encode(f, &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return nil, err
	}
	return key, nil
}

// savedSession is session.json: the session a login made. It never leaves
// this file except as the Authorization header to the BFF it names.
type savedSession struct {
	BFF       string    `json:"bff"` // the BFF's URL: the token goes to no other
	UserID    string    `json:"userId,omitempty"`
	Token     string    `json:"sessionToken"`
	TokenType string    `json:"tokenType"` // "DPoP" when the BFF bound it to the key, else "Bearer"
	JKT       string    `json:"jkt"`       // the thumbprint of the key it was bound to
	ExpiresAt time.Time `json:"expiresAt"`
}

// bound says whether the BFF bound the session to the app's key.
func (s *savedSession) bound() bool { return s.TokenType == "DPoP" }

func loadSession(path string) (*savedSession, error) {
	if err := privateFile(path); errors.Is(err, fs.ErrNotExist) {
		return nil, errNoSession
	} else if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s savedSession
	if err := json.Unmarshal(b, &s); err != nil || s.Token == "" {
		return nil, fmt.Errorf("%s is not a saved session; remove it and log in again", path)
	}
	return &s, nil
}

// saveSession writes s to path through a new 0600 file renamed into place,
// so a reader never sees half a session.
func saveSession(path string, s *savedSession) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".session-*") // 0600
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
