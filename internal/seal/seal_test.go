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
