package dpop

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

var (
	t0       = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	testURL  = "https://app.example.com/api/v2/payments"
	testTok  = "session-token-0123456789"
	p256Key  = mustEC(elliptic.P256())
	p256Key2 = mustEC(elliptic.P256())
)

func mustEC(c elliptic.Curve) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

// proofOf signs claims with key under alg, the public key in the header's
// jwk and typ dpop+jwt, with go-jose as an app's library would.
func proofOf(t testing.TB, key crypto.Signer, alg jose.SignatureAlgorithm, cl map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key},
		(&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cl)
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rawES256 builds a proof from a header and claims of the test's own
// making, signed ES256 with key: the shapes go-jose would not produce.
func rawES256(t testing.TB, key *ecdsa.PrivateKey, hdr, cl map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(hdr)
	c, _ := json.Marshal(cl)
	input := b64(h) + "." + b64(c)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64(sig)
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// publicJWK is key's public JWK as a JSON object.
func publicJWK(t testing.TB, key crypto.PublicKey) map[string]any {
	t.Helper()
	b, err := json.Marshal(jose.JSONWebKey{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func jktOf(t testing.TB, key crypto.PublicKey) string {
	t.Helper()
	s, err := Thumbprint(&jose.JSONWebKey{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var jtiSeq int

// good are the claims of a proof for the test request, with a new jti.
func good() map[string]any {
	jtiSeq++
	return map[string]any{"jti": fmt.Sprintf("jti-%012d", jtiSeq), "htm": "POST", "htu": testURL,
		"iat": t0.Unix(), "ath": TokenHash(testTok)}
}

func with(cl map[string]any, kv ...any) map[string]any {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(cl, kv[i].(string))
		} else {
			cl[kv[i].(string)] = kv[i+1]
		}
	}
	return cl
}

func newVerifier(t testing.TB, clock *testclock.Clock) *Verifier {
	t.Helper()
	v, err := NewVerifier(Options{Now: clock.Now, Replay: kv.NewMemory(clock.Now)})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerifyAcceptsAValidProof(t *testing.T) {
	clock := testclock.New(t0)
	v := newVerifier(t, clock)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	p384 := mustEC(elliptic.P384())
	for _, tc := range []struct {
		name string
		key  crypto.Signer
		alg  jose.SignatureAlgorithm
	}{
		{"ES256", p256Key, jose.ES256},
		{"ES384", p384, jose.ES384},
		{"EdDSA", edKey, jose.EdDSA},
		{"RS256", rsaKey, jose.RS256},
		{"PS256", rsaKey, jose.PS256},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jkt := jktOf(t, tc.key.Public())
			got, err := v.Verify(context.Background(), proofOf(t, tc.key, tc.alg, good()),
				Check{Method: "POST", URL: testURL, Token: testTok, JKT: jkt})
			if err != nil || got.JKT != jkt {
				t.Fatalf("got %+v, %v; want jkt %s, nil", got, err, jkt)
			}
		})
	}
	t.Run("a login: no token, no bound key; the proof's key is returned", func(t *testing.T) {
		got, err := v.Verify(context.Background(), proofOf(t, p256Key, jose.ES256, with(good(), "ath", nil)),
			Check{Method: "POST", URL: testURL})
		if want := jktOf(t, p256Key.Public()); err != nil || got.JKT != want {
			t.Fatalf("got %+v, %v; want jkt %s", got, err, want)
		}
	})
}

// Every refusal, each with its reason; the check does not depend on the
// order in which the verifier looks.
func TestVerifyRefuses(t *testing.T) {
	clock := testclock.New(t0)
	v := newVerifier(t, clock)
	jkt := jktOf(t, p256Key.Public())
	check := Check{Method: "POST", URL: testURL, Token: testTok, JKT: jkt}
	hdr := func(kv ...any) map[string]any {
		h := map[string]any{"alg": "ES256", "typ": "dpop+jwt", "jwk": publicJWK(t, p256Key.Public())}
		return with(h, kv...)
	}
	privJWK := publicJWK(t, p256Key.Public())
	raw, err := p256Key.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	privJWK["d"] = b64(raw)
	hs256 := func() string {
		h, _ := json.Marshal(map[string]any{"alg": "HS256", "typ": "dpop+jwt", "jwk": map[string]any{"kty": "oct", "k": b64([]byte("0123456789abcdef0123456789abcdef"))}})
		c, _ := json.Marshal(good())
		in := b64(h) + "." + b64(c)
		m := hmac.New(sha256.New, []byte("0123456789abcdef0123456789abcdef"))
		m.Write([]byte(in))
		return in + "." + b64(m.Sum(nil))
	}
	none := func() string {
		h, _ := json.Marshal(map[string]any{"alg": "none", "typ": "dpop+jwt", "jwk": publicJWK(t, p256Key.Public())})
		c, _ := json.Marshal(good())
		return b64(h) + "." + b64(c) + "."
	}
	tampered := func() string {
		p := proofOf(t, p256Key, jose.ES256, good())
		parts := strings.Split(p, ".")
		c, _ := json.Marshal(with(good(), "htm", "POST"))
		return parts[0] + "." + b64(c) + "." + parts[2]
	}
	weakRSA, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384 := mustEC(elliptic.P384())
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other := Check{Method: "POST", URL: testURL, Token: testTok}
	for _, tc := range []struct {
		name  string
		proof func() string
		check Check
		want  Reason
	}{
		{"not a JWS", func() string { return "not-a-jws" }, check, ReasonMalformed},
		{"a JSON serialization", func() string { return `{"payload":"e30","signatures":[]}` }, check, ReasonMalformed},
		{"a header that is not base64url", func() string { return "%%%.e30.AA" }, check, ReasonMalformed},
		{"larger than MaxProofBytes", func() string { return strings.Repeat("A", MaxProofBytes) + ".e30.AA" }, check, ReasonMalformed},
		{"alg none", none, check, ReasonAlg},
		{"alg HS256 with a symmetric jwk", hs256, check, ReasonAlg},
		{"an alg not allowed (ES512)", func() string { return proofOf(t, mustEC(elliptic.P521()), jose.ES512, good()) }, other, ReasonAlg},
		{"typ JWT", func() string { return rawES256(t, p256Key, hdr("typ", "JWT"), good()) }, check, ReasonTyp},
		{"no typ", func() string { return rawES256(t, p256Key, hdr("typ", nil), good()) }, check, ReasonTyp},
		{"no jwk", func() string { return rawES256(t, p256Key, hdr("jwk", nil), good()) }, check, ReasonJWK},
		{"a private jwk", func() string { return rawES256(t, p256Key, hdr("jwk", privJWK), good()) }, check, ReasonJWK},
		{"a jwk of another curve than alg's", func() string { return rawES256(t, p256Key, hdr("jwk", publicJWK(t, p384.Public())), good()) }, other, ReasonJWK},
		{"an RSA key under 2048 bits", func() string { return proofOf(t, weakRSA, jose.RS256, good()) }, other, ReasonJWK},
		{"a key other than the bound one", func() string { return proofOf(t, p256Key2, jose.ES256, good()) }, check, ReasonKey},
		{"an RSA key where an EC key is bound", func() string { return proofOf(t, rsaKey, jose.PS256, good()) }, check, ReasonKey},
		{"a signature that does not verify", tampered, check, ReasonSignature},
		{"the jwk of the bound key, signed by another", func() string { return rawES256(t, p256Key2, hdr(), good()) }, check, ReasonSignature},
		{"claims that are not JSON", func() string {
			h, _ := json.Marshal(hdr())
			in := b64(h) + "." + b64([]byte("nope"))
			sum := sha256.Sum256([]byte(in))
			r, s, _ := ecdsa.Sign(rand.Reader, p256Key, sum[:])
			sig := make([]byte, 64)
			r.FillBytes(sig[:32])
			s.FillBytes(sig[32:])
			return in + "." + b64(sig)
		}, check, ReasonMalformed},
		{"iat a string", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "iat", "1772366400")) }, check, ReasonMalformed},
		{"htm GET for a POST", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "htm", "GET")) }, check, ReasonHTM},
		{"htm post in lower case", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "htm", "post")) }, check, ReasonHTM},
		{"no htm", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "htm", nil)) }, check, ReasonHTM},
		{"htu another path", func() string {
			return proofOf(t, p256Key, jose.ES256, with(good(), "htu", "https://app.example.com/api/v2/pay"))
		}, check, ReasonHTU},
		{"htu another host", func() string {
			return proofOf(t, p256Key, jose.ES256, with(good(), "htu", "https://evil.example.com/api/v2/payments"))
		}, check, ReasonHTU},
		{"htu the internal listener's address", func() string {
			return proofOf(t, p256Key, jose.ES256, with(good(), "htu", "http://10.0.3.7:8080/api/v2/payments"))
		}, check, ReasonHTU},
		{"htu http where the public URL is https", func() string {
			return proofOf(t, p256Key, jose.ES256, with(good(), "htu", "http://app.example.com/api/v2/payments"))
		}, check, ReasonHTU},
		{"htu another port", func() string {
			return proofOf(t, p256Key, jose.ES256, with(good(), "htu", "https://app.example.com:8443/api/v2/payments"))
		}, check, ReasonHTU},
		{"htu whose query names the path", func() string {
			return proofOf(t, p256Key, jose.ES256, with(good(), "htu", "https://app.example.com/api?/v2/payments"))
		}, check, ReasonHTU},
		{"htu relative", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "htu", "/api/v2/payments")) }, check, ReasonHTU},
		{"no htu", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "htu", nil)) }, check, ReasonHTU},
		{"iat 61 s old", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "iat", t0.Unix()-61)) }, check, ReasonIAT},
		{"iat 6 s ahead", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "iat", t0.Unix()+6)) }, check, ReasonIAT},
		{"iat absurd", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "iat", 1e300)) }, check, ReasonIAT},
		{"no iat", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "iat", nil)) }, check, ReasonIAT},
		{"no ath with a token", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "ath", nil)) }, check, ReasonATH},
		{"ath of another token", func() string {
			return proofOf(t, p256Key, jose.ES256, with(good(), "ath", TokenHash("another-token")))
		}, check, ReasonATH},
		{"ath the token itself", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "ath", testTok)) }, check, ReasonATH},
		{"ath at a login", func() string { return proofOf(t, p256Key, jose.ES256, good()) }, Check{Method: "POST", URL: testURL}, ReasonATH},
		{"no jti", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "jti", nil)) }, check, ReasonJTI},
		{"an empty jti", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "jti", "")) }, check, ReasonJTI},
		{"a jti of one character", func() string { return proofOf(t, p256Key, jose.ES256, with(good(), "jti", "j")) }, check, ReasonJTI},
		{"a jti under 96 bits (15 characters)", func() string {
			return proofOf(t, p256Key, jose.ES256, with(good(), "jti", strings.Repeat("j", MinJTILen-1)))
		}, check, ReasonJTI},
		{"a jti over MaxJTILen", func() string {
			return proofOf(t, p256Key, jose.ES256, with(good(), "jti", strings.Repeat("j", MaxJTILen+1)))
		}, check, ReasonJTI},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(context.Background(), tc.proof(), tc.check)
			if got := ReasonOf(err); got != tc.want {
				t.Fatalf("got %v (reason %q), want reason %q", err, got, tc.want)
			}
			if strings.Contains(err.Error(), testTok) {
				t.Fatalf("the error %q holds the token", err)
			}
		})
	}
}

