package login

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/kv"
)

// sizeStore records the size of what is stored.
type sizeStore struct {
	Store
	sets, largest int
}

func (s *sizeStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	s.sets++
	s.largest = max(s.largest, len(value))
	return s.Store.Set(ctx, key, value, ttl)
}

// A login start is unauthenticated and stores a pending login for
// StateTTL: Begin bounds what it stores (returnTo at most 512 bytes, a
// native app's state at most 128 printable characters) whatever its
// caller checked, refusing the rest with ErrBadRequest and storing nothing.
func TestBeginBoundsWhatItStores(t *testing.T) {
	is := newIssuer(t)
	st := &sizeStore{Store: kv.NewMemory(nil)}
	p, err := New(context.Background(), Options{Issuer: is.srv.URL, ClientID: "bff", RedirectURL: "http://x/cb", UserIDClaim: "sub",
		Store: st, EncryptionKey: make([]byte, 32), MobileRedirectURIs: []string{"com.example.app:/oauth/cb"}})
	if err != nil {
		t.Fatal(err)
	}
	mobile := func(state string) *Mobile {
		return &Mobile{RedirectURI: "com.example.app:/oauth/cb", CodeChallenge: S256(strings.Repeat("v", 43)), AppState: state}
	}
	longest := "/" + strings.Repeat("a", 511)
	tests := []struct {
		name     string
		returnTo string
		mobile   *Mobile
		want     error // nil: started
	}{
		{name: "browser", returnTo: "/accounts"},
		{name: "browser, empty returnTo", returnTo: ""},
		{name: "browser, returnTo of 512 bytes", returnTo: longest},
		{name: "browser, returnTo of 513 bytes", returnTo: longest + "b", want: ErrBadRequest},
		{name: "browser, returnTo of 2048 bytes", returnTo: "/" + strings.Repeat("a", 2047), want: ErrBadRequest},
		{name: "browser, returnTo to another origin", returnTo: "//evil.example", want: ErrBadRequest},
		{name: "mobile without state", returnTo: "/", mobile: mobile("")},
		{name: "mobile, state of 128", returnTo: longest, mobile: mobile(strings.Repeat("s", 128))},
		{name: "mobile, state of 129", returnTo: "/", mobile: mobile(strings.Repeat("s", 129)), want: ErrBadRequest},
		{name: "mobile, state of 512", returnTo: "/", mobile: mobile(strings.Repeat("s", 512)), want: ErrBadRequest},
		{name: "mobile, state with a newline", returnTo: "/", mobile: mobile("a\nb"), want: ErrBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := st.sets
			authURL, state, err := p.Begin(context.Background(), tc.returnTo, tc.mobile)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || authURL != "" || state != "" {
					t.Fatalf("got %q, %q, %v; want %v", authURL, state, err, tc.want)
				}
				if st.sets != before {
					t.Fatalf("got %d records stored, want none", st.sets-before)
				}
				return
			}
			if err != nil || authURL == "" || state == "" {
				t.Fatalf("got %q, %q, %v; want the login started", authURL, state, err)
			}
		})
	}
	// The largest pending login (a 512-byte returnTo and a 128-byte state)
	// stays well under a kilobyte, sealed.
	if st.largest > 1024 {
		t.Fatalf("got a pending login of %d bytes stored, want at most 1024", st.largest)
	}
	t.Logf("largest pending login stored: %d bytes", st.largest)
}

// A step-up asks the provider for a fresh login (prompt=login, max_age) of
// the policy's class (acr_values) and carries the payment as RFC 9396
// authorization_details; a provider whose discovery document lists no
// payment_initiation type does not support it.
func TestBeginStepUp(t *testing.T) {
	is := newIssuer(t)
	p, err := New(context.Background(), Options{Issuer: is.srv.URL, ClientID: "bff", RedirectURL: "http://x/cb", UserIDClaim: "sub",
		Store: kv.NewMemory(nil), EncryptionKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	if p.SupportsDetails("payment_initiation") {
		t.Fatal("a discovery document without authorization_details_types_supported was taken to support payment_initiation")
	}
	details := `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"1000.00"}}]`
	authURL, state, err := p.BeginStepUp(context.Background(), StepUp{Ref: "ref", SessionRef: "handle", LoginHint: "alice",
		ACRValues: []string{"urn:bff:acr:mfa", "urn:bff:acr:hwk"}, MaxAge: 5 * time.Minute, Details: []byte(details)}, "/pay", nil)
	if err != nil || state == "" {
		t.Fatalf("BeginStepUp: %v", err)
	}
	u, _ := url.Parse(authURL)
	q := u.Query()
	for k, want := range map[string]string{"prompt": "login", "max_age": "300", "acr_values": "urn:bff:acr:mfa urn:bff:acr:hwk",
		"login_hint": "alice", "authorization_details": details, "code_challenge_method": "S256", "state": state} {
		if got := q.Get(k); got != want {
			t.Errorf("%s: got %q, want %q", k, got, want)
		}
	}
	if q.Get("nonce") == "" || q.Get("code_challenge") == "" {
		t.Errorf("the step-up %s lacks a nonce or PKCE", authURL)
	}
	// A login is no step-up: none of those parameters.
	loginURL, _, _ := p.Begin(context.Background(), "/", nil)
	if lq, _ := url.Parse(loginURL); lq.Query().Has("authorization_details") || lq.Query().Has("prompt") || lq.Query().Has("acr_values") {
		t.Errorf("a login carries step-up parameters: %s", loginURL)
	}
}
