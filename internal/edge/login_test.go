package edge

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/session"
)

// evictBindings drops unreadable binding cookies first, then the oldest by
// issue time, whatever their order in the Cookie header, and never more
// than maxBindingDeletions; other cookies are left alone.
func TestEvictBindings(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	binding, err := session.NewCookies(session.CookieOptions{Name: "bff_login", Keys: [][]byte{bytes.Repeat([]byte{7}, 32)},
		MaxAge: 10 * time.Minute, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	// made returns the binding cookie of state s, issued at now+at.
	made := func(s string, at time.Duration) *http.Cookie {
		defer func(n time.Time) { now = n }(now)
		now = now.Add(at)
		ck, _ := binding.Named(bindingSuffix(s)).New(s)
		return ck
	}
	forged := &http.Cookie{Name: "bff_login_forged", Value: "AAAA"}
	sess := &http.Cookie{Name: "bff_session", Value: "x"}
	many := []*http.Cookie{}
	for i := range 12 {
		many = append(many, &http.Cookie{Name: "bff_login_p" + strings.Repeat("x", i), Value: "planted"})
	}
	tests := []struct {
		name    string
		cookies []*http.Cookie
		keep    int
		want    []string // names deleted, in order
		wantN   int      // or only how many, when > 0
	}{
		{"none", []*http.Cookie{sess}, 3, nil, 0},
		{"within the bound", []*http.Cookie{made("a", 0), made("b", time.Second), sess}, 3, nil, 0},
		{"newest first in the header: the oldest goes",
			[]*http.Cookie{made("d", 3*time.Second), made("c", 2*time.Second), made("b", time.Second), made("a", 0)}, 3,
			[]string{"bff_login" + bindingSuffix("a")}, 0},
		{"unreadable ones go before the oldest",
			[]*http.Cookie{made("a", 0), forged, made("b", time.Second), made("c", 2*time.Second)}, 2,
			[]string{"bff_login_forged", "bff_login" + bindingSuffix("a")}, 0},
		{"at most maxBindingDeletions", many, 3, nil, maxBindingDeletions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/auth/login", nil)
			for _, ck := range tt.cookies {
				r.AddCookie(ck)
			}
			var got []string
			for _, del := range evictBindings(r, binding, tt.keep) {
				if del.MaxAge >= 0 || del.Path != "/" || !del.HttpOnly {
					t.Errorf("deletion %v: want MaxAge<0, Path=/, HttpOnly", del)
				}
				got = append(got, del.Name)
			}
			if tt.wantN > 0 {
				if len(got) != tt.wantN {
					t.Fatalf("deleted %d of %d, want %d", len(got), len(tt.cookies), tt.wantN)
				}
				return
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("deleted %v, want %v", got, tt.want)
			}
		})
	}
}

// The suffix is a short cookie-name token, the same for the same state.
func TestBindingSuffix(t *testing.T) {
	for _, s := range []string{"", "abc", strings.Repeat("z", maxStateLen), "\x00;=, \"é"} {
		got := bindingSuffix(s)
		if got != bindingSuffix(s) || len(got) != 9 || got[0] != '_' || strings.ContainsAny(got, ";=, \"\x00") {
			t.Errorf("bindingSuffix(%q) = %q", s, got)
		}
	}
	if bindingSuffix("a") == bindingSuffix("b") {
		t.Error("two states share a suffix")
	}
}

// A login that made a session is counted under the session's method, by
// the same word: the metric's values do not change with the types.
func TestSessionMethod(t *testing.T) {
	for _, m := range []string{session.MethodDev, session.MethodOIDC, session.MethodMobile} {
		if got := sessionMethod(m); string(got) != m {
			t.Errorf("sessionMethod(%q) = %q, want the same word", m, got)
		}
	}
	if got := sessionMethod("carrier-pigeon"); got != login.MethodUnknown {
		t.Errorf("an unknown method is counted as %q, want %q", got, login.MethodUnknown)
	}
}
