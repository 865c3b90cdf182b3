package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// checkedProof is what checkProof found in a proof: its header's key and
// its claims.
type checkedProof struct {
	jwk    jose.JSONWebKey
	claims map[string]any
}

// checkProof verifies a DPoP proof as RFC 9449, 4.3 has a server do it: one
// JWS, typ dpop+jwt, alg ES256, a public jwk in the header whose signature
// it carries, and htm and htu naming this request. It fails t otherwise.
func checkProof(t *testing.T, proof, method, wantHTU string) checkedProof {
	t.Helper()
	p, err := verifyProof(proof, method, wantHTU)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// verifyProof is checkProof for a server's goroutine: it returns what is
// wrong instead of failing a test.
func verifyProof(proof, method, wantHTU string) (checkedProof, error) {
	jws, err := jose.ParseSigned(proof, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return checkedProof{}, fmt.Errorf("the proof is no ES256 JWS: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return checkedProof{}, fmt.Errorf("got %d signatures, want 1", len(jws.Signatures))
	}
	h := jws.Signatures[0].Protected
	if h.ExtraHeaders["typ"] != "dpop+jwt" {
		return checkedProof{}, fmt.Errorf("typ = %v, want dpop+jwt", h.ExtraHeaders["typ"])
	}
	if h.Algorithm != "ES256" {
		return checkedProof{}, fmt.Errorf("alg = %s, want ES256", h.Algorithm)
	}
	if h.JSONWebKey == nil || !h.JSONWebKey.Valid() || !h.JSONWebKey.IsPublic() {
		return checkedProof{}, fmt.Errorf("the header's jwk is missing or not a public key: %+v", h.JSONWebKey)
	}
	if h.KeyID != "" {
		return checkedProof{}, fmt.Errorf("the header has a kid %q as well as the jwk", h.KeyID)
	}
	payload, err := jws.Verify(h.JSONWebKey)
	if err != nil {
		return checkedProof{}, fmt.Errorf("the proof's signature does not verify with its own jwk: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return checkedProof{}, fmt.Errorf("claims: %v", err)
	}
	if claims["htm"] != method || claims["htu"] != wantHTU {
		return checkedProof{}, fmt.Errorf("htm %v htu %v, want %s %s", claims["htm"], claims["htu"], method, wantHTU)
	}
	if jti, _ := claims["jti"].(string); len(jti) < 16 {
		return checkedProof{}, fmt.Errorf("jti %v: want at least 16 characters of randomness", claims["jti"])
	}
	return checkedProof{jwk: *h.JSONWebKey, claims: claims}, nil
}

func testKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestProofClaims(t *testing.T) {
	key := testKey(t)
	p, err := newProver(key)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 7, 23, 4, 12, 9, 0, time.UTC)
	p.now = func() time.Time { return at }
	const token = "a-session-token"
	sum := sha256.Sum256([]byte(token))
	wantATH := base64.RawURLEncoding.EncodeToString(sum[:])
	target, _ := url.Parse("http://LocalHost:8080/api/v2/payments?limit=5#top")

	for _, tc := range []struct {
		name, method, token, nonce string
		want                       map[string]any // besides jti
	}{
		{"a login: no token, no nonce", "POST", "", "",
			map[string]any{"htm": "POST", "htu": "http://localhost:8080/api/v2/payments", "iat": float64(at.Unix())}},
		{"with a session token", "GET", token, "",
			map[string]any{"htm": "GET", "htu": "http://localhost:8080/api/v2/payments", "iat": float64(at.Unix()), "ath": wantATH}},
		{"with the BFF's nonce", "DELETE", token, "n-42",
			map[string]any{"htm": "DELETE", "htu": "http://localhost:8080/api/v2/payments", "iat": float64(at.Unix()), "ath": wantATH, "nonce": "n-42"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proof, err := p.proof(tc.method, target, tc.token, tc.nonce)
			if err != nil {
				t.Fatal(err)
			}
			got := checkProof(t, proof, tc.method, "http://localhost:8080/api/v2/payments")
			// The header's key is the app's: its thumbprint is the one the
			// BFF binds to.
			sum, _ := got.jwk.Thumbprint(crypto.SHA256)
			if jkt := base64.RawURLEncoding.EncodeToString(sum); jkt != p.jkt {
				t.Fatalf("the jwk's thumbprint %s, want the prover's %s", jkt, p.jkt)
			}
			if !got.jwk.Key.(*ecdsa.PublicKey).Equal(&key.PublicKey) {
				t.Fatal("the header's jwk is not the app's public key")
			}
			delete(got.claims, "jti")
			if len(got.claims) != len(tc.want) {
				t.Fatalf("got claims %v, want %v and a jti", got.claims, tc.want)
			}
			for k, v := range tc.want {
				if got.claims[k] != v {
					t.Errorf("claim %s = %v, want %v", k, got.claims[k], v)
				}
			}
		})
	}
}

// Two proofs of the same request differ in their jti: the BFF refuses a
// jti it has seen.
func TestProofJTIIsFresh(t *testing.T) {
	p, err := newProver(testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse("http://localhost:8080/bff/payments")
	seen := map[any]bool{}
	for range 20 {
		proof, err := p.proof("GET", target, "tok", "")
		if err != nil {
			t.Fatal(err)
		}
		jti := checkProof(t, proof, "GET", "http://localhost:8080/bff/payments").claims["jti"]
		if seen[jti] {
			t.Fatalf("jti %v twice", jti)
		}
		seen[jti] = true
	}
}

func TestHTU(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:8080/bff/events":                  "http://localhost:8080/bff/events",
		"https://BFF.example.com/api/v2/payments?limit=1#x": "https://bff.example.com/api/v2/payments",
		"https://bff.example.com/bff/payments/a%2Fb?":       "https://bff.example.com/bff/payments/a%2Fb",
		"http://user:pw@127.0.0.1:8080/auth/mobile/token":   "http://127.0.0.1:8080/auth/mobile/token",
	} {
		u, err := url.Parse(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := htu(u); got != want {
			t.Errorf("htu(%s) = %s, want %s", in, got, want)
		}
	}
}
