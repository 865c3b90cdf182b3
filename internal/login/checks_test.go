package login

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestCheckReturnTo(t *testing.T) {
	ok := []string{"", "/", "/accounts", "/a/b?c=d&e=%2F#frag", "/caf%C3%A9"}
	bad := []string{
		"https://evil.example/", "//evil.example", "/\\evil.example", "\\\\evil.example", "/%2F%2Fevil.example",
		"/%2fevil.example", "/%5cevil.example", "evil.example", "javascript:alert(1)", "/a\nb", "/a%0Ab",
		"/a\\b", "http:/evil", "/%zz", strings.Repeat("/a", 2000),
		"/a//b", // "//" anywhere in the path: see TestCheckReturnToDotSegments
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

// TestCheckReturnToLength: a returnTo is stored with every pending login,
// which anyone may start: at most 512 bytes.
func TestCheckReturnToLength(t *testing.T) {
	path := func(n int) string { return "/" + strings.Repeat("a", n-1) }
	tests := []struct {
		returnTo string
		ok       bool
	}{
		{path(1), true},
		{path(511), true},
		{path(512), true},
		{path(500) + "?q=" + strings.Repeat("b", 9), true}, // 512 with the query
		{path(513), false},
		{path(500) + "?q=" + strings.Repeat("b", 10), false},
		{path(500) + "#" + strings.Repeat("f", 12), false},
		{path(2048), false}, // the former bound
	}
	for _, tc := range tests {
		got, err := CheckReturnTo(tc.returnTo)
		switch {
		case tc.ok && (err != nil || got != tc.returnTo):
			t.Errorf("CheckReturnTo(%d bytes): got %v, want it accepted", len(tc.returnTo), err)
		case !tc.ok && !errors.Is(err, ErrBadRequest):
			t.Errorf("CheckReturnTo(%d bytes): got %q, %v; want ErrBadRequest", len(tc.returnTo), got, err)
		case !tc.ok && !strings.Contains(err.Error(), "longer than 512 bytes"):
			t.Errorf("CheckReturnTo(%d bytes): got %q, want it to say it is longer than 512 bytes", len(tc.returnTo), err)
		}
	}
}

// TestCheckAppState: a native app's state is stored with its pending
// login and echoed back: at most 128 characters of RFC 6749's VSCHAR
// (printable ASCII).
func TestCheckAppState(t *testing.T) {
	tests := []struct {
		state string
		ok    bool
	}{
		{"", true},
		{"app-state-1", true},
		{"dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", true},
		{" !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", true}, // space and punctuation: all of %x20-7E is allowed
		{strings.Repeat("s", 128), true},
		{strings.Repeat("s", 129), false},
		{strings.Repeat("s", 512), false}, // the former bound
		{strings.Repeat("s", 513), false},
		{"a\nb", false},
		{"a\tb", false},
		{"a\x00b", false},
		{"a\x7fb", false},
		{"caf\u00e9", false},
		{"\xff", false},
	}
	for _, tc := range tests {
		err := CheckAppState(tc.state)
		if got := err == nil; got != tc.ok || (!tc.ok && !errors.Is(err, ErrBadRequest)) {
			t.Errorf("CheckAppState(%q): got %v, want accepted %v (else ErrBadRequest)", tc.state, err, tc.ok)
		}
	}
}

// FuzzCheckAppState: whatever passes is at most 128 bytes of %x20-7E.
func FuzzCheckAppState(f *testing.F) {
	for _, s := range []string{"", "app-state-1", strings.Repeat("s", 128), strings.Repeat("s", 129), "a\nb", "caf\u00e9", "~ "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := CheckAppState(s)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("refused %q with %v, want ErrBadRequest", s, err)
			}
			return
		}
		if len(s) > maxAppState {
			t.Fatalf("accepted %d bytes, want at most %d", len(s), maxAppState)
		}
		for i := range len(s) {
			if s[i] < 0x20 || s[i] > 0x7e {
				t.Fatalf("accepted %q which holds byte %#x", s, s[i])
			}
		}
	})
}