// The iat window: exactly MaxAge old and exactly MaxAhead ahead pass.
func TestVerifyWindowBounds(t *testing.T) {
	clock := testclock.New(t0)
	v := newVerifier(t, clock)
	check := Check{Method: "POST", URL: testURL, Token: testTok, JKT: jktOf(t, p256Key.Public())}
	for _, iat := range []int64{t0.Unix() - 60, t0.Unix() + 5} {
		if _, err := v.Verify(context.Background(), proofOf(t, p256Key, jose.ES256, with(good(), "iat", iat)), check); err != nil {
			t.Fatalf("iat %d s from now: got %v, want nil", iat-t0.Unix(), err)
		}
	}
}

// A proof is accepted once: the same proof again, or another proof of the
// same key with the same jti, is a replay for as long as a proof with that
// jti could pass the iat check; the same jti from another key is its own.
func TestVerifyRefusesReplays(t *testing.T) {
	clock := testclock.New(t0)
	store := kv.NewMemory(clock.Now)
	v, err := NewVerifier(Options{Now: clock.Now, Replay: store})
	if err != nil {
		t.Fatal(err)
	}
	check := Check{Method: "POST", URL: testURL, Token: testTok, JKT: jktOf(t, p256Key.Public())}
	cl := good()
	p := proofOf(t, p256Key, jose.ES256, cl)
	if _, err := v.Verify(context.Background(), p, check); err != nil {
		t.Fatalf("first: got %v, want nil", err)
	}
	if _, err := v.Verify(context.Background(), p, check); ReasonOf(err) != ReasonReplay {
		t.Fatalf("the same proof again: got %v, want a replay", err)
	}
	// At the far end of the window the proof still passes every other
	// check: its jti must still be remembered.
	clock.Advance(DefaultMaxAge)
	again := proofOf(t, p256Key, jose.ES256, cl) // another signature, the same claims
	if _, err := v.Verify(context.Background(), again, check); ReasonOf(err) != ReasonReplay {
		t.Fatalf("the same jti re-signed, %v later: got %v, want a replay", DefaultMaxAge, err)
	}
	otherCheck := Check{Method: "POST", URL: testURL, Token: testTok, JKT: jktOf(t, p256Key2.Public())}
	if _, err := v.Verify(context.Background(), proofOf(t, p256Key2, jose.ES256, cl), otherCheck); err != nil {
		t.Fatalf("the same jti from another key: got %v, want nil", err)
	}
}

