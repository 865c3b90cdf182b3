// Package dpop verifies DPoP proofs (RFC 9449): the signed JWT a native app
// sends in the DPoP header to show that it holds the private key its
// session is bound to. A session bound at login to a key's thumbprint (RFC
// 7638, SHA-256: the jkt) is accepted only with a proof of that key, for
// this request's method and public URL, issued just now, never seen
// before, and naming the session token it comes with (ath).
//
// Replays are refused with a cache of the proofs' jti in the shared store
// (ReplayStore: one SET NX with a ttl per proof, under the store's key
// prefix), not with server nonces (DPoP-Nonce). A nonce that rotates with
// a time window (an HMAC of the window under a shared key) costs no store
// command, but it bounds only how old a proof may be, which iat already
// does: a proof replayed within the window, on the same instance or
// another, still passes, so "a reused proof is refused" needs the jti
// cache either way, and a nonce would add a 401 round trip for every app
// at each rotation on top. docs/operations.md, "Device-bound sessions
// (DPoP)", has the measured costs.
//
// Reading a proof is the package's own (jws.go), not a general JOSE
// parse: the three base64url parts decoded into a buffer on the stack, the
// header and the claims checked as JSON by encoding/json and then read
// member by member, strictly (a name twice, crit, b64, x5c, x5u or jku is
// refused; names compare exactly). The key is go-jose's to read, once per
// jwk: the key cache (keys.go) keeps, by the exact bytes of a jwk whose
// proof verified, the key and its thumbprint, so a bound session's
// proofs, which carry the same jwk every time, cost a map lookup, a
// comparison of the thumbprint with the session's and one signature check
// (crypto/ecdsa, crypto/ed25519 or crypto/rsa, called as go-jose calls
// them). Why: go-jose's parse of every proof, with the jwk's point decoded
// and its thumbprint hashed each time, cost an ES256 proof 230 allocations
// (16 KB) and 1.4 to 1.9 times the CPU of reading it here (15 allocations,
// 10 of them crypto/ecdsa's), which is the ECDSA check and little more
// (BenchmarkVerify, BenchmarkVerifyFirstProof and BenchmarkVerifyGoJOSE
// against BenchmarkECDSAVerify; docs/operations.md has the figures). The
// evidence that it reads what go-jose read is FuzzVerifyMatchesGoJOSE (the
// same proofs accepted as by the go-jose verifier it replaced, kept in
// reference_test.go, with the bound key cached and at a login), FuzzObject
// (each JSON object read as encoding/json reads it),
// TestVerifyKeyChecksWithAndWithoutTheKeyCache, and dpop_test.go and
// FuzzVerify as they were before it.
//
// What is the package's own besides is the checks RFC 9449 adds on top of
// a JWS. The Go DPoP packages there are (open-rails/authkit's dpop, ES256
// only; fapigo's, an internal package; a few proofs of concept) are young,
// single-maintainer or not importable, and none checks against a
// configured public URL with a shared replay store as the BFF needs; the
// evidence that these checks hold is dpop_test.go (every refusal, the
// window's edges, replays across two store clients) and FuzzVerify (only a
// proof signed by the bound key passes).
//
// The package is plain Go: no HTTP framework, no store of its own.
package dpop

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Reason is why a proof was refused: a log field and a metric label, never
// shown to the client (every refusal answers alike).
type Reason string

// The reasons a proof is refused.
const (
	// ReasonMissing: no proof where one is required (the edge's).
	ReasonMissing Reason = "missing"
	// ReasonMultiple: more than one DPoP header (the edge's).
	ReasonMultiple Reason = "multiple"
	// ReasonScheme: a bound session sent as Bearer or as the cookie, or an
	// unbound one as DPoP (the edge's).
	ReasonScheme Reason = "scheme"
	// ReasonMalformed: not a compact JWS with a JSON header and claims of
	// the right types, a member of either twice, a crit, b64, x5c, x5u or
	// jku header, or over MaxProofBytes.
	ReasonMalformed Reason = "malformed"
	// ReasonAlg: none, a symmetric algorithm (HS*), or one not allowed.
	ReasonAlg Reason = "alg"
	// ReasonTyp: typ is not dpop+jwt.
	ReasonTyp Reason = "typ"
	// ReasonJWK: no jwk header, or one with private or symmetric parts, a
	// member twice, an unknown key type or one that does not parse as a
	// key, a curve that is not alg's, or an RSA key under 2048 bits.
	ReasonJWK Reason = "jwk"
	// ReasonSignature: the signature does not verify with the header's jwk.
	ReasonSignature Reason = "signature"
	// ReasonKey: the proof's key is not the one the session is bound to.
	ReasonKey Reason = "key"
	// ReasonHTM: htm is not the request's method.
	ReasonHTM Reason = "htm"
	// ReasonHTU: htu is not the request's public URL.
	ReasonHTU Reason = "htu"
	// ReasonIAT: iat missing, too old or too far ahead.
	ReasonIAT Reason = "iat"
	// ReasonJTI: jti missing, shorter than MinJTILen or longer than
	// MaxJTILen.
	ReasonJTI Reason = "jti"
	// ReasonATH: ath missing or not the hash of the token sent, or present
	// where no token is (a login).
	ReasonATH Reason = "ath"
	// ReasonReplay: this key already sent a proof with this jti.
	ReasonReplay Reason = "replay"
)

