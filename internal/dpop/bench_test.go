package dpop

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
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
// (parse, header, thumbprint, signature, claims), without the replay
// store's round trip (BenchmarkReplay*), by algorithm.
func BenchmarkVerify(b *testing.B) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
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
			now := time.Now()
			v, err := NewVerifier(Options{Now: func() time.Time { return now }, Replay: acceptAll{}})
			if err != nil {
				b.Fatal(err)
			}
			p := proofOf(b, tc.key, tc.alg, map[string]any{"jti": "j", "htm": "GET", "htu": testURL, "iat": now.Unix(), "ath": TokenHash(testTok)})
			check := Check{Method: "GET", URL: testURL, Token: testTok, JKT: jktOf(b, tc.key.Public())}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := v.Verify(context.Background(), p, check); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
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