type failingStore struct{}

func (failingStore) SetNX(context.Context, string, []byte, time.Duration) (bool, error) {
	return false, kv.ErrUnavailable
}

// A store that cannot answer fails the check closed, and is not a refused
// proof (the edge answers 503, not 401).
func TestVerifyFailsClosedWithoutTheStore(t *testing.T) {
	clock := testclock.New(t0)
	v, err := NewVerifier(Options{Now: clock.Now, Replay: failingStore{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(context.Background(), proofOf(t, p256Key, jose.ES256, good()), Check{Method: "POST", URL: testURL, Token: testTok})
	if !errors.Is(err, ErrUnavailable) || ReasonOf(err) != "" {
		t.Fatalf("got %v, want ErrUnavailable and no reason", err)
	}
}

func TestNewVerifierRefusesSymmetricAndNone(t *testing.T) {
	store := kv.NewMemory(nil)
	for _, algs := range [][]string{{"ES256", "HS256"}, {"none"}, {"ES256", ""}, {"RSA-OAEP"}} {
		if _, err := NewVerifier(Options{Algorithms: algs, Replay: store}); err == nil {
			t.Errorf("algorithms %q: got nil, want an error", algs)
		}
	}
	if _, err := NewVerifier(Options{}); err == nil {
		t.Error("no replay store: got nil, want an error")
	}
	v, err := NewVerifier(Options{Replay: store})
	if err != nil || v.Algorithms() != "ES256 ES384 EdDSA PS256 RS256" {
		t.Fatalf("got %v %q, want the default algorithms", err, v.Algorithms())
	}
}

func TestSameURL(t *testing.T) {
	for _, tc := range []struct {
		htu, want string
		same      bool
	}{
		{"https://app.example.com/api/x", "https://app.example.com/api/x", true},
		{"HTTPS://App.Example.COM/api/x", "https://app.example.com/api/x", true},
		{"https://app.example.com:443/api/x", "https://app.example.com/api/x", true},
		{"http://localhost:80/api/x", "http://localhost/api/x", true},
		{"https://app.example.com/api/x?limit=10", "https://app.example.com/api/x", true},
		{"https://app.example.com/api/x#frag", "https://app.example.com/api/x", true},
		{"https://app.example.com/api/%7Ex", "https://app.example.com/api/~x", true},
		{"https://app.example.com/api/a%2fb", "https://app.example.com/api/a%2Fb", true},
		{"https://app.example.com/api/./x", "https://app.example.com/api/x", true},
		{"https://app.example.com/api/y/../x", "https://app.example.com/api/x", true},
		{"https://app.example.com", "https://app.example.com/", true},
		{"https://[::1]:443/x", "https://[::1]/x", true},
		{"https://app.example.com/api/x/", "https://app.example.com/api/x", false},
		{"https://app.example.com/api/a%2Fb", "https://app.example.com/api/a/b", false},
		{"https://app.example.com/API/x", "https://app.example.com/api/x", false},
		{"https://app.example.com:8443/api/x", "https://app.example.com/api/x", false},
		{"http://app.example.com/api/x", "https://app.example.com/api/x", false},
		{"https://user@app.example.com/api/x", "https://app.example.com/api/x", false},
		{"ftp://app.example.com/api/x", "ftp://app.example.com/api/x", false},
		{"https://app.example.com/api/%zz", "https://app.example.com/api/%zz", false},
		{"/api/x", "/api/x", false},
	} {
		if got := SameURL(tc.htu, tc.want); got != tc.same {
			t.Errorf("SameURL(%q, %q) = %v, want %v", tc.htu, tc.want, got, tc.same)
		}
	}
}