// TestCheckReturnToDotSegments: a browser resolves dot segments and empty
// segments after decoding, so "/.//evil.example" becomes "//evil.example",
// another origin. A returnTo path with a dot segment, "//", a backslash or
// an encoded "/", "\" or "." is refused; queries and fragments, and dots
// inside segments, are not affected.
func TestCheckReturnToDotSegments(t *testing.T) {
	tests := []struct {
		returnTo string
		ok       bool
	}{
		{"/.//evil.example", false},
		{"/%2e//evil.example", false},
		{"/%2E//evil.example", false},
		{"/a/./b", false},
		{"/a/../b", false},
		{"/%2E%2E/x", false},
		{"/.%2e/x", false},
		{"/a/.", false},
		{"/a/..", false},
		{"/..", false},
		{"/.", false},
		{"/a%2fb", false},
		{"/a%2Fb", false},
		{"/a%5cb", false},
		{"/a%5Cb", false},
		{"/a%2eb", false},
		{"/a%252e%252e/x", false}, // encoded twice
		{"/\\evil", false},
		{"/a/..\\evil", false},
		{"/a//b", false},
		{"/a/b//", false},
		{"/a/.//evil.example?x#y", false},
		{"/accounts?tab=2#x", true},
		{"/a.b/c.d", true},
		{"/a/...", true},
		{"/.well-known/x", true},
		{"/a/b.", true},
		{"/a?next=/./..//x&e=%2F%2e#/../x", true}, // the query and fragment are not the path
		{"/caf%C3%A9", true},
		{"/", true},
	}
	for _, tc := range tests {
		got, err := CheckReturnTo(tc.returnTo)
		switch {
		case tc.ok && (err != nil || got != tc.returnTo):
			t.Errorf("CheckReturnTo(%q): got %q, %v; want it accepted", tc.returnTo, got, err)
		case !tc.ok && !errors.Is(err, ErrBadRequest):
			t.Errorf("CheckReturnTo(%q): got %q, %v; want ErrBadRequest", tc.returnTo, got, err)
		}
	}
}

// FuzzCheckReturnTo: whatever passes resolves, against the BFF's origin, to
// the BFF's origin, and its path, decoded or not, resolves to itself: no dot
// segment, empty segment, backslash or encoded separator for a browser to
// rewrite.
func FuzzCheckReturnTo(f *testing.F) {
	for _, s := range []string{"/", "/a?b#c", "//evil", "/\\evil", "/%2F%2Fevil", "https://x", "/%5c%5cevil", "/\t/evil",
		"/.//evil.example", "/%2e//evil.example", "/a/../b", "/%2E%2E/x", "/a%2fb", "/accounts?tab=2#x", "/a.b/c.d"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://app.example.com/start")
	f.Fuzz(func(t *testing.T, s string) {
		got, err := CheckReturnTo(s)
		if err != nil {
			return
		}
		if len(got) > maxReturnTo {
			t.Fatalf("accepted %d bytes, want at most %d", len(got), maxReturnTo)
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
		// Its path, raw and decoded once, is already resolved: removing
		// dot segments leaves it as it is, and it holds no "//", "\\" or
		// encoded "/", "\\" or ".".
		path, _, _ := strings.Cut(got, "#")
		path, _, _ = strings.Cut(path, "?")
		dec, err := url.PathUnescape(path)
		if err != nil {
			t.Fatalf("accepted %q whose path does not decode: %v", s, err)
		}
		for _, p := range []string{path, dec} {
			if r := base.ResolveReference(&url.URL{Path: p}); r.Path != p {
				t.Fatalf("accepted %q whose path %q resolves to %q", s, p, r.Path)
			}
			l := strings.ToLower(p)
			for _, bad := range []string{"//", "\\", "%2f", "%5c", "%2e"} {
				if strings.Contains(l, bad) {
					t.Fatalf("accepted %q whose path %q holds %q", s, p, bad)
				}
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
