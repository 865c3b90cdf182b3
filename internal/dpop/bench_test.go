package dpop

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/fintech-bff/bff/internal/kv"
)

// acceptAll is a replay store that remembers nothing: the benchmarks of
// the proof check alone reuse one proof.
type acceptAll struct{}

func (acceptAll) SetNX(context.Context, string, []byte, time.Duration) (bool, error) {
	return true, nil
}

// BenchmarkVerify is the CPU of checking one proof of a bound session
// (parse, header, key, signature, claims), without the replay store's
// round trip (BenchmarkReplay*), by algorithm: the session's key is in the
// key cache, as on every request after its first.
func BenchmarkVerify(b *testing.B) {
	rsaKey, edKey := otherKeys()
	for _, tc := range []struct {
		name string
		key  crypto.Signer
		alg  jose.SignatureAlgorithm
	}{
		{"ES256", p256Key, jose.ES256},
		{"EdDSA", edKey, jose.EdDSA},
		{"PS256", rsaKey, jose.PS256},
	} {
		b.Run(tc.name, func(b *testing.B) {
			v, p, check := benchProof(b, tc.key, tc.alg, 0)
			benchmarkCPU(b, func() {
				if _, err := v.Verify(context.Background(), p, check); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkVerifyFirstProof is an ES256 proof checked as a key's first
// (no key cache: the jwk parsed, its point decoded, its thumbprint
// computed); BenchmarkVerifyGoJOSE the same the way Verify did before it
// read proofs itself.
func BenchmarkVerifyFirstProof(b *testing.B) {
	v, p, check := benchProof(b, p256Key, jose.ES256, -1)
	benchmarkCPU(b, func() {
		if _, err := v.Verify(context.Background(), p, check); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkECDSAVerify is the ES256 signature check alone (crypto/ecdsa,
// P-256), what a proof's check cannot go below.
func BenchmarkECDSAVerify(b *testing.B) {
	sum := sha256.Sum256([]byte("header.claims"))
	sig, err := ecdsa.SignASN1(rand.Reader, p256Key, sum[:])
	if err != nil {
		b.Fatal(err)
	}
	benchmarkCPU(b, func() {
		if !ecdsa.VerifyASN1(&p256Key.PublicKey, sum[:], sig) {
			b.Fatal("refused")
		}
	})
}

// benchmarkCPU runs op b.N times, reporting allocations and the process's
// CPU per op (cpu-ns/op, with ns/op: on a machine shared with other work
// ns/op also counts the waits for a core).
func benchmarkCPU(b *testing.B, op func()) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		op()
	}
	b.StopTimer()
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	}
}

// benchProof is a verifier that remembers no jti (so the one proof passes
// every time), with the key cache of keyCache (Options.KeyCache), a proof
// of key, and the check of a session bound to key it passes.
func benchProof(b testing.TB, key crypto.Signer, alg jose.SignatureAlgorithm, keyCache int) (*Verifier, string, Check) {
	b.Helper()
	now := time.Now()
	v, err := NewVerifier(Options{Now: func() time.Time { return now }, Replay: acceptAll{}, KeyCache: keyCache})
	if err != nil {
		b.Fatal(err)
	}
	p := proofOf(b, key, alg, map[string]any{"jti": "jti-of-the-bench", "htm": "GET", "htu": testURL, "iat": now.Unix(), "ath": TokenHash(testTok)})
	return v, p, Check{Method: "GET", URL: testURL, Token: testTok, JKT: jktOf(b, key.Public())}
}

// BenchmarkReplayMemory is the jti claim on the in-process store (one
// instance, development): a map under a lock.
func BenchmarkReplayMemory(b *testing.B) {
	store := kv.NewMemory(nil)
	benchmarkReplay(b, store)
}

func benchmarkReplay(b *testing.B, store ReplayStore) {
	b.Helper()
	jkt := jktOf(b, p256Key.Public())
	var claim [16]byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var jti [8]byte
		binary.BigEndian.PutUint64(jti[:], uint64(i))
		_, _ = rand.Read(claim[:])
		ok, err := store.SetNX(context.Background(), replayKey(jkt, base64.RawURLEncoding.EncodeToString(jti[:])), claim[:], time.Minute)
		if err != nil || !ok {
			b.Fatalf("got %v, %v", ok, err)
		}
	}
}

// BenchmarkWindowNonce is what the alternative to the jti cache would cost
// per request: a server nonce that is an HMAC of the current time window
// under a key the instances share, checked against this window's and the
// previous one's (no store command; it would not refuse a replay within
// the window, see the package doc).
func BenchmarkWindowNonce(b *testing.B) {
	key := make([]byte, 32)
	nonce := func(window int64) string {
		m := hmac.New(sha256.New, key)
		var w [8]byte
		binary.BigEndian.PutUint64(w[:], uint64(window))
		m.Write(w[:])
		return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	}
	window := time.Now().Unix() / 30
	sent := nonce(window - 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if sent != nonce(window) && sent != nonce(window-1) {
			b.Fatal("nonce refused")
		}
	}
}