// Error is a refused proof. Its text names the reason only, never a value
// of the proof.
type Error struct {
	Reason Reason
}

func (e *Error) Error() string { return "dpop: proof refused: " + string(e.Reason) }

func refused(r Reason) error { return &Error{Reason: r} }

// ReasonOf is err's reason when err is a refused proof, else "".
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// ReplayStore remembers the proofs seen. SetNX stores value at key for ttl
// when key is absent and reports whether it did (or the key already holds
// this value: a command re-sent after a timeout finds its own claim); an
// error is the store failing, never a replay. *kv.Redis and *kv.Memory
// satisfy it.
type ReplayStore interface {
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
}

// ErrUnavailable wraps a replay store's failure: the proof could not be
// checked (the edge answers 503, failing closed).
var ErrUnavailable = errors.New("dpop: replays cannot be checked")

// Limits on what a proof may hold: a proof is a few hundred bytes (an RSA
// 4096 key makes it about 1.5 KiB), and the jti a random value of 96 bits
// or more (RFC 9449, section 11.1): a string cannot show its entropy, so
// its length is held to what 96 bits take in the densest usual encoding,
// 16 characters of base64url (a UUID has 36, 16 random bytes in
// base64url 22).
const (
	MaxProofBytes = 8 << 10
	MinJTILen     = 16
	MaxJTILen     = 256
)

// Defaults of Options.
const (
	// DefaultMaxAge is how old a proof's iat may be: long enough for a
	// phone's request to cross a slow network, short enough that a jti
	// need not be remembered long.
	DefaultMaxAge = 60 * time.Second
	// DefaultMaxAhead is how far ahead of this instance's clock iat may
	// be: the skew between a phone's clock (NTP-set) and the servers'.
	DefaultMaxAhead = 5 * time.Second
	// replayMargin keeps a jti a little longer than a proof with it could
	// be accepted, for the skew between the instances' clocks.
	replayMargin = 5 * time.Second
)

// DefaultAlgorithms are the signature algorithms accepted when Options
// names none: asymmetric only (RFC 9449 section 3.1).
var DefaultAlgorithms = []string{string(jose.ES256), string(jose.ES384), string(jose.EdDSA), string(jose.PS256), string(jose.RS256)}

// Options configures a Verifier.
type Options struct {
	// Algorithms are the JWS algorithms accepted (DefaultAlgorithms when
	// empty). none and the symmetric ones (HS*) are refused by NewVerifier.
	Algorithms []string
	// MaxAge and MaxAhead bound iat against Now: from MaxAge before it
	// to MaxAhead after it (DefaultMaxAge, DefaultMaxAhead when zero).
	MaxAge, MaxAhead time.Duration
	// Now is the clock iat is checked against; time.Now when nil.
	Now func() time.Time
	// Replay remembers the jti of every accepted proof, per key, for
	// MaxAge + MaxAhead and a margin: shared by every instance, so that a
	// proof is accepted once across all of them. Required.
	Replay ReplayStore
	// KeyCache is how many keys of recent proofs the verifier keeps read,
	// by the bytes of their jwk (DefaultKeyCache when zero; up to twice as
	// many are held; negative keeps none): a bound session's proofs carry
	// the same jwk every time, and a key kept is not parsed, decoded and
	// hashed again for each.
	KeyCache int
}

// Verifier checks proofs. It is safe for concurrent use.
type Verifier struct {
	algs      []jose.SignatureAlgorithm
	algNames  string
	maxAge    time.Duration
	maxAhead  time.Duration
	now       func() time.Time
	replay    ReplayStore
	replayTTL time.Duration
	keys      *keyCache
}

