package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// A prover signs DPoP proofs (RFC 9449, section 4) with the app's one P-256
// key. It is safe for concurrent use. On a phone the key would live in the
// Secure Enclave or the Android Keystore and never leave it
// (docs/native-apps.md); here it is a file the app alone may read.
type prover struct {
	signer jose.Signer
	jkt    string           // the key's JWK SHA-256 thumbprint (RFC 7638), base64url
	now    func() time.Time // the proofs' iat; time.Now outside tests
}

func newProver(key *ecdsa.PrivateKey) (*prover, error) {
	// EmbedJWK puts the public key in the header as "jwk" (RFC 9449, 4.2);
	// go-jose never embeds the private part.
	opts := (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt")
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, opts)
	if err != nil {
		return nil, fmt.Errorf("a DPoP signer: %w", err)
	}
	jkt, err := thumbprint(&key.PublicKey)
	if err != nil {
		return nil, err
	}
	return &prover{signer: s, jkt: jkt, now: time.Now}, nil
}

// thumbprint is the JWK SHA-256 thumbprint of a public key (RFC 7638), the
// value the BFF binds a session to (RFC 9449, 6.1 "jkt").
func thumbprint(pub *ecdsa.PublicKey) (string, error) {
	sum, err := (&jose.JSONWebKey{Key: pub}).Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("the key's thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}

// proofClaims are a DPoP proof's claims (RFC 9449, 4.2).
type proofClaims struct {
	JTI   string `json:"jti"`
	HTM   string `json:"htm"`
	HTU   string `json:"htu"`
	IAT   int64  `json:"iat"`
	ATH   string `json:"ath,omitempty"`   // with a session token: its hash
	Nonce string `json:"nonce,omitempty"` // the BFF's newest DPoP-Nonce, once it sent one
}

// proof is a DPoP proof for one request: method and target as sent, token
// the session token it carries ("" for the login requests) and nonce the
// BFF's newest DPoP-Nonce ("" before it sent one). Every proof has a fresh
// jti: the BFF refuses one it has seen.
func (p *prover) proof(method string, target *url.URL, token, nonce string) (string, error) {
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	c := proofClaims{
		JTI:   base64.RawURLEncoding.EncodeToString(jti),
		HTM:   method,
		HTU:   htu(target),
		IAT:   p.now().Unix(),
		Nonce: nonce,
	}
	if token != "" {
		c.ATH = ath(token)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	jws, err := p.signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("signing a DPoP proof: %w", err)
	}
	return jws.CompactSerialize()
}

// htu is the proof's "htu": the request's URL without query and fragment
// (RFC 9449, 4.2), scheme and host in lower case.
func htu(target *url.URL) string {
	u := url.URL{Scheme: strings.ToLower(target.Scheme), Host: strings.ToLower(target.Host), Path: target.Path, RawPath: target.RawPath}
	return u.String()
}

// ath is the proof's "ath": base64url of the SHA-256 of the session token
// as sent (RFC 9449, 4.2), which ties the proof to that one token.
func ath(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
