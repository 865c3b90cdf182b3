package seal

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealOpen(t *testing.T) {
	a, _ := Derive(make([]byte, 32), "purpose a")
	b, _ := Derive(make([]byte, 32), "purpose b")
	sealed := a.Seal([]byte("prefix|"), []byte("secret value"), []byte("key-1"))
	if !bytes.HasPrefix(sealed, []byte("prefix|")) || bytes.Contains(sealed, []byte("secret value")) {
		t.Fatalf("got %q: want the prefix kept and the value hidden", sealed)
	}
	body := sealed[len("prefix|"):]
	if got, err := a.Open(nil, body, []byte("key-1")); err != nil || string(got) != "secret value" {
		t.Fatalf("got %q, %v", got, err)
	}
	if len(body) != len("secret value")+a.Overhead() {
		t.Fatalf("got length %d, want plaintext + Overhead", len(body))
	}
	flipped := bytes.Clone(body)
	flipped[len(flipped)-1] ^= 1
	for name, tc := range map[string]struct {
		box *Box
		val []byte
		aad string
	}{
		"other aad": {a, body, "key-2"}, "other key": {b, body, "key-1"},
		"tampered": {a, flipped, "key-1"}, "truncated": {a, body[:5], "key-1"},
	} {
		if _, err := tc.box.Open(nil, tc.val, []byte(tc.aad)); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: got %v, want ErrOpen", name, err)
		}
	}
	if _, err := New([]byte("short")); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

// A rotated box seals under the new key and still opens what the old key
// sealed; a box without the old key does not.
func TestRotation(t *testing.T) {
	oldMaster, newMaster := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	before, _ := Derive(oldMaster, "purpose")
	during, err := Derive(newMaster, "purpose", oldMaster)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := Derive(newMaster, "purpose")
	sealedOld := before.Seal(nil, []byte("old value"), []byte("k"))
	if got, err := during.Open(nil, sealedOld, []byte("k")); err != nil || string(got) != "old value" {
		t.Fatalf("the rotated box opened the old value as %q, %v", got, err)
	}
	if _, err := during.Open(nil, sealedOld, []byte("other")); !errors.Is(err, ErrOpen) {
		t.Fatalf("an older key ignored the associated data: %v", err)
	}
	sealedNew := during.Seal(nil, []byte("new value"), []byte("k"))
	if _, err := before.Open(nil, sealedNew, []byte("k")); !errors.Is(err, ErrOpen) {
		t.Fatalf("the rotated box sealed under the old key: %v", err)
	}
	if got, err := after.Open(nil, sealedNew, []byte("k")); err != nil || string(got) != "new value" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := after.Open(nil, sealedOld, []byte("k")); !errors.Is(err, ErrOpen) {
		t.Fatalf("a box without the old key opened its value: %v", err)
	}
	if _, err := New(newMaster, []byte("short")); err == nil {
		t.Fatal("a 5-byte older key was accepted")
	}
}
