package dpop

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

// The key-related checks give the same answer whether the bound key is in
// the key cache (a session's every request after its first) or not (no
// cache at all): a cached key is used only for the very bytes it was read
// from.
func TestVerifyKeyChecksWithAndWithoutTheKeyCache(t *testing.T) {
	jkt := jktOf(t, p256Key.Public())
	bound := Check{Method: "POST", URL: testURL, Token: testTok, JKT: jkt}
	hdr := func(kv ...any) map[string]any {
		return with(map[string]any{"alg": "ES256", "typ": "dpop+jwt", "jwk": publicJWK(t, p256Key.Public())}, kv...)
	}
	privJWK := publicJWK(t, p256Key.Public())
	raw, _ := p256Key.Bytes()
	privJWK["d"] = b64(raw)
	// The bound key's jwk with its members in another order and spaced:
	// other bytes, the same key.
	jwk := publicJWK(t, p256Key.Public())
	respelled := json.RawMessage(fmt.Sprintf(`{ "y": %q, "x": %q, "kty": "EC", "crv": "P-256" }`, jwk["y"], jwk["x"]))
	for _, tc := range []struct {
		name  string
		proof func() string
		want  Reason
	}{
		{"the bound key", func() string { return proofOf(t, p256Key, jose.ES256, good()) }, ""},
		{"the bound key's jwk spelled otherwise", func() string { return rawES256(t, p256Key, hdr("jwk", respelled), good()) }, ""},
		{"another key", func() string { return proofOf(t, p256Key2, jose.ES256, good()) }, ReasonKey},
		{"the bound key's jwk, signed by another", func() string { return rawES256(t, p256Key2, hdr(), good()) }, ReasonSignature},
		{"the bound key's jwk, a signature of other claims", func() string {
			p := proofOf(t, p256Key, jose.ES256, good())
			c, _ := json.Marshal(with(good(), "htm", "POST"))
			parts := strings.Split(p, ".")
			return parts[0] + "." + b64(c) + "." + parts[2]
		}, ReasonSignature},
		{"the bound key's jwk with d", func() string { return rawES256(t, p256Key, hdr("jwk", privJWK), good()) }, ReasonJWK},
		{"the bound key's jwk under ES384", func() string { return rawES256(t, p256Key, hdr("alg", "ES384"), good()) }, ReasonJWK},
		{"the bound key's jwk under EdDSA", func() string { return rawES256(t, p256Key, hdr("alg", "EdDSA"), good()) }, ReasonJWK},
	} {
		for _, cache := range []string{"cached", "no cache"} {
			t.Run(tc.name+", "+cache, func(t *testing.T) {
				clock := testclock.New(t0)
				o := Options{Now: clock.Now, Replay: kv.NewMemory(clock.Now)}
				if cache == "no cache" {
					o.KeyCache = -1
				}
				v, err := NewVerifier(o)
				if err != nil {
					t.Fatal(err)
				}
				if cache == "cached" {
					if _, err := v.Verify(context.Background(), proofOf(t, p256Key, jose.ES256, good()), bound); err != nil {
						t.Fatal(err)
					}
					if _, err := v.Verify(context.Background(), proofOf(t, p256Key2, jose.ES256, with(good(), "ath", nil)), Check{Method: "POST", URL: testURL}); err != nil {
						t.Fatal(err)
					}
				}
				got, err := v.Verify(context.Background(), tc.proof(), bound)
				if ReasonOf(err) != tc.want || tc.want == "" && (err != nil || got.JKT != jkt) {
					t.Fatalf("got %+v, %v; want reason %q", got, err, tc.want)
				}
			})
		}
	}
}

// A key is cached only once a proof of it verified: a proof that fails
// its signature leaves nothing behind.
func TestKeyCacheTakesOnlyKeysThatSigned(t *testing.T) {
	clock := testclock.New(t0)
	v := newVerifier(t, clock)
	forged := rawES256(t, p256Key2, map[string]any{"alg": "ES256", "typ": "dpop+jwt", "jwk": publicJWK(t, p256Key.Public())}, good())
	if _, err := v.Verify(context.Background(), forged, Check{Method: "POST", URL: testURL, Token: testTok}); ReasonOf(err) != ReasonSignature {
		t.Fatalf("got %v, want a signature refusal", err)
	}
	if n := len(v.keys.cur) + len(v.keys.old); n != 0 {
		t.Fatalf("%d keys cached, want none", n)
	}
	if _, err := v.Verify(context.Background(), proofOf(t, p256Key, jose.ES256, good()), Check{Method: "POST", URL: testURL, Token: testTok}); err != nil {
		t.Fatal(err)
	}
	if n := len(v.keys.cur) + len(v.keys.old); n != 1 {
		t.Fatalf("%d keys cached, want 1", n)
	}
}

// The cache holds at most two generations of size keys; a key in use
// stays.
func TestKeyCacheIsBounded(t *testing.T) {
	c := newKeyCache(4)
	kept := []byte(`{"kept":1}`)
	c.put(kept, &publicKey{jkt: "kept"})
	for i := range 50 {
		c.put(fmt.Appendf(nil, `{"k":%d}`, i), &publicKey{jkt: fmt.Sprint(i)})
		if k := c.get(kept); k == nil || k.jkt != "kept" {
			t.Fatalf("after %d other keys the key in use is gone", i+1)
		}
		if n := len(c.cur) + len(c.old); n > 8 {
			t.Fatalf("%d keys held, want at most 8", n)
		}
	}
	if c.get([]byte(`{"k":0}`)) != nil {
		t.Fatal("the first key put is still held after 50 others")
	}
	big := newKeyCache(1 << 20)
	jwk := make([]byte, 100<<10)
	for i := range 30 {
		jwk[0] = byte(i)
		big.put(jwk, &publicKey{})
		if b := big.curBytes; b > keyCacheBytes {
			t.Fatalf("%d bytes of jwk in a generation, over %d", b, keyCacheBytes)
		}
	}
	if newKeyCache(-1).get(kept) != nil {
		t.Fatal("a cache of no keys holds one")
	}
}

