package signing

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

func p256(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func set(t *testing.T, keys ...jose.JSONWebKey) []byte {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A signature by the active key verifies under the published set, with
// its kid and typ; the published set holds every key, no private part.
func TestSignVerifiesUnderThePublishedSet(t *testing.T) {
	keys, err := Parse(set(t, jose.JSONWebKey{Key: p256(t), KeyID: "old"}, jose.JSONWebKey{Key: p256(t), KeyID: "new"}), "new", ES256)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := keys.Sign([]byte(`{"a":1}`), "x+json")
	if err != nil {
		t.Fatal(err)
	}
	var pub jose.JSONWebKeySet
	if err := json.Unmarshal(keys.PublicJWKS(), &pub); err != nil || len(pub.Keys) != 2 {
		t.Fatalf("public set %s: %v", keys.PublicJWKS(), err)
	}
	if strings.Contains(string(keys.PublicJWKS()), `"d"`) {
		t.Fatalf("the public set holds a private part: %s", keys.PublicJWKS())
	}
	parsed, err := jose.ParseSigned(jws, []jose.SignatureAlgorithm{ES256})
	if err != nil {
		t.Fatal(err)
	}
	h := parsed.Signatures[0].Protected
	if h.KeyID != "new" || h.ExtraHeaders[jose.HeaderType] != "x+json" {
		t.Fatalf("header kid %q typ %v", h.KeyID, h.ExtraHeaders[jose.HeaderType])
	}
	if got, err := parsed.Verify(pub.Key("new")[0]); err != nil || string(got) != `{"a":1}` {
		t.Fatalf("verify under the published key: %q %v", got, err)
	}
	if _, err := parsed.Verify(pub.Key("old")[0]); err == nil {
		t.Fatal("verified under the other key")
	}
}

// Parse refuses a key of a type not allowed here, and one whose JWK says
// it is for something else.
func TestParseRefuses(t *testing.T) {
	k := p256(t)
	for name, tc := range map[string]struct {
		jwks    []byte
		allowed []jose.SignatureAlgorithm
		want    string
	}{
		"not allowed": {set(t, jose.JSONWebKey{Key: k, KeyID: "a"}), []jose.SignatureAlgorithm{EdDSA}, "not one of"},
		"use enc":     {set(t, jose.JSONWebKey{Key: k, KeyID: "a", Use: "enc"}), []jose.SignatureAlgorithm{ES256}, `use "enc"`},
		"another alg": {set(t, jose.JSONWebKey{Key: k, KeyID: "a", Algorithm: "ES384"}), []jose.SignatureAlgorithm{ES256}, `alg "ES384"`},
		"public only": {set(t, jose.JSONWebKey{Key: &k.PublicKey, KeyID: "a"}), []jose.SignatureAlgorithm{ES256}, "no private part"},
		"no such kid": {set(t, jose.JSONWebKey{Key: k, KeyID: "a"}), []jose.SignatureAlgorithm{ES256}, "no key has the active kid"},
	} {
		active := ""
		if name == "no such kid" {
			active = "b"
		}
		if _, err := Parse(tc.jwks, active, tc.allowed...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, tc.want)
		}
	}
}

// A derived set is the same for the same secrets (every instance signs
// alike), different for another secret, one key per distinct secret, the
// first signing; nothing of the secret is in its public part.
func TestDerived(t *testing.T) {
	secret, old := []byte(strings.Repeat("s", 32)), []byte(strings.Repeat("o", 32))
	a, err := Derived("purpose", secret, old, secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Derived("purpose", secret, old)
	if string(a.PublicJWKS()) != string(b.PublicJWKS()) || a.ActiveKeyID() != b.ActiveKeyID() {
		t.Fatal("the same secrets derived different keys")
	}
	var pub jose.JSONWebKeySet
	_ = json.Unmarshal(a.PublicJWKS(), &pub)
	if len(pub.Keys) != 2 || a.Algorithm() != EdDSA {
		t.Fatalf("derived set %s, alg %s: want 2 Ed25519 keys", a.PublicJWKS(), a.Algorithm())
	}
	c, _ := Derived("purpose", old)
	if c.ActiveKeyID() == a.ActiveKeyID() {
		t.Fatal("another secret derived the same key")
	}
	d, _ := Derived("another purpose", secret)
	if d.ActiveKeyID() == a.ActiveKeyID() {
		t.Fatal("another purpose derived the same key")
	}
	if strings.Contains(string(a.PublicJWKS()), "c3Nzc3Nz") { // base64 of the secret's bytes
		t.Fatal("the secret is in the public set")
	}
	if _, err := Derived("purpose", []byte("short")); err == nil {
		t.Fatal("a set derived from a 5-byte secret")
	}
	if _, err := Derived("purpose"); err == nil {
		t.Fatal("a set derived from no secret")
	}
}