// NewVerifier returns a Verifier, or an error when o names an algorithm
// that is not an asymmetric signature one or has no replay store.
func NewVerifier(o Options) (*Verifier, error) {
	if o.Replay == nil {
		return nil, errors.New("dpop: a replay store is required")
	}
	if len(o.Algorithms) == 0 {
		o.Algorithms = DefaultAlgorithms
	}
	v := &Verifier{maxAge: o.MaxAge, maxAhead: o.MaxAhead, now: o.Now, replay: o.Replay}
	for _, a := range o.Algorithms {
		if !asymmetric(a) {
			return nil, fmt.Errorf("dpop: %q is not an asymmetric signature algorithm", a)
		}
		v.algs = append(v.algs, jose.SignatureAlgorithm(a))
	}
	v.algNames = strings.Join(o.Algorithms, " ")
	if v.maxAge <= 0 {
		v.maxAge = DefaultMaxAge
	}
	if v.maxAhead <= 0 {
		v.maxAhead = DefaultMaxAhead
	}
	if v.now == nil {
		v.now = time.Now
	}
	v.replayTTL = v.maxAge + v.maxAhead + replayMargin
	if o.KeyCache == 0 {
		o.KeyCache = DefaultKeyCache
	}
	v.keys = newKeyCache(o.KeyCache)
	return v, nil
}

// asymmetric reports whether alg is one of the asymmetric JWS signature
// algorithms go-jose verifies.
func asymmetric(alg string) bool {
	switch jose.SignatureAlgorithm(alg) {
	case jose.ES256, jose.ES384, jose.ES512, jose.EdDSA, jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512:
		return true
	}
	return false
}

// Algorithms is the accepted algorithms separated by spaces, as the algs
// parameter of WWW-Authenticate: DPoP names them.
func (v *Verifier) Algorithms() string { return v.algNames }

// Check is what a proof must match.
type Check struct {
	// Method is the request's method (htm).
	Method string
	// URL is the request's URL as the client sees it: the public origin
	// and the path, without query (htu; compared after RFC 3986's
	// syntax- and scheme-based normalization, RFC 9449 section 4.3).
	URL string
	// Token is the session token sent with the proof, whose hash ath
	// must be; "" for a login, where the proof must have no ath.
	Token string
	// JKT is the thumbprint of the key the session is bound to; "" for a
	// login, where any key is accepted (and the session bound to it).
	JKT string
}

// Proof is what an accepted proof says.
type Proof struct {
	// JKT is the base64url SHA-256 thumbprint of the proof's key (RFC 7638).
	JKT string
}

// privateParams are the JWK members that only a private or symmetric key
// has (RFC 7518 section 6).
var privateParams = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// maxDecoded is what a usual proof's three parts decode to at most (an
// ES256 proof: about 230 + 200 + 64 bytes): Verify decodes them into a
// buffer of this size on its stack, a larger proof's on the heap.
const maxDecoded = 1536

