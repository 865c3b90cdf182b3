// Package dpoptest signs DPoP proofs (RFC 9449) as a native app does, for
// the tests of device-bound sessions: a P-256 key, and a proof of it for a
// method, a URL and a session token. It is the one proof signer of the
// BFF's tests; examples/native has its own, as an app would.
package dpoptest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Key is a device's key.
type Key struct {
	t       testing.TB
	Private *ecdsa.PrivateKey
}

// NewKey makes a new P-256 key.
func NewKey(t testing.TB) Key {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return Key{t: t, Private: k}
}

// KeyOf is an existing key (an app's, read back from its file).
func KeyOf(t testing.TB, k *ecdsa.PrivateKey) Key { return Key{t: t, Private: k} }

// Proof is an ES256 proof of k for method and htu, with a new jti, iat now
// and, unless token is "", the token's ath; each edit changes the claims
// before signing.
func (k Key) Proof(method, htu, token string, edit ...func(claims map[string]any)) string {
	k.t.Helper()
	var jti [16]byte
	_, _ = rand.Read(jti[:])
	cl := map[string]any{"jti": base64.RawURLEncoding.EncodeToString(jti[:]), "htm": method, "htu": htu, "iat": time.Now().Unix()}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		cl["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	for _, e := range edit {
		e(cl)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k.Private}, (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		k.t.Fatal(err)
	}
	b, _ := json.Marshal(cl)
	jws, err := s.Sign(b)
	if err != nil {
		k.t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		k.t.Fatal(err)
	}
	return out
}

// Thumbprint is the key's RFC 7638 SHA-256 thumbprint (the jkt).
func (k Key) Thumbprint() string {
	k.t.Helper()
	sum, err := (&jose.JSONWebKey{Key: &k.Private.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		k.t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(sum)
}
