package login

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestCheckReturnTo(t *testing.T) {
	ok := []string{"", "/", "/accounts", "/a/b?c=d&e=%2F#frag", "/caf%C3%A9", "/a//b"}
	bad := []string{
		"https://evil.example/", "//evil.example", "/\\evil.example", "\\\\evil.example", "/%2F%2Fevil.example",
		"/%2fevil.example", "/%5cevil.example", "evil.example", "javascript:alert(1)", "/a\nb", "/a%0Ab",
		"/a\\b", "http:/evil", "/%zz", strings.Repeat("/a", 2000),
	}
	for _, s := range ok {
		if _, err := CheckReturnTo(s); err != nil {
			t.Errorf("CheckReturnTo(%q): got %v, want ok", s, err)
		}
	}
	for _, s := range bad {
		if _, err := CheckReturnTo(s); !errors.Is(err, ErrBadRequest) {
			t.Errorf("CheckReturnTo(%q): got %v, want ErrBadRequest", s, err)
		}
	}
	if got, _ := CheckReturnTo(""); got != "/" {
		t.Errorf("empty returnTo: got %q, want /", got)
	}
}

// FuzzCheckReturnTo: whatever passes resolves, against the BFF's origin, to
// the BFF's origin.
func FuzzCheckReturnTo(f *testing.F) {
	for _, s := range []string{"/", "/a?b#c", "//evil", "/\\evil", "/%2F%2Fevil", "https://x", "/%5c%5cevil", "/\t/evil"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://app.example.com/start")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := CheckReturnTo(s)
		if err != nil {
			return
		}
		u, err := base.Parse(got)
		if err != nil {
			t.Fatalf("accepted %q which does not parse: %v", got, err)
		}
		if u.Scheme != "https" || u.Host != "app.example.com" {
			t.Fatalf("accepted %q which resolves to %s", s, u)
		}
		// What a browser would do after decoding once must stay here too.
		if dec, err := url.PathUnescape(got); err == nil {
			if v, err := base.Parse(strings.ReplaceAll(dec, "\\", "/")); err == nil && v.Host != "" && v.Host != "app.example.com" {
				t.Fatalf("accepted %q whose decoded form resolves to %s", s, v)
			}
		}
	})
}

func TestCheckRedirectURI(t *testing.T) {
	allowed := []string{"com.example.app:/oauth/cb", "https://app.example.com/mobile-cb"}
	for _, s := range allowed {
		if err := CheckRedirectURI(s, allowed); err != nil {
			t.Errorf("%q: got %v, want ok", s, err)
		}
	}
	for _, s := range []string{"", "com.example.app:/oauth/cb/", "com.example.app:/oauth/cb?x=1", "https://app.example.com/mobile-cb#f",
		"HTTPS://app.example.com/mobile-cb", "com.evil.app:/oauth/cb", "https://app.example.com.evil/mobile-cb"} {
		if err := CheckRedirectURI(s, allowed); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: got %v, want ErrBadRequest", s, err)
		}
	}
}

func FuzzCheckRedirectURI(f *testing.F) {
	allowed := []string{"com.example.app:/oauth/cb", "https://app.example.com/mobile-cb"}
	for _, s := range append(allowed, "com.example.app:/oauth/cb/", "x") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckRedirectURI(s, allowed) == nil && s != allowed[0] && s != allowed[1] {
			t.Fatalf("accepted %q, which is not registered", s)
		}
	})
}

func TestPKCE(t *testing.T) {
	// RFC 7636, appendix B.
	if got := S256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"); got != "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" {
		t.Fatalf("got %q", got)
	}
	if err := CheckCodeChallenge("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "S256"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range [][2]string{
		{"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM", "plain"},
		{"short", "S256"},
		{"E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw+cM", ""},
	} {
		if err := CheckCodeChallenge(tc[0], tc[1]); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%v: got %v, want ErrBadRequest", tc, err)
		}
	}
	if validVerifier("too-short") || !validVerifier(strings.Repeat("a", 43)) || validVerifier(strings.Repeat("a", 129)) {
		t.Fatal("verifier length rules")
	}
}
