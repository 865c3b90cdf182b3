package login

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/kv"
)

// issuer is a minimal discovery document and JWKS for signing test tokens;
// the full provider is exercised end to end in e2e/.
type issuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: key}
	mux := http.NewServeMux()
	is.srv = httptest.NewServer(mux)
	t.Cleanup(is.srv.Close)
	serveDiscovery(mux, is.srv.URL)
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	})
	return is
}

// serveDiscovery serves a minimal discovery document of the issuer at url.
func serveDiscovery(mux *http.ServeMux, url string) {
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": url, "authorization_endpoint": url + "/auth", "token_endpoint": url + "/token",
			"jwks_uri": url + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
}

func (is *issuer) sign(t *testing.T, claims map[string]any) string {
	return signWith(t, is.key, "k1", claims)
}

func TestVerifyLogoutToken(t *testing.T) {
	is := newIssuer(t)
	p, err := New(context.Background(), Options{Issuer: is.srv.URL, ClientID: "bff", RedirectURL: "http://x/cb", UserIDClaim: "sub", Store: kv.NewMemory(nil), EncryptionKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	base := func() map[string]any {
		return map[string]any{
			"iss": is.srv.URL, "aud": "bff", "iat": now, "exp": now + 120, "jti": randomJTI(), "sub": "u1", "sid": "s1",
			"events": map[string]any{backchannelEvent: map[string]any{}},
		}
	}
	ctx := context.Background()
	good := is.sign(t, base())
	sub, sid, err := p.VerifyLogoutToken(ctx, good)
	if err != nil || sub != "u1" || sid != "s1" {
		t.Fatalf("got %q %q %v, want u1 s1", sub, sid, err)
	}
	if _, _, err := p.VerifyLogoutToken(ctx, good); !errors.Is(err, ErrLogoutToken) {
		t.Fatalf("replay: got %v, want ErrLogoutToken", err)
	}
	cases := map[string]func(map[string]any){
		"no event":       func(c map[string]any) { delete(c, "events") },
		"with a nonce":   func(c map[string]any) { c["nonce"] = "n" },
		"other audience": func(c map[string]any) { c["aud"] = "someone-else" },
		"other issuer":   func(c map[string]any) { c["iss"] = "https://evil.example" },
		"expired":        func(c map[string]any) { c["exp"] = now - 3600 },
		"no sub, no sid": func(c map[string]any) { delete(c, "sub"); delete(c, "sid") },
		"no jti":         func(c map[string]any) { delete(c, "jti") },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			c := base()
			mutate(c)
			if _, _, err := p.VerifyLogoutToken(ctx, is.sign(t, c)); !errors.Is(err, ErrLogoutToken) {
				t.Fatalf("got %v, want ErrLogoutToken", err)
			}
		})
	}
	t.Run("sid alone", func(t *testing.T) {
		c := base()
		delete(c, "sub")
		if _, sid, err := p.VerifyLogoutToken(ctx, is.sign(t, c)); err != nil || sid != "s1" {
			t.Fatalf("got %q %v", sid, err)
		}
	})
	t.Run("not signed by the provider", func(t *testing.T) {
		other := newIssuer(t)
		c := base()
		if _, _, err := p.VerifyLogoutToken(ctx, other.sign(t, c)); !errors.Is(err, ErrLogoutToken) {
			t.Fatalf("got %v, want ErrLogoutToken", err)
		}
	})
}

func randomJTI() string { return random() }

// A mobile code issued before redis.encryption_key rotated is still
// redeemed by an instance that has the old key among its decryption keys,
// and refused (as an invalid grant) by one that does not.
func TestMobileCodeAcrossKeyRotation(t *testing.T) {
	is := newIssuer(t)
	store := kv.NewMemory(nil)
	oldKey, newKey := make([]byte, 32), []byte("0123456789abcdef0123456789abcdef")
	provider := func(key []byte, older ...[]byte) *Provider {
		p, err := New(context.Background(), Options{Issuer: is.srv.URL, ClientID: "bff", RedirectURL: "http://x/cb",
			UserIDClaim: "sub", Store: store, EncryptionKey: key, DecryptionKeys: older})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	before, rotated, forgot := provider(oldKey), provider(newKey, oldKey), provider(newKey)
	verifier := "verifier-0123456789-0123456789-0123456789-0123"
	issue := func() string {
		t.Helper()
		to, err := before.IssueMobileCode(context.Background(), Result{UserID: "u1", Sub: "s1",
			Mobile: &Mobile{RedirectURI: "app://cb", CodeChallenge: S256(verifier)}})
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(to)
		return u.Query().Get("code")
	}
	res, err := rotated.RedeemMobileCode(context.Background(), issue(), verifier)
	if err != nil || res.UserID != "u1" {
		t.Fatalf("with the old key as a decryption key: got %+v, %v; want user u1", res, err)
	}
	if _, err := forgot.RedeemMobileCode(context.Background(), issue(), verifier); !errors.Is(err, ErrInvalidGrant) {
		t.Fatalf("without the old key: got %v, want ErrInvalidGrant", err)
	}
}
