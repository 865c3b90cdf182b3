package receipts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/signing"
)

// BenchmarkReceipt: what a receipt costs the BFF per request, against the
// baseline of encoding the same document as plain JSON (what GET
// /bff/payments/{key} does with a record): canonicalization and one
// signature, EdDSA (the derived key) and ES256 (a keys_file key); and a
// verification, as a client does once.
func BenchmarkReceipt(b *testing.B) {
	d := doc()
	ed, err := signing.Derived("receipts bench", secret32("bench"))
	if err != nil {
		b.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set, _ := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: ecKey, KeyID: "r1"}}})
	es, err := signing.Parse(set, "", signing.ES256)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("baseline json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(d); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, k := range []struct {
		name string
		keys *signing.Keys
	}{{"sign EdDSA", ed}, {"sign ES256", es}} {
		b.Run(k.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Sign(k.keys, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	jws, _ := Sign(ed, d)
	b.Run("verify EdDSA", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := Verify(jws, ed.PublicJWKS()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
