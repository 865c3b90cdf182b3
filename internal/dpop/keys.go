package dpop

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"slices"
	"strings"
	"sync"

	"github.com/go-jose/go-jose/v4"
)

// publicKey is a proof's jwk read once: the key, ready to verify with, and
// its thumbprint. It is a function of the jwk's bytes alone, so the key
// cache can hand it to every proof carrying the same bytes.
type publicKey struct {
	jkt string // base64url SHA-256 thumbprint (RFC 7638)
	ec  *ecdsa.PublicKey
	rsa *rsa.PublicKey
	ed  ed25519.PublicKey
	// ecAlg is the one ES algorithm an EC key's curve signs with.
	ecAlg string
}

// parseKey reads a jwk (a JSON object) as go-jose reads it: nil when it
// does not parse, has a private or symmetric member (or a member twice),
// or is not a public EC, RSA or Ed25519 key.
func parseKey(raw []byte) *publicKey {
	if jwkPrivate(raw) {
		return nil
	}
	var jwk jose.JSONWebKey
	// A copy: go-jose may keep what it reads, and raw may be on Verify's stack.
	if err := jwk.UnmarshalJSON(slices.Clone(raw)); err != nil || !jwk.Valid() || !jwk.IsPublic() {
		return nil
	}
	sum, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return nil
	}
	k := &publicKey{jkt: base64.RawURLEncoding.EncodeToString(sum)}
	switch key := jwk.Key.(type) {
	case *ecdsa.PublicKey:
		k.ec = key
		switch key.Curve {
		case elliptic.P256():
			k.ecAlg = "ES256"
		case elliptic.P384():
			k.ecAlg = "ES384"
		case elliptic.P521():
			k.ecAlg = "ES512"
		}
	case *rsa.PublicKey:
		k.rsa = key
	case ed25519.PublicKey:
		k.ed = key
	default:
		return nil
	}
	return k
}

