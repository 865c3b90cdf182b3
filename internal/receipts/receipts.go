// Package receipts is the signed receipt of a payment: what the BFF's
// ledger knows of one money request, as a canonical JSON document (RFC
// 8785) in a compact JWS (ES256 or EdDSA) under a key of a published JWK
// Set. A receipt proves what this BFF recorded and signed; it is not the
// bank's own statement (docs/payments.md, "Receipts").
//
// Verify is what a verifier runs offline: the Go command cmd/verify-receipt
// and the TypeScript client's verifyReceipt do the same checks.
package receipts

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"

	"github.com/fintech-bff/bff/internal/signing"
)

// Type is the JWS header's typ of a receipt.
const Type = "bff-receipt+json"

// Version is the document's version; a verifier refuses one it does not
// know.
const Version = 1

// Algorithms a receipt may be signed with.
var Algorithms = []jose.SignatureAlgorithm{signing.ES256, signing.EdDSA}

// Document is a receipt's content. Times are RFC 3339 in UTC; an absent
// member is not known (a payment the upstream never created has no
// paymentId).
type Document struct {
	Version int    `json:"v"`
	Issuer  string `json:"iss"` // the BFF's public URL
	// IssuedAt is when this receipt was signed.
	IssuedAt string `json:"issuedAt"`
	UserID   string `json:"userId"`
	// Key is the request's Idempotency-Key, Route its money route.
	Key   string `json:"key"`
	Route string `json:"route"`
	// State is done (answered) or declined (held and never approved:
	// never sent); Status the HTTP status the BFF answered.
	State    string `json:"state"`
	Status   int    `json:"status"`
	Declined string `json:"declined,omitempty"`
	// PaymentID is the upstream's payment.
	PaymentID string  `json:"paymentId,omitempty"`
	Amount    *Amount `json:"amount,omitempty"`
	Payee     *Payee  `json:"payee,omitempty"`
	// RequestedAt is when the request was claimed, AnsweredAt when it was
	// answered or ended.
	RequestedAt string `json:"requestedAt"`
	AnsweredAt  string `json:"answeredAt,omitempty"`
	// PaymentStatus is the upstream's latest known status, seen at
	// PaymentStatusAt.
	PaymentStatus   string `json:"paymentStatus,omitempty"`
	PaymentStatusAt string `json:"paymentStatusAt,omitempty"`
	// BodySHA256 is the base64url SHA-256 of the payment the BFF sent (or,
	// declined, held and never sent), as it recorded it (its own encoding
	// of the request's paymentInformation and redirectUrl: the amount and
	// payee above come from it).
	BodySHA256 string `json:"bodySha256,omitempty"`
	// Approval is the user's approval of a held payment.
	Approval *Approval `json:"approval,omitempty"`
}

// Amount is exact: Minor units of Currency, and the same as decimal text.
type Amount struct {
	Minor    int64  `json:"minor"`
	Currency string `json:"currency"`
	Text     string `json:"text"`
}

// Payee is where the money went: a name, an account masked to its
// country, check digits and last four characters, or a merchant.
type Payee struct {
	Name       string `json:"name,omitempty"`
	Account    string `json:"account,omitempty"`
	MerchantID string `json:"merchantId,omitempty"`
}

// Approval is what the user's approval at the OpenID provider proved.
type Approval struct {
	ACR      string `json:"acr"`
	AuthTime string `json:"authTime"`
	// DetailsSHA256 is the base64url SHA-256 of the canonical JSON (RFC
	// 8785) of the authorization_details the provider granted.
	DetailsSHA256 string `json:"detailsSha256"`
}

// Sign is the receipt of d: its canonical JSON in a compact JWS by the
// active key of keys.
func Sign(keys *signing.Keys, d Document) (string, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	canonical, err := jcs.Transform(b)
	if err != nil {
		return "", err
	}
	return keys.Sign(canonical, Type)
}

// ErrInvalid is wrapped by every refusal of Verify.
var ErrInvalid = errors.New("not a valid receipt")

// Verify checks a receipt against a JWK Set of public keys (the BFF's
// published one, fetched or exported): a compact JWS of typ Type, signed
// ES256 or EdDSA by the key its kid names, over a canonical JSON document
// of a known version. It returns the document and the kid.
func Verify(receipt string, jwks []byte) (Document, string, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(jwks, &set); err != nil {
		return Document{}, "", fmt.Errorf("the key set is not a JWK Set: %w", err)
	}
	// Compact only (ParseSigned would take the JSON serialization too),
	// with its payload base64url-encoded: what the TypeScript client reads.
	jws, err := jose.ParseSignedCompact(receipt, Algorithms)
	if err != nil {
		return Document{}, "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if len(jws.Signatures) != 1 {
		return Document{}, "", fmt.Errorf("%w: it must carry one signature", ErrInvalid)
	}
	h := jws.Signatures[0].Protected
	if h.ExtraHeaders[jose.HeaderType] != Type {
		return Document{}, "", fmt.Errorf("%w: its typ is not %s", ErrInvalid, Type)
	}
	for _, name := range []jose.HeaderKey{"b64", "crit"} {
		if _, ok := h.ExtraHeaders[name]; ok {
			return Document{}, "", fmt.Errorf("%w: its header has %s, which a receipt never has", ErrInvalid, name)
		}
	}
	keys := set.Key(h.KeyID)
	if len(keys) != 1 || !keys[0].IsPublic() {
		return Document{}, "", fmt.Errorf("%w: no public key in the set has its kid %q", ErrInvalid, h.KeyID)
	}
	if why := notFor(keys[0], jose.SignatureAlgorithm(h.Algorithm)); why != "" {
		return Document{}, "", fmt.Errorf("%w: the key %q %s", ErrInvalid, h.KeyID, why)
	}
	payload, err := jws.Verify(keys[0])
	if err != nil {
		return Document{}, "", fmt.Errorf("%w: the signature does not verify", ErrInvalid)
	}
	canonical, err := jcs.Transform(payload)
	if err != nil || string(canonical) != string(payload) {
		return Document{}, "", fmt.Errorf("%w: its document is not canonical JSON", ErrInvalid)
	}
	var d Document
	if err := json.Unmarshal(payload, &d); err != nil {
		return Document{}, "", fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if d.Version != Version {
		return Document{}, "", fmt.Errorf("%w: version %d is not %d", ErrInvalid, d.Version, Version)
	}
	return d, h.KeyID, nil
}

// notFor says why key is not one to verify alg with ("" when it is): the
// JWK's alg and use, when it has them, and its type and curve.
func notFor(key jose.JSONWebKey, alg jose.SignatureAlgorithm) string {
	switch {
	case key.Algorithm != "" && key.Algorithm != string(alg):
		return fmt.Sprintf("is for %s, not %s", key.Algorithm, alg)
	case key.Use != "" && key.Use != "sig":
		return fmt.Sprintf("has use %q, not sig", key.Use)
	}
	switch k := key.Key.(type) {
	case *ecdsa.PublicKey:
		if alg == signing.ES256 && k.Curve == elliptic.P256() {
			return ""
		}
	case ed25519.PublicKey:
		if alg == signing.EdDSA {
			return ""
		}
	}
	return fmt.Sprintf("is not a key for %s", alg)
}
