package dpop

import (
	"context"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

// FuzzVerify feeds arbitrary proofs to Verify for a session bound to one
// key: it never panics, and it accepts only a proof whose signature an
// independent check with that key's public half verifies, of the bound
// thumbprint (so never one made without the key).
func FuzzVerify(f *testing.F) {
	clock := testclock.New(t0)
	jkt := jktOf(f, p256Key.Public())
	f.Add(proofOf(f, p256Key, jose.ES256, good()))
	f.Add(proofOf(f, p256Key2, jose.ES256, good()))
	f.Add(rawES256(f, p256Key, map[string]any{"alg": "ES256", "typ": "dpop+jwt", "jwk": publicJWK(f, p256Key.Public())}, good()))
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("..")
	f.Add(strings.Repeat(".", 3))
	f.Fuzz(func(t *testing.T, proof string) {
		v, err := NewVerifier(Options{Now: clock.Now, Replay: kv.NewMemory(clock.Now)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Verify(context.Background(), proof, Check{Method: "POST", URL: testURL, Token: testTok, JKT: jkt})
		if err != nil {
			return
		}
		jws, perr := jose.ParseSignedCompact(proof, []jose.SignatureAlgorithm{jose.ES256})
		if perr != nil || got.JKT != jkt {
			t.Fatalf("accepted %q (jkt %s) that does not parse as ES256 (%v) or is not of the bound key", proof, got.JKT, perr)
		}
		if _, verr := jws.Verify(p256Key.Public()); verr != nil {
			t.Fatalf("accepted %q whose signature the bound key does not verify: %v", proof, verr)
		}
	})
}
