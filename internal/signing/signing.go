// Package signing holds the BFF's own signing keys: a JWK Set of private
// keys, one of them active, the public parts published as a JWK Set so
// that anything signed under a key rotated in or out still verifies. The
// client's assertions toward the OpenID provider (private_key_jwt) and
// payment receipts each have a set.
//
// It is a thin layer over go-jose (parsing, signing), which the module
// already uses: what is ours is only the rules (which algorithms, one
// active kid, no private part ever published) and a key derived from a
// configured secret when no set is given.
package signing

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/go-jose/go-jose/v4"
)

// The algorithms a key may sign with, one per key type.
const (
	ES256 = jose.ES256 // EC P-256
	EdDSA = jose.EdDSA // Ed25519
	PS256 = jose.PS256 // RSA of 2048 bits or more
)

// Keys is a set of signing keys, one active. Safe for concurrent use.
type Keys struct {
	active jose.JSONWebKey
	alg    jose.SignatureAlgorithm
	public []byte // the JWK Set of every key's public part
}

// Parse reads a JWK Set of private keys, each with a kid and of a type
// whose algorithm is in allowed, and makes the key whose kid is activeKID
// (the first when it is empty) the one that signs.
func Parse(jwks []byte, activeKID string, allowed ...jose.SignatureAlgorithm) (*Keys, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return nil, fmt.Errorf("not a JWK Set: %w", err)
	}
	if len(set.Keys) == 0 {
		return nil, errors.New("the JWK Set holds no key")
	}
	k := &Keys{}
	var pub jose.JSONWebKeySet
	seen := map[string]bool{}
	for i, key := range set.Keys {
		if key.KeyID == "" {
			return nil, fmt.Errorf("key %d has no kid", i)
		}
		if seen[key.KeyID] {
			return nil, fmt.Errorf("kid %q is used twice", key.KeyID)
		}
		seen[key.KeyID] = true
		if key.IsPublic() {
			return nil, fmt.Errorf("key %q has no private part", key.KeyID)
		}
		alg, err := keyAlg(key.Key)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", key.KeyID, err)
		}
		// What the JWK says it is for (RFC 7517 sections 4.2, 4.4) holds.
		if key.Use != "" && key.Use != "sig" {
			return nil, fmt.Errorf("key %q has use %q, not sig", key.KeyID, key.Use)
		}
		if key.Algorithm != "" && key.Algorithm != string(alg) {
			return nil, fmt.Errorf("key %q has alg %q, but signs %s", key.KeyID, key.Algorithm, alg)
		}
		if !slices.Contains(allowed, alg) {
			return nil, fmt.Errorf("key %q signs %s, which is not one of %v here", key.KeyID, alg, allowed)
		}
		p := key.Public()
		p.Algorithm, p.Use = string(alg), "sig"
		pub.Keys = append(pub.Keys, p)
		if (activeKID == "" && i == 0) || key.KeyID == activeKID {
			k.active, k.alg = key, alg
		}
	}
	if k.active.Key == nil {
		return nil, fmt.Errorf("no key has the active kid %q", activeKID)
	}
	k.public, _ = json.Marshal(pub)
	return k, nil
}

// Derived is an Ed25519 set derived from secrets (HKDF-SHA256 with label
// as its info): the first signs, the others (earlier secrets, kept for a
// rotation) are published so that what they signed still verifies. Every
// instance configured with the same secrets has the same keys, and the
// public keys say nothing of the secrets. kids are "derived-" and the
// key's thumbprint's first 16 characters. A secret under 32 bytes is
// refused: a key derived from it could be guessed.
func Derived(label string, secrets ...[]byte) (*Keys, error) {
	if len(secrets) == 0 {
		return nil, errors.New("no secret to derive a key from")
	}
	for _, s := range secrets {
		if len(s) < 32 {
			return nil, errors.New("a secret to derive a key from must have 32 bytes or more")
		}
	}
	var set jose.JSONWebKeySet
	for i, s := range secrets {
		if slices.ContainsFunc(secrets[:i], func(e []byte) bool { return string(e) == string(s) }) {
			continue // the same secret twice is one key
		}
		seed, err := hkdf.Key(sha256.New, s, nil, label, ed25519.SeedSize)
		if err != nil {
			return nil, err
		}
		priv := ed25519.NewKeyFromSeed(seed)
		tp, err := (&jose.JSONWebKey{Key: priv.Public()}).Thumbprint(crypto.SHA256)
		if err != nil {
			return nil, err
		}
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: priv, KeyID: "derived-" + base64.RawURLEncoding.EncodeToString(tp)[:16]})
	}
	b, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	return Parse(b, "", EdDSA)
}

// keyAlg is the algorithm a private key signs with.
func keyAlg(key any) (jose.SignatureAlgorithm, error) {
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		if k.Curve != elliptic.P256() {
			return "", errors.New("an EC key must be on P-256 (ES256)")
		}
		return ES256, nil
	case ed25519.PrivateKey:
		return EdDSA, nil
	case *rsa.PrivateKey:
		if k.N.BitLen() < 2048 {
			return "", errors.New("an RSA key must have 2048 bits or more (PS256)")
		}
		return PS256, nil
	}
	return "", fmt.Errorf("%T is not an EC P-256, Ed25519 or RSA private key", key)
}

// ActiveKeyID is the kid of the key that signs.
func (k *Keys) ActiveKeyID() string { return k.active.KeyID }

// Algorithm is the active key's algorithm.
func (k *Keys) Algorithm() jose.SignatureAlgorithm { return k.alg }

// PublicJWKS is the JWK Set of every key's public part, each with kid,
// alg and use "sig": never a private part.
func (k *Keys) PublicJWKS() []byte { return k.public }

// Sign is a compact JWS of payload by the active key, with its kid and
// the given typ in the protected header.
func (k *Keys) Sign(payload []byte, typ string) (string, error) {
	opts := (&jose.SignerOptions{}).WithType(jose.ContentType(typ))
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: k.alg, Key: k.active}, opts)
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}
