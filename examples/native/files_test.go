package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestKeyFileIsCreatedForItsOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", keyFile)
	key, created, err := loadOrCreateKey(path)
	if err != nil || !created {
		t.Fatalf("first run: created %v, err %v; want a new key", created, err)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s has permissions %#o, want %#o", p, got, want)
		}
	}
	again, created, err := loadOrCreateKey(path)
	if err != nil || created {
		t.Fatalf("second run: created %v, err %v; want the same key read back", created, err)
	}
	if !again.Equal(key) {
		t.Fatal("the key read back is not the key written")
	}
}

// A key or session file that the group or others may read is refused,
// not used nor repaired: someone may have read it already.
func TestFilesOthersMayReadAreRefused(t *testing.T) {
	dir := t.TempDir()
	keyPath := filepath.Join(dir, keyFile)
	if _, _, err := loadOrCreateKey(keyPath); err != nil {
		t.Fatal(err)
	}
	sessPath := filepath.Join(dir, sessionFile)
	if err := saveSession(sessPath, &savedSession{BFF: "http://localhost:8080", Token: "t", TokenType: "DPoP", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(sessPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the session file: %v, %v; want 0600", fi.Mode(), err)
	}
	load := map[string]func() error{
		keyPath:  func() error { _, _, err := loadOrCreateKey(keyPath); return err },
		sessPath: func() error { _, err := loadSession(sessPath); return err },
	}
	for path, open := range load {
		for _, tc := range []struct {
			mode os.FileMode
			ok   bool
		}{
			{0o600, true}, {0o400, true}, {0o700, true},
			{0o640, false}, {0o604, false}, {0o644, false}, {0o660, false}, {0o666, false}, {0o610, false}, {0o601, false},
		} {
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			err := open()
			if tc.ok && err != nil {
				t.Errorf("%s at %#o: %v, want it read", filepath.Base(path), tc.mode, err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "refusing")) {
				t.Errorf("%s at %#o: got %v, want it refused", filepath.Base(path), tc.mode, err)
			}
		}
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A refused key file is left as it was: no new key is written over it.
	before, _ := os.ReadFile(keyPath)
	_ = os.Chmod(keyPath, 0o644)
	_, _, _ = loadOrCreateKey(keyPath)
	after, _ := os.ReadFile(keyPath)
	if string(before) != string(after) {
		t.Fatal("a refused key file was replaced")
	}
}

func TestKeyFileThatIsALinkIsRefused(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "elsewhere.pem")
	if _, _, err := loadOrCreateKey(real); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, keyFile)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadOrCreateKey(link); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("got %v, want the link refused", err)
	}
}

func TestNoSessionFileIsNotLoggedIn(t *testing.T) {
	if _, err := loadSession(filepath.Join(t.TempDir(), sessionFile)); !errors.Is(err, errNoSession) {
		t.Fatalf("got %v, want errNoSession", err)
	}
}
