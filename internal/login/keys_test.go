package login

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

// rotatingIssuer serves a key set it can change, and counts its fetches.
type rotatingIssuer struct {
	srv     *httptest.Server
	mu      sync.Mutex
	keys    map[string]*rsa.PrivateKey
	fetches atomic.Int64
}

func newRotatingIssuer(t *testing.T) *rotatingIssuer {
	is := &rotatingIssuer{keys: map[string]*rsa.PrivateKey{}}
	is.addKey(t, "k1")
	mux := http.NewServeMux()
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	serveDiscovery(mux, is.srv.URL)
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		var set jose.JSONWebKeySet
		for kid, k := range is.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
		}
		_ = json.NewEncoder(w).Encode(set)
	})
	return is
}

func (is *rotatingIssuer) addKey(t *testing.T, kid string) *rsa.PrivateKey {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	is.keys[kid] = key
	is.mu.Unlock()
	return key
}

func signWith(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	return signTyped(t, jose.RS256, "logout+jwt", key, kid, claims)
}

// signTyped is a JWS of claims signed by key (kid) with alg and typ.
func signTyped(t *testing.T, alg jose.SignatureAlgorithm, typ jose.ContentType, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType(typ))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(claims)
	obj, err := signer.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := obj.CompactSerialize()
	return s
}

// Forged logout tokens do not make the BFF fetch the provider's keys:
// one with a known key id that does not verify costs no fetch; ones with
// unknown key ids cost at most one fetch per KeyRefetchInterval, however
// many and however parallel. A real rotation (a new key id, later than
// the interval) is fetched and verifies.
func TestForgedTokensDoNotFetchKeys(t *testing.T) {
	is := newRotatingIssuer(t)
	clock := testclock.New(time.Now())
	observed := &fetchCounter{}
	p, err := New(context.Background(), Options{Issuer: is.srv.URL, ClientID: "bff", RedirectURL: "http://x/cb", UserIDClaim: "sub",
		Store: kv.NewMemory(nil), EncryptionKey: make([]byte, 32), Now: clock.Now, Observe: observed})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claims := func() map[string]any { return logoutClaims(is.srv.URL, clock.Now()) }
	is.mu.Lock()
	k1 := is.keys["k1"]
	is.mu.Unlock()
	if _, _, err := p.VerifyLogoutToken(ctx, signWith(t, k1, "k1", claims())); err != nil {
		t.Fatalf("a genuine token: %v", err)
	}
	if got := is.fetches.Load(); got != 1 {
		t.Fatalf("%d fetches for the first token, want 1", got)
	}

	attacker, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	// 50 forged with the known key id: refused, no fetch.
	for range 50 {
		if _, _, err := p.VerifyLogoutToken(ctx, signWith(t, attacker, "k1", claims())); !errors.Is(err, ErrLogoutToken) {
			t.Fatalf("forged with a known kid: got %v, want ErrLogoutToken", err)
		}
	}
	if got := is.fetches.Load(); got != 1 {
		t.Fatalf("%d fetches after 50 forged tokens with a known kid, want still 1", got)
	}
	// 200 in parallel with unknown key ids, after the interval: one fetch.
	clock.Advance(KeyRefetchInterval)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			tok := signWith(t, attacker, "forged-"+randomJTI()[:8]+string(rune('a'+i%26)), claims())
			if _, _, err := p.VerifyLogoutToken(ctx, tok); !errors.Is(err, ErrLogoutToken) {
				t.Errorf("forged with an unknown kid: got %v, want ErrLogoutToken", err)
			}
		})
	}
	wg.Wait()
	if got := is.fetches.Load(); got != 2 {
		t.Fatalf("%d fetches after 200 parallel forged tokens with unknown kids, want 2 (one more)", got)
	}
	// Within the interval, a genuinely new key is not fetched yet ...
	k2 := is.addKey(t, "k2")
	if _, _, err := p.VerifyLogoutToken(ctx, signWith(t, k2, "k2", claims())); !errors.Is(err, ErrLogoutToken) {
		t.Fatalf("a new key within the interval: got %v, want ErrLogoutToken (no fetch yet)", err)
	}
	// ... and after it, it is, once.
	clock.Advance(KeyRefetchInterval)
	if _, _, err := p.VerifyLogoutToken(ctx, signWith(t, k2, "k2", claims())); err != nil {
		t.Fatalf("a rotated key after the interval: %v", err)
	}
	if got := is.fetches.Load(); got != 3 {
		t.Fatalf("%d fetches, want 3", got)
	}
	if got := observed.n.Load(); got != 3 {
		t.Fatalf("KeysFetched called %d times, want 3", got)
	}
}

// fetchCounter is a login.Observer counting the fetches of the keys.
type fetchCounter struct{ n atomic.Int64 }

func (c *fetchCounter) KeysFetched() { c.n.Add(1) }

// A provider that names no key id and replaces its key: the first token
// under the new key that the cached one does not verify fetches the keys
// again (once per interval), and verifies; forged kid-less tokens cost at
// most that one fetch per interval.
func TestKidlessKeyRotationIsFetched(t *testing.T) {
	is := newRotatingIssuer(t)
	is.mu.Lock()
	delete(is.keys, "k1")
	is.mu.Unlock()
	old := is.addKey(t, "")
	clock := testclock.New(time.Now())
	p, err := New(context.Background(), Options{Issuer: is.srv.URL, ClientID: "bff", RedirectURL: "http://x/cb", UserIDClaim: "sub",
		Store: kv.NewMemory(nil), EncryptionKey: make([]byte, 32), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	claims := func() map[string]any { return logoutClaims(is.srv.URL, clock.Now()) }
	if _, _, err := p.VerifyLogoutToken(ctx, signWith(t, old, "", claims())); err != nil {
		t.Fatalf("a kid-less token under the provider's key: %v", err)
	}
	attacker, _ := rsa.GenerateKey(rand.Reader, 2048)
	for range 20 {
		if _, _, err := p.VerifyLogoutToken(ctx, signWith(t, attacker, "", claims())); !errors.Is(err, ErrLogoutToken) {
			t.Fatalf("a forged kid-less token: got %v", err)
		}
	}
	if got := is.fetches.Load(); got != 1 {
		t.Fatalf("%d fetches after 20 forged kid-less tokens within the interval, want 1", got)
	}
	// The provider replaces its only key.
	is.mu.Lock()
	delete(is.keys, "")
	is.mu.Unlock()
	next := is.addKey(t, "")
	clock.Advance(KeyRefetchInterval)
	if _, _, err := p.VerifyLogoutToken(ctx, signWith(t, next, "", claims())); err != nil {
		t.Fatalf("a kid-less token under the replaced key, after the interval: %v", err)
	}
	if got := is.fetches.Load(); got != 2 {
		t.Fatalf("%d fetches, want 2", got)
	}
}

// logoutClaims are a valid logout token's claims from issuer at now.
func logoutClaims(issuer string, now time.Time) map[string]any {
	return map[string]any{"iss": issuer, "aud": "bff", "iat": now.Unix(), "exp": now.Unix() + 120, "jti": randomJTI(), "sub": "u1",
		"events": map[string]any{backchannelEvent: map[string]any{}}}
}
