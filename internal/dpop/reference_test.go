package dpop

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/testing/testclock"
)

// verifyGoJOSE is Verify as it was before the package read proofs itself:
// go-jose's general parse of the JWS, the jwk parsed and its thumbprint
// computed for every proof, the claims through encoding/json. It is the
// reference FuzzVerifyMatchesGoJOSE holds Verify to, and what
// BenchmarkVerifyGoJOSE measures.
func (v *Verifier) verifyGoJOSE(ctx context.Context, proof string, c Check) (Proof, error) {
	if len(proof) > MaxProofBytes || strings.Count(proof, ".") != 2 {
		return Proof{}, refused(ReasonMalformed)
	}
	h, err := goJOSEHeader(proof[:strings.IndexByte(proof, '.')])
	if err != nil {
		return Proof{}, refused(ReasonMalformed)
	}
	if !slices.Contains(v.algs, jose.SignatureAlgorithm(h.Alg)) {
		return Proof{}, refused(ReasonAlg)
	}
	if h.Typ == nil || !strings.EqualFold(*h.Typ, "dpop+jwt") {
		return Proof{}, refused(ReasonTyp)
	}
	if h.JWK == nil || slices.ContainsFunc(privateParams, func(p string) bool { _, ok := h.JWK[p]; return ok }) {
		return Proof{}, refused(ReasonJWK)
	}
	jws, err := jose.ParseSignedCompact(proof, v.algs)
	if err != nil || len(jws.Signatures) != 1 {
		return Proof{}, refused(ReasonMalformed)
	}
	jwk := jws.Signatures[0].Header.JSONWebKey
	if jwk == nil || !jwk.Valid() || !jwk.IsPublic() || !goJOSEFits(jwk.Key, h.Alg) {
		return Proof{}, refused(ReasonJWK)
	}
	sum, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return Proof{}, refused(ReasonJWK)
	}
	jkt := base64.RawURLEncoding.EncodeToString(sum)
	if c.JKT != "" && subtle.ConstantTimeCompare([]byte(jkt), []byte(c.JKT)) != 1 {
		return Proof{}, refused(ReasonKey)
	}
	payload, err := jws.Verify(jwk)
	if err != nil {
		return Proof{}, refused(ReasonSignature)
	}
	var cl struct {
		JTI *string  `json:"jti"`
		HTM *string  `json:"htm"`
		HTU *string  `json:"htu"`
		IAT *float64 `json:"iat"`
		ATH *string  `json:"ath"`
	}
	if err := json.Unmarshal(payload, &cl); err != nil {
		return Proof{}, refused(ReasonMalformed)
	}
	if cl.HTM == nil || *cl.HTM != c.Method {
		return Proof{}, refused(ReasonHTM)
	}
	if cl.HTU == nil || !SameURL(*cl.HTU, c.URL) {
		return Proof{}, refused(ReasonHTU)
	}
	if cl.IAT == nil || !v.fresh(*cl.IAT, v.now()) {
		return Proof{}, refused(ReasonIAT)
	}
	if c.Token == "" {
		if cl.ATH != nil {
			return Proof{}, refused(ReasonATH)
		}
	} else if cl.ATH == nil || subtle.ConstantTimeCompare([]byte(*cl.ATH), []byte(TokenHash(c.Token))) != 1 {
		return Proof{}, refused(ReasonATH)
	}
	if cl.JTI == nil || len(*cl.JTI) < MinJTILen || len(*cl.JTI) > MaxJTILen {
		return Proof{}, refused(ReasonJTI)
	}
	var claim [16]byte
	_, _ = rand.Read(claim[:])
	fresh, err := v.replay.SetNX(ctx, replayKey(jkt, *cl.JTI), claim[:], v.replayTTL)
	if err != nil {
		return Proof{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if !fresh {
		return Proof{}, refused(ReasonReplay)
	}
	return Proof{JKT: jkt}, nil
}

func goJOSEHeader(part string) (struct {
	Alg string                     `json:"alg"`
	Typ *string                    `json:"typ"`
	JWK map[string]json.RawMessage `json:"jwk"`
}, error) {
	var h struct {
		Alg string                     `json:"alg"`
		Typ *string                    `json:"typ"`
		JWK map[string]json.RawMessage `json:"jwk"`
	}
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return h, err
	}
	return h, json.NewDecoder(bytes.NewReader(b)).Decode(&h)
}