// Verify checks proof against c and, when it passes, remembers its jti so
// that it is never accepted again (on any instance sharing the store). A
// refusal is an *Error with its reason; a store failure wraps
// ErrUnavailable.
//
// The checks follow RFC 9449 section 4.3: one compact JWS, typ dpop+jwt,
// an allowed asymmetric alg, a public jwk (of c.JKT when set), a signature
// that verifies with it, htm and htu matching, iat within the window, a
// jti, ath the token's hash; the key is checked before the signature so
// that a proof of another key costs no signature check. A jwk seen before
// (the same bytes: a bound session's every proof) is not read again: its
// key and thumbprint come from the key cache.
func (v *Verifier) Verify(ctx context.Context, proof string, c Check) (Proof, error) {
	if len(proof) > MaxProofBytes || strings.Count(proof, ".") != 2 {
		return Proof{}, refused(ReasonMalformed)
	}
	dot1 := strings.IndexByte(proof, '.')
	dot2 := dot1 + 1 + strings.IndexByte(proof[dot1+1:], '.')
	var buf [maxDecoded]byte
	dec := buf[:0]
	if n := base64.RawURLEncoding.DecodedLen(len(proof)); n > len(buf) {
		dec = make([]byte, 0, n)
	}
	var (
		hdr, payload, sig []byte
		ok                bool
		h                 header
	)
	if dec, hdr, ok = appendDecoded(dec, proof[:dot1]); !ok {
		return Proof{}, refused(ReasonMalformed)
	}
	if h, ok = readHeader(hdr); !ok {
		return Proof{}, refused(ReasonMalformed)
	}
	alg, ok := v.allowed(h.alg)
	if !ok {
		return Proof{}, refused(ReasonAlg)
	}
	if h.typ == nil || !bytes.EqualFold(h.typ, []byte("dpop+jwt")) {
		return Proof{}, refused(ReasonTyp)
	}
	if h.jwk == nil {
		return Proof{}, refused(ReasonJWK)
	}
	if h.other {
		return Proof{}, refused(ReasonMalformed)
	}
	if dec, payload, ok = appendDecoded(dec, proof[dot1+1:dot2]); !ok {
		return Proof{}, refused(ReasonMalformed)
	}
	if _, sig, ok = appendDecoded(dec, proof[dot2+1:]); !ok {
		return Proof{}, refused(ReasonMalformed)
	}
	key := v.keys.get(h.jwk)
	cached := key != nil
	if !cached {
		if key = parseKey(h.jwk); key == nil {
			return Proof{}, refused(ReasonJWK)
		}
	}
	if !key.fits(alg) {
		return Proof{}, refused(ReasonJWK)
	}
	if c.JKT != "" && subtle.ConstantTimeCompare([]byte(key.jkt), []byte(c.JKT)) != 1 {
		return Proof{}, refused(ReasonKey)
	}
	if !key.verify(alg, proof[:dot2], sig) {
		return Proof{}, refused(ReasonSignature)
	}
	if !cached {
		v.keys.put(h.jwk, key)
	}
	cl, ok := readClaims(payload)
	if !ok {
		return Proof{}, refused(ReasonMalformed)
	}
	if cl.htm == nil || string(cl.htm) != c.Method {
		return Proof{}, refused(ReasonHTM)
	}
	if cl.htu == nil || !sameURL(cl.htu, c.URL) {
		return Proof{}, refused(ReasonHTU)
	}
	now := v.now()
	if !cl.hasIAT || !v.fresh(cl.iat, now) {
		return Proof{}, refused(ReasonIAT)
	}
	if c.Token == "" {
		if cl.ath != nil {
			return Proof{}, refused(ReasonATH)
		}
	} else if cl.ath == nil || !tokenHashIs(c.Token, cl.ath) {
		return Proof{}, refused(ReasonATH)
	}
	if len(cl.jti) < MinJTILen || len(cl.jti) > MaxJTILen {
		return Proof{}, refused(ReasonJTI)
	}
	var claim [16]byte
	_, _ = rand.Read(claim[:]) // unique to this check: a re-sent SET finds its own claim
	fresh, err := v.replay.SetNX(ctx, replayKeyOf(key.jkt, cl.jti), claim[:], v.replayTTL)
	if err != nil {
		return Proof{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if !fresh {
		return Proof{}, refused(ReasonReplay)
	}
	return Proof{JKT: key.jkt}, nil
}

// allowed is alg when it is one of the verifier's algorithms.
func (v *Verifier) allowed(alg []byte) (string, bool) {
	for _, a := range v.algs {
		if string(alg) == string(a) {
			return string(a), true
		}
	}
	return "", false
}

// fresh reports whether iat (seconds since the epoch) lies within
// [now-MaxAge, now+MaxAhead].
func (v *Verifier) fresh(iat float64, now time.Time) bool {
	if math.IsNaN(iat) || math.IsInf(iat, 0) || iat < 0 || iat > 1<<33 { // 1<<33 s: the year 2242, within time.Duration
		return false
	}
	at := time.Unix(0, 0).Add(time.Duration(iat * float64(time.Second)))
	return !at.Before(now.Add(-v.maxAge)) && !at.After(now.Add(v.maxAhead))
}

// replayKey names a proof in the replay store: a hash of its key's
// thumbprint and its jti, so that the store holds neither, and one key's
// jti never collides with another's.
func replayKey(jkt, jti string) string { return replayKeyOf(jkt, []byte(jti)) }

func replayKeyOf(jkt string, jti []byte) string {
	var stack [64 + MaxJTILen]byte // a jkt is 43 bytes
	in := append(append(append(stack[:0], jkt...), 0), jti...)
	sum := sha256.Sum256(in)
	var key [len("dpop:jti:") + 24]byte
	copy(key[:], "dpop:jti:")
	base64.RawURLEncoding.Encode(key[len("dpop:jti:"):], sum[:18])
	return string(key[:])
}

// TokenHash is ath for token: the base64url SHA-256 of its ASCII bytes.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// tokenHashIs reports, in constant time, whether ath is TokenHash(token).
func tokenHashIs(token string, ath []byte) bool {
	var stack [256]byte
	var in []byte
	if len(token) <= len(stack) {
		in = stack[:copy(stack[:], token)]
	} else {
		in = []byte(token)
	}
	sum := sha256.Sum256(in)
	var want [43]byte // base64url of 32 bytes, unpadded
	base64.RawURLEncoding.Encode(want[:], sum[:])
	return subtle.ConstantTimeCompare(want[:], ath) == 1
}

// Thumbprint is the jkt of a public JWK: the base64url SHA-256 JWK
// thumbprint (RFC 7638).
func Thumbprint(jwk *jose.JSONWebKey) (string, error) {
	sum, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(sum), nil
}