// fits reports whether the key is of the kind alg signs with: the curve of
// an ES algorithm, RSA of 2048 bits or more for RS and PS, Ed25519 for
// EdDSA.
func (k *publicKey) fits(alg string) bool {
	switch {
	case k.ec != nil:
		return k.ecAlg != "" && alg == k.ecAlg
	case k.rsa != nil:
		return (strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")) && k.rsa.N.BitLen() >= 2048
	}
	return alg == string(jose.EdDSA)
}

// verify reports whether sig is the signature under alg (one the key
// fits) of input, the proof's "header.payload". It checks as go-jose's
// verifiers do: an ES signature is the two fixed-size integers r and s, a
// PS one has its salt length found from the signature.
func (k *publicKey) verify(alg, input string, sig []byte) bool {
	// The input is hashed from a copy on the stack: hashing the string
	// through a []byte conversion or io.WriteString copies it to the heap.
	var stack [2048]byte
	var in []byte
	if len(input) <= len(stack) {
		in = stack[:copy(stack[:], input)]
	} else {
		in = []byte(input)
	}
	switch alg {
	case "ES256", "ES384", "ES512":
		size := (k.ec.Curve.Params().BitSize + 7) / 8
		if len(sig) != 2*size {
			return false
		}
		// ecdsa.VerifyASN1 keeps neither, but its parameters escape: one
		// allocation for both.
		scratch := new(struct {
			sum [sha512.Size]byte
			der [2*(3+66) + 3]byte
		})
		return ecdsa.VerifyASN1(k.ec, digest(alg, in, &scratch.sum), derSignature(scratch.der[:0], sig[:size], sig[size:]))
	case "EdDSA":
		return ed25519.Verify(k.ed, in, sig)
	}
	var sum [sha512.Size]byte
	switch alg {
	case "RS256", "PS256":
		return rsaVerify(k.rsa, alg, crypto.SHA256, digest(alg, in, &sum), sig)
	case "RS384", "PS384":
		return rsaVerify(k.rsa, alg, crypto.SHA384, digest(alg, in, &sum), sig)
	case "RS512", "PS512":
		return rsaVerify(k.rsa, alg, crypto.SHA512, digest(alg, in, &sum), sig)
	}
	return false
}

func rsaVerify(key *rsa.PublicKey, alg string, h crypto.Hash, sum, sig []byte) bool {
	if alg[0] == 'P' {
		return rsa.VerifyPSS(key, h, sum, sig, nil) == nil
	}
	return rsa.VerifyPKCS1v15(key, h, sum, sig) == nil
}

// digest is the hash of input that alg signs (SHA-256, -384 or -512 by
// its last three digits), in out.
func digest(alg string, input []byte, out *[sha512.Size]byte) []byte {
	switch alg[len(alg)-3:] {
	case "256":
		s := sha256.Sum256(input)
		return append(out[:0], s[:]...)
	case "384":
		s := sha512.Sum384(input)
		return append(out[:0], s[:]...)
	}
	s := sha512.Sum512(input)
	return append(out[:0], s[:]...)
}

// derSignature appends the ASN.1 DER of an ECDSA signature, SEQUENCE {
// INTEGER r, INTEGER s }, of the big-endian unsigned r and s, to out
// (what crypto/ecdsa.VerifyASN1 reads; ecdsa.Verify would make it from
// two big.Ints).
func derSignature(out, r, s []byte) []byte {
	r, s = trimZeros(r), trimZeros(s)
	n := intLen(r) + intLen(s)
	out = append(out, 0x30)
	if n >= 0x80 {
		out = append(out, 0x81)
	}
	out = append(out, byte(n))
	return appendInt(appendInt(out, r), s)
}

func trimZeros(b []byte) []byte {
	for len(b) > 0 && b[0] == 0 {
		b = b[1:]
	}
	return b
}

// intLen is the DER length of the INTEGER of the unsigned b (no leading
// zeros): a zero byte for 0, one before a first byte with its top bit set.
func intLen(b []byte) int {
	if len(b) == 0 || b[0]&0x80 != 0 {
		return 2 + len(b) + 1
	}
	return 2 + len(b)
}

func appendInt(out, b []byte) []byte {
	out = append(out, 0x02, byte(intLen(b)-2))
	if len(b) == 0 || b[0]&0x80 != 0 {
		out = append(out, 0)
	}
	return append(out, b...)
}

// DefaultKeyCache is Options.KeyCache when zero.
const DefaultKeyCache = 4096

// keyCache remembers the keys of recent proofs by the exact bytes of their
// jwk, so that a bound session's proofs, which carry the same jwk every
// time, are checked with the key read at their first: a lookup of the
// bytes instead of a JSON parse, a point decoding and a thumbprint. It is
// bounded: two generations of at most size keys (and maxBytes of jwk)
// each; a key found in the older one moves to the newer, and when the
// newer is full it becomes the older and the older is dropped. Only a key
// that signed a proof is added.
type keyCache struct {
	mu       sync.RWMutex
	size     int
	cur, old map[string]*publicKey
	curBytes int
}

// keyCacheBytes bounds the jwk bytes of one generation (a P-256 jwk is
// about 120 bytes, an RSA 4096 one about 750).
const keyCacheBytes = 1 << 20

func newKeyCache(size int) *keyCache {
	if size <= 0 {
		return nil
	}
	return &keyCache{size: size, cur: map[string]*publicKey{}, old: map[string]*publicKey{}}
}

// get is the key read from jwk before, or nil.
func (c *keyCache) get(jwk []byte) *publicKey {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	k, inCur := c.cur[string(jwk)]
	if !inCur {
		k = c.old[string(jwk)]
	}
	c.mu.RUnlock()
	if k != nil && !inCur {
		c.put(jwk, k)
	}
	return k
}

// put remembers k as the key of jwk.
func (c *keyCache) put(jwk []byte, k *publicKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.cur[string(jwk)]; ok {
		return
	}
	if len(c.cur) >= c.size || c.curBytes+len(jwk) > keyCacheBytes {
		c.old, c.cur, c.curBytes = c.cur, make(map[string]*publicKey, len(c.cur)), 0
	}
	c.cur[string(jwk)] = k
	c.curBytes += len(jwk)
}