func goJOSEFits(key any, alg string) bool {
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		want := map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}[alg]
		return want != nil && k.Curve == want
	case *rsa.PublicKey:
		return (strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")) && k.N.BitLen() >= 2048
	}
	return alg == string(jose.EdDSA)
}

var (
	otherKeysOnce sync.Once
	rsaTestKey    *rsa.PrivateKey
	edTestKey     ed25519.PrivateKey
)

// otherKeys are an RSA 2048 and an Ed25519 key, made once per test binary.
func otherKeys() (*rsa.PrivateKey, ed25519.PrivateKey) {
	otherKeysOnce.Do(func() {
		var err error
		if rsaTestKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		_, edTestKey, _ = ed25519.GenerateKey(rand.Reader)
	})
	return rsaTestKey, edTestKey
}

// FuzzVerifyMatchesGoJOSE: Verify accepts exactly the proofs that the
// go-jose verifier it replaced accepts, for a bound session (the bound
// key's jwk already in the key cache, as on a session's every request
// after its first) and for a login (any key), and names the same key.
func FuzzVerifyMatchesGoJOSE(f *testing.F) {
	clock := testclock.New(t0)
	rsaKey, edKey := otherKeys()
	jkt := jktOf(f, p256Key.Public())
	f.Add(proofOf(f, p256Key, jose.ES256, good()), false)
	f.Add(proofOf(f, p256Key2, jose.ES256, good()), false)
	f.Add(rawES256(f, p256Key, map[string]any{"alg": "ES256", "typ": "dpop+jwt", "jwk": publicJWK(f, p256Key.Public())}, good()), false)
	f.Add(proofOf(f, p256Key, jose.ES256, with(good(), "ath", nil)), true)
	f.Add(proofOf(f, edKey, jose.EdDSA, with(good(), "ath", nil)), true)
	f.Add(proofOf(f, rsaKey, jose.PS256, with(good(), "ath", nil)), true)
	f.Add(proofOf(f, rsaKey, jose.RS256, with(good(), "ath", nil)), true)
	f.Add(proofOf(f, mustEC(elliptic.P384()), jose.ES384, with(good(), "ath", nil)), true)
	f.Add("eyJhbGciOiJub25lIn0.e30.", false)
	f.Add("..", true)
	// Refused after its signature (htm), so it claims no jti: it only puts
	// the bound key in the key cache.
	warm := proofOf(f, p256Key, jose.ES256, with(good(), "htm", "GET"))
	f.Fuzz(func(t *testing.T, proof string, login bool) {
		check := Check{Method: "POST", URL: testURL, Token: testTok, JKT: jkt}
		if login {
			check = Check{Method: "POST", URL: testURL}
		}
		v, err := NewVerifier(Options{Now: clock.Now, Replay: kv.NewMemory(clock.Now)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(context.Background(), warm, Check{Method: "POST", URL: testURL, Token: testTok, JKT: jkt}); ReasonOf(err) != ReasonHTM {
			t.Fatalf("the warming proof: got %v, want reason htm", err)
		}
		ref, err := NewVerifier(Options{Now: clock.Now, Replay: kv.NewMemory(clock.Now)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := v.Verify(context.Background(), proof, check)
		want, refErr := ref.verifyGoJOSE(context.Background(), proof, check)
		if (err == nil) != (refErr == nil) || got != want {
			t.Fatalf("Verify: %+v, %v; go-jose: %+v, %v", got, err, want, refErr)
		}
	})
}

// BenchmarkVerifyGoJOSE is BenchmarkVerify's ES256 proof checked the way
// Verify did before it read proofs itself (verifyGoJOSE): the evidence for
// the package's own JWS reading and key cache.
func BenchmarkVerifyGoJOSE(b *testing.B) {
	v, p, check := benchProof(b, p256Key, jose.ES256, 0)
	benchmarkCPU(b, func() {
		if _, err := v.verifyGoJOSE(context.Background(), p, check); err != nil {
			b.Fatal(err)
		}
	})
}
