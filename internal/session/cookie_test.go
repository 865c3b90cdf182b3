package session_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/session"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

func mustCookies(t testing.TB, keys ...[]byte) *session.Cookies {
	t.Helper()
	c, err := session.NewCookies(session.CookieOptions{Name: "__Host-bff_session", Secure: true, Keys: keys, MaxAge: 12 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCookieRoundTripAndFlags(t *testing.T) {
	c := mustCookies(t, key(1))
	id := session.NewID()
	ck, err := c.New(id)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(ck.Value, id) {
		t.Fatal("the cookie holds the id in the clear")
	}
	got, err := c.ID(ck.Value)
	if err != nil || got != id {
		t.Fatalf("got %q, %v; want %q", got, err, id)
	}
	if !ck.HttpOnly || !ck.Secure || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "" {
		t.Fatalf("got flags %+v, want HttpOnly Secure SameSite=Lax Path=/ no Domain", ck)
	}
	clear := c.Clear()
	if clear.MaxAge >= 0 || clear.Value != "" || clear.Name != "__Host-bff_session" {
		t.Fatalf("clear cookie: got %+v, want an expired empty cookie", clear)
	}
}

func TestCookieRejectsTamperingAndForeignKeys(t *testing.T) {
	c := mustCookies(t, key(1))
	ck, _ := c.New(session.NewID())
	v := []byte(ck.Value)
	v[len(v)/2] ^= 0x01
	other := mustCookies(t, key(2))
	foreign, _ := other.New(session.NewID())
	for name, val := range map[string]string{
		"flipped byte": string(v), "empty": "", "garbage": "not-a-cookie", "other key": foreign.Value,
	} {
		if _, err := c.ID(val); !errors.Is(err, session.ErrBadCookie) {
			t.Errorf("%s: got %v, want ErrBadCookie", name, err)
		}
	}
}

// Keys are newest first: a cookie made under the old key still decodes
// after rotation, and new cookies use the new key.
func TestCookieKeyRotation(t *testing.T) {
	old := mustCookies(t, key(1))
	id := session.NewID()
	ck, _ := old.New(id)
	rotated := mustCookies(t, key(2), key(1))
	if got, err := rotated.ID(ck.Value); err != nil || got != id {
		t.Fatalf("old cookie after rotation: got %q, %v; want %q", got, err, id)
	}
	fresh, _ := rotated.New(id)
	if _, err := old.ID(fresh.Value); err == nil {
		t.Fatal("a cookie made after rotation decoded under the old key only: want the new key used")
	}
	retired := mustCookies(t, key(2))
	if _, err := retired.ID(ck.Value); err == nil {
		t.Fatal("a cookie of a retired key still decodes")
	}
}

func FuzzCookieID(f *testing.F) {
	const issued = "fuzz-issued-session-id"
	c := mustCookies(f, key(1))
	ck, _ := c.New(issued)
	f.Add(ck.Value)
	f.Add("")
	f.Add("MTcwMDAwMDAwMHxhYmN8ZGVm")
	f.Add(strings.Repeat("A", 5000))
	f.Fuzz(func(t *testing.T, v string) {
		// Only cookies this key issued decode, and only to the id issued:
		// anything else would be a forgery.
		if id, err := c.ID(v); err == nil && id != issued {
			t.Fatalf("decoded %q to an id never issued: %q", v, id)
		}
	})
}

// A cookie older than MaxAge is refused, also one that decoded while it
// was fresh.
func TestCookieMaxAge(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	c, err := session.NewCookies(session.CookieOptions{Name: "bff_session", Keys: [][]byte{key(1)}, MaxAge: time.Hour,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ck, _ := c.New("some-session-id")
	if id, err := c.ID(ck.Value); err != nil || id != "some-session-id" {
		t.Fatalf("fresh: got %q %v", id, err)
	}
	now = now.Add(59 * time.Minute)
	if _, err := c.ID(ck.Value); err != nil {
		t.Fatalf("within MaxAge: got %v", err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := c.ID(ck.Value); !errors.Is(err, session.ErrBadCookie) {
		t.Fatalf("past MaxAge: got %v, want ErrBadCookie", err)
	}
	other, _ := session.NewCookies(session.CookieOptions{Name: "bff_login", Keys: [][]byte{key(1)}, MaxAge: time.Hour})
	fresh, _ := c.New("x")
	if _, err := other.ID(fresh.Value); !errors.Is(err, session.ErrBadCookie) {
		t.Fatal("a cookie of another name decoded: the name must be bound")
	}
}

// Named codecs share the keys but not the name: a value opens under its
// own name only, and Issued reports when it was made.
func TestCookieNamed(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	base, err := session.NewCookies(session.CookieOptions{Name: "bff_login", Keys: [][]byte{key(1)}, MaxAge: 10 * time.Minute,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	a, b := base.Named("_a"), base.Named("_b")
	if a.Name() != "bff_login_a" || base.Name() != "bff_login" {
		t.Fatalf("names: %q and %q", a.Name(), base.Name())
	}
	ck, _ := a.New("state-1")
	if ck.Name != "bff_login_a" {
		t.Fatalf("cookie name %q", ck.Name)
	}
	if id, err := a.ID(ck.Value); err != nil || id != "state-1" {
		t.Fatalf("own name: got %q %v", id, err)
	}
	for _, other := range []*session.Cookies{b, base} {
		if _, err := other.ID(ck.Value); !errors.Is(err, session.ErrBadCookie) {
			t.Errorf("a value made as %s opened as %s", a.Name(), other.Name())
		}
	}
	if issued, err := a.Issued(ck.Value); err != nil || !issued.Equal(now) {
		t.Fatalf("Issued: got %v %v, want %v", issued, err, now)
	}
	now = now.Add(11 * time.Minute)
	if _, err := a.Issued(ck.Value); !errors.Is(err, session.ErrBadCookie) {
		t.Fatalf("Issued past MaxAge: got %v, want ErrBadCookie", err)
	}
}