// What a proof's header or claims may not hold, beyond TestVerifyRefuses:
// the members that change how a JWS is read, or that go-jose (which read
// proofs before) would have refused, and names twice. Claim names are
// compared exactly, as JWT asks (encoding/json, which read the claims
// before, ignores case).
func TestVerifyRefusesHeadersAndClaimsItDoesNotRead(t *testing.T) {
	clock := testclock.New(t0)
	v := newVerifier(t, clock)
	check := Check{Method: "POST", URL: testURL, Token: testTok, JKT: jktOf(t, p256Key.Public())}
	hdr := func(kv ...any) map[string]any {
		return with(map[string]any{"alg": "ES256", "typ": "dpop+jwt", "jwk": publicJWK(t, p256Key.Public())}, kv...)
	}
	raw := func(header, claims string) string {
		h := b64([]byte(header))
		c := b64([]byte(claims))
		return signES256(t, h+"."+c)
	}
	hj, _ := json.Marshal(hdr())
	cj, _ := json.Marshal(good())
	for _, tc := range []struct {
		name  string
		proof func() string
		want  Reason
	}{
		{"crit", func() string { return rawES256(t, p256Key, hdr("crit", []string{"b64"}), good()) }, ReasonMalformed},
		{"b64 false", func() string { return rawES256(t, p256Key, hdr("b64", false), good()) }, ReasonMalformed},
		{"x5c", func() string { return rawES256(t, p256Key, hdr("x5c", []string{"MIIB"}), good()) }, ReasonMalformed},
		{"jku", func() string { return rawES256(t, p256Key, hdr("jku", "https://evil.example.com/jwks"), good()) }, ReasonMalformed},
		{"a kid that is not a string", func() string { return rawES256(t, p256Key, hdr("kid", 7), good()) }, ReasonMalformed},
		{"alg twice", func() string { return raw(`{"alg":"ES256",`+string(hj[1:len(hj)-1])+`}`, string(cj)) }, ReasonMalformed},
		{"htm twice", func() string { return raw(string(hj), `{"htm":"GET",`+string(cj[1:])) }, ReasonMalformed},
		{"a jwk member twice", func() string {
			return raw(strings.Replace(string(hj), `"kty":"EC"`, `"kty":"EC","kty":"EC"`, 1), string(cj))
		}, ReasonJWK},
		{"a jwk that is not a key", func() string {
			return rawES256(t, p256Key, hdr("jwk", map[string]any{"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA"}), good())
		}, ReasonJWK},
		{"a jwk of an unknown type", func() string { return rawES256(t, p256Key, hdr("jwk", map[string]any{"kty": "XY"}), good()) }, ReasonJWK},
		{"a jwk that is not an object", func() string { return rawES256(t, p256Key, hdr("jwk", "key"), good()) }, ReasonMalformed},
		{"HTM for htm", func() string { return rawES256(t, p256Key, hdr(), with(good(), "htm", nil, "HTM", "POST")) }, ReasonHTM},
		{"claims null", func() string { return raw(string(hj), "null") }, ReasonMalformed},
		{"a header with something after it", func() string { return raw(string(hj)+" {}", string(cj)) }, ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Verify(context.Background(), tc.proof(), check); ReasonOf(err) != tc.want {
				t.Fatalf("got %v, want reason %q", err, tc.want)
			}
		})
	}
	t.Run("escapes, spaces, a kid and claims it does not know are read", func(t *testing.T) {
		jwk := publicJWK(t, p256Key.Public())
		h := fmt.Sprintf(`{ "typ" : "dpop\u002Bjwt", "\u0061lg":"ES256", "kid":"k1", "jwk":{"kty":"EC","crv":"P-256","x":%q,"y":%q} }`, jwk["x"], jwk["y"])
		c := fmt.Sprintf(`{"htu":"https:\/\/app.example.com\/api\/v2\/payments","htm":"POST","iat":%d.0,"ath":%q,"jti":"j\u00e9-of-a-cached-key-1","nonce":null,"x":[{"y":"}"}]}`, t0.Unix(), TokenHash(testTok))
		if got, err := v.Verify(context.Background(), raw(h, c), check); err != nil || got.JKT != check.JKT {
			t.Fatalf("got %+v, %v; want accepted", got, err)
		}
	})
}

// signES256 is the compact JWS of input ("header.claims", as sent) signed
// ES256 with p256Key.
func signES256(t *testing.T, input string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, p256Key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64(sig)
}

// A bound session's proof is read without a general parse: a handful of
// allocations, most of them crypto/ecdsa's (a JOSE parse made over 200).
func TestVerifyOfACachedKeyAllocatesLittle(t *testing.T) {
	v, p, check := benchProof(t, p256Key, jose.ES256, 0)
	if _, err := v.Verify(context.Background(), p, check); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() { _, _ = v.Verify(context.Background(), p, check) }); n > 24 {
		t.Fatalf("%v allocations per proof, want at most 24", n)
	}
}
