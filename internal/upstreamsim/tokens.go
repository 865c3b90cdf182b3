package upstreamsim

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// issuer is the "iss" claim of every token the simulator signs.
const issuer = "upstream-sim"

// Token kinds: client tokens come from /oauth/token; connector tokens only
// from IssueConnectorToken.
const (
	kindClient    = "client"
	kindConnector = "connector"
)

// scopeMCPRead is the scope a connector token needs on read routes.
const scopeMCPRead = "mcp:read"

// claims is the payload of the simulator's HS256 JWTs.
type claims struct {
	Iss string `json:"iss"`
	Sub string `json:"sub"`
	Aud string `json:"aud,omitempty"`
	Iat int64  `json:"iat"`
	Exp int64  `json:"exp"`
	Jti string `json:"jti"`
	// Sgen is the secret generation the token was minted under; rotation
	// bumps the generation and so kills every older token at once.
	Sgen uint64 `json:"sgen"`
	// Rev is the user's revocation generation at mint time.
	Rev    uint64 `json:"rev"`
	Kind   string `json:"kind"`
	Scope  string `json:"scope,omitempty"`
	Linked bool   `json:"linked,omitempty"`
}

func (c *claims) hasScope(s string) bool {
	for f := range strings.FieldsSeq(c.Scope) {
		if f == s {
			return true
		}
	}
	return false
}

// credential is one generation of the organization's client secret.
// With purgeFailed, the rotation that made it failed to purge the cached
// tokens of the generation before (gen-1): they keep working until they
// expire.
type credential struct {
	secret      string
	gen         uint64
	purgeFailed bool
}

// accepts reports whether a client token minted under generation sgen is
// still honoured.
func (c *credential) accepts(sgen uint64) bool {
	return sgen == c.gen || c.purgeFailed && sgen+1 == c.gen
}

// tokenIssuer holds the client credentials, signs and verifies tokens and
// tracks revocations. It is safe for concurrent use.
type tokenIssuer struct {
	clientID string
	key      []byte // HS256 key, private to this simulator
	cred     atomic.Pointer[credential]

	mu      sync.RWMutex
	revoked map[string]uint64 // userID -> revocation generation
}

func newTokenIssuer(clientID, secret string) *tokenIssuer {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t := &tokenIssuer{clientID: clientID, key: key, revoked: map[string]uint64{}}
	t.cred.Store(&credential{secret: secret})
	return t
}

// checkClient reports whether id and secret are the credentials of
// generation c.
func (t *tokenIssuer) checkClient(c *credential, id, secret string) bool {
	idOK := subtle.ConstantTimeCompare([]byte(id), []byte(t.clientID)) == 1
	secOK := subtle.ConstantTimeCompare([]byte(secret), []byte(c.secret)) == 1
	return idOK && secOK
}

// rotate replaces the secret. The old secret stops working at once, and so
// does every token minted under it unless purgeFailed: then the tokens of
// the generation just replaced keep working until they expire (and a later
// rotation purges them). Setting the current secret again is a no-op.
func (t *tokenIssuer) rotate(secret string, purgeFailed bool) {
	for {
		old := t.cred.Load()
		if old.secret == secret {
			return
		}
		next := &credential{secret: secret, gen: old.gen + 1, purgeFailed: purgeFailed}
		if t.cred.CompareAndSwap(old, next) {
			return
		}
	}
}

func (t *tokenIssuer) revoke(userID string) {
	t.mu.Lock()
	t.revoked[userID]++
	t.mu.Unlock()
}

func (t *tokenIssuer) revocation(userID string) uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.revoked[userID]
}

var jwtHeader = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))

// mint signs a token for c, filling in iss, iat, exp, jti and the
// revocation generation. A client token's secret generation (Sgen) is the
// caller's: the one whose secret it checked (see mintClient).
func (t *tokenIssuer) mint(c claims, now time.Time, ttl time.Duration) string {
	var jti [16]byte
	_, _ = rand.Read(jti[:])
	c.Iss = issuer
	c.Iat = now.Unix()
	c.Exp = now.Add(ttl).Unix()
	c.Jti = hex.EncodeToString(jti[:])
	c.Rev = t.revocation(c.Sub)
	payload, _ := json.Marshal(c)
	signing := jwtHeader + "." + base64.RawURLEncoding.EncodeToString(payload)
	return signing + "." + base64.RawURLEncoding.EncodeToString(t.sign(signing))
}

func (t *tokenIssuer) sign(s string) []byte {
	m := hmac.New(sha256.New, t.key)
	m.Write([]byte(s))
	return m.Sum(nil)
}

// Reasons a token is refused; each becomes a 401 {message}.
var (
	errMalformed = errors.New("invalid token")
	errSignature = errors.New("invalid token signature")
	errExpired   = errors.New("token expired")
	errRotated   = errors.New("token was issued with a rotated client secret")
	errRevoked   = errors.New("token revoked")
)

// verify checks a token's shape, signature, expiry (against now), secret
// generation (see credential.accepts) and revocation, and returns its
// claims.
func (t *tokenIssuer) verify(tok string, now time.Time) (*claims, error) {
	h, rest, ok := strings.Cut(tok, ".")
	if !ok || h != jwtHeader {
		return nil, errMalformed
	}
	p, s, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(s, ".") {
		return nil, errMalformed
	}
	sig, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errMalformed
	}
	if !hmac.Equal(sig, t.sign(tok[:len(h)+1+len(p)])) {
		return nil, errSignature
	}
	payload, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return nil, errMalformed
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil || c.Sub == "" {
		return nil, errMalformed
	}
	if !now.Before(time.Unix(c.Exp, 0)) {
		return nil, errExpired
	}
	if c.Kind == kindClient && !t.cred.Load().accepts(c.Sgen) {
		return nil, errRotated
	}
	if c.Rev != t.revocation(c.Sub) {
		return nil, errRevoked
	}
	return &c, nil
}

// subject reads the "sub" claim of tok without verifying the token; it is
// "" when tok is not shaped like a JWT. It names the user a request claims
// to act for, for the request log and per-user faults, so it is on every
// request's path: the simulator's own tokens carry "sub" early and
// unescaped, and are read without a JSON decode.
func subject(tok string) string {
	_, rest, _ := strings.Cut(tok, ".")
	p, _, ok := strings.Cut(rest, ".")
	if !ok {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return ""
	}
	if _, v, ok := bytes.Cut(payload, []byte(`"sub":"`)); ok {
		if sub, _, ok := bytes.Cut(v, []byte(`"`)); ok && bytes.IndexByte(sub, '\\') < 0 {
			return string(sub)
		}
	}
	var c struct {
		Sub string `json:"sub"`
	}
	_ = json.Unmarshal(payload, &c)
	return c.Sub
}

// mintClient is the token exchange: a client token for user if id and
// secret are the current credentials, else false. The token carries the
// generation whose secret was checked, read once: a rotation between the
// check and the signing then kills the token as it should, instead of the
// token taking the new generation and outliving the secret it was minted
// with.
func (t *tokenIssuer) mintClient(id, secret, user string, now time.Time, ttl time.Duration) (string, bool) {
	c := t.cred.Load()
	if !t.checkClient(c, id, secret) {
		return "", false
	}
	return t.mint(claims{Sub: user, Kind: kindClient, Sgen: c.gen}, now, ttl), true
}
