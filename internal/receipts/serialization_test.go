package receipts

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"

	"github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"

	"github.com/fintech-bff/bff/internal/signing"
)

// A receipt is a compact JWS whose payload is base64url-encoded, as the
// TypeScript client's verifyReceipt reads it: the same signature in the
// JWS JSON serialization (which may carry an unprotected header), or a
// payload left unencoded (b64 false, RFC 7797), is not a receipt, even
// under the right key.
func TestVerifyOnlyCompactEncoded(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: priv, KeyID: "k1"}}})
	k, err := signing.Parse(set, "", signing.EdDSA)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(doc())
	payload, err := jcs.Transform(b)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(opts *jose.SignerOptions) *jose.JSONWebSignature {
		t.Helper()
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: jose.JSONWebKey{Key: priv, KeyID: "k1"}},
			opts.WithType(Type))
		if err != nil {
			t.Fatal(err)
		}
		jws, err := s.Sign(payload)
		if err != nil {
			t.Fatal(err)
		}
		return jws
	}
	compact, _ := sign(&jose.SignerOptions{}).CompactSerialize()
	if _, _, err := Verify(compact, k.PublicJWKS()); err != nil {
		t.Fatalf("the compact receipt: %v", err)
	}
	full := sign(&jose.SignerOptions{}).FullSerialize()
	if _, _, err := Verify(full, k.PublicJWKS()); !errors.Is(err, ErrInvalid) {
		t.Errorf("the JSON serialization verified: %v", err)
	}
	unencoded, err := sign((&jose.SignerOptions{}).WithBase64(false)).CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Verify(unencoded, k.PublicJWKS()); !errors.Is(err, ErrInvalid) {
		t.Errorf("an unencoded payload (b64 false) verified: %v", err)
	}
}

// The key its kid names must be one for the receipt's algorithm, as the
// JWK says it (alg, use) and as it is (an EC key on P-256 for ES256), as
// the TypeScript client checks: a key published for another algorithm,
// or for encryption, verifies no receipt.
func TestVerifyRefusesAKeyForSomethingElse(t *testing.T) {
	k := keys(t, "secret-1")
	jws, _ := Sign(k, doc())
	for name, edit := range map[string]func(*jose.JSONWebKey){
		"alg ES256": func(j *jose.JSONWebKey) { j.Algorithm = "ES256" },
		"use enc":   func(j *jose.JSONWebKey) { j.Use = "enc" },
	} {
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(k.PublicJWKS(), &set); err != nil {
			t.Fatal(err)
		}
		edit(&set.Keys[0])
		b, _ := json.Marshal(set)
		if _, _, err := Verify(jws, b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
