package receipts

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/signing"
)

func doc() Document {
	return Document{Version: Version, Issuer: "https://bff.example", IssuedAt: "2026-12-05T10:00:00Z", UserID: "alice",
		Key: "k1", Route: "/v2/payments", State: "done", Status: 201, PaymentID: "pay_1",
		Amount: &Amount{Minor: 100050, Currency: "EUR", Text: "1000.50"}, Payee: &Payee{Name: "Jane Doe", Account: "DE89 … 3000"},
		RequestedAt: "2026-12-05T09:59:59Z", AnsweredAt: "2026-12-05T10:00:00Z", BodySHA256: "abc",
		Approval: &Approval{ACR: "urn:bff:acr:mfa", AuthTime: "2026-12-05T09:59:00Z", DetailsSHA256: "def"}}
}

func keys(t *testing.T, secret string) *signing.Keys {
	t.Helper()
	k, err := signing.Derived("receipts test", secret32(secret))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// A receipt verifies under the published keys and gives back its
// document; its payload is canonical JSON (sorted members, no spaces).
func TestSignVerify(t *testing.T) {
	k := keys(t, "secret-1")
	jws, err := Sign(k, doc())
	if err != nil {
		t.Fatal(err)
	}
	got, kid, err := Verify(jws, k.PublicJWKS())
	if err != nil || kid != k.ActiveKeyID() {
		t.Fatalf("Verify: %v, kid %q", err, kid)
	}
	want, _ := json.Marshal(doc())
	if b, _ := json.Marshal(got); string(b) != string(want) {
		t.Fatalf("document\n got %s\nwant %s", b, want)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(jws, ".")[1])
	if !strings.HasPrefix(string(payload), `{"amount":{"currency":"EUR","minor":100050,"text":"1000.50"},"answeredAt":`) {
		t.Fatalf("payload is not canonical JSON: %s", payload)
	}
}

// Every tampering fails: another payload under the same signature, a
// changed signature, a key not in the set, another typ, a payload that
// is not canonical, an unknown version, another algorithm.
func TestVerifyRefusesTampering(t *testing.T) {
	k := keys(t, "secret-1")
	jws, _ := Sign(k, doc())
	parts := strings.Split(jws, ".")
	other := doc()
	other.Amount.Minor, other.Amount.Text = 100, "1.00"
	otherJWS, _ := Sign(k, other)
	sig := []byte(parts[2])
	sig[5] ^= 1
	signRaw := func(payload, typ string) string {
		s, err := k.Sign([]byte(payload), typ)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	canonical, _ := base64.RawURLEncoding.DecodeString(parts[1])
	versioned := strings.Replace(string(canonical), `"v":1`, `"v":2`, 1)
	for name, bad := range map[string]string{
		"another payload":    parts[0] + "." + strings.Split(otherJWS, ".")[1] + "." + parts[2],
		"changed signature":  parts[0] + "." + parts[1] + "." + string(sig),
		"another typ":        signRaw(string(canonical), "JWT"),
		"not canonical":      signRaw(`{ "v": 1 }`, Type),
		"unknown version":    signRaw(versioned, Type),
		"not a JWS":          "hello",
		"another BFF's keys": func() string { s, _ := Sign(keys(t, "secret-2"), doc()); return s }(),
	} {
		if _, _, err := Verify(bad, k.PublicJWKS()); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	// HS256 with the public key's bytes as a secret (algorithm confusion).
	hs, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	obj, _ := hs.Sign(canonical)
	hsJWS, _ := obj.CompactSerialize()
	if _, _, err := Verify(hsJWS, k.PublicJWKS()); !errors.Is(err, ErrInvalid) {
		t.Errorf("an HS256 receipt: got %v, want ErrInvalid", err)
	}
}

// After a rotation, a receipt signed by the old key still verifies under
// the set that publishes both.
func TestRotationKeepsOldReceipts(t *testing.T) {
	before, _ := signing.Derived("receipts test", secret32("old"))
	after, _ := signing.Derived("receipts test", secret32("new"), secret32("old"))
	jws, _ := Sign(before, doc())
	if _, kid, err := Verify(jws, after.PublicJWKS()); err != nil || kid != before.ActiveKeyID() {
		t.Fatalf("an old receipt under the rotated set: %v (kid %q)", err, kid)
	}
	fresh, _ := Sign(after, doc())
	if _, kid, _ := Verify(fresh, after.PublicJWKS()); kid != after.ActiveKeyID() || kid == before.ActiveKeyID() {
		t.Fatalf("a new receipt is signed by %q", kid)
	}
}

// secret32 is s padded to the 32 bytes a derived key needs.
func secret32(s string) []byte { return []byte(fmt.Sprintf("%-32s", s)) }
