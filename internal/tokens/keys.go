package tokens

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash"
	"strings"
	"time"
)

// mac is the keyed hash of label and v (HMAC-SHA-256 under the cache's
// derived key) that every fingerprint of the cache is cut from. tokKey runs
// on every request, so the keyed HMACs come from a pool.
func (c *Cache) mac(label, v string) [sha256.Size]byte {
	m, _ := c.hmacs.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, c.macKey)
	}
	m.Reset()
	m.Write([]byte(label))
	m.Write([]byte{0})
	m.Write([]byte(v))
	var sum [sha256.Size]byte
	m.Sum(sum[:0])
	c.hmacs.Put(m)
	return sum
}

func (c *Cache) fingerprint(label, v string, n int) string {
	sum := c.mac(label, v)
	return base64.RawURLEncoding.EncodeToString(sum[:n])
}

// tokenFP is the fingerprint stored in front of each encrypted value, so a
// rejected token can be deleted only if it is still the cached one.
func (c *Cache) tokenFP(token string) []byte {
	sum := c.mac("token", token)
	return sum[:8]
}

// keys of one user under one generation: a keyed hash of the user id (no
// user id in Redis), in a hash tag so they share a Redis Cluster slot.
type keys struct{ tok, lock, neg string }

func (c *Cache) keys(userID, gen string) keys { return keysOf(c.tokKey(userID, gen)) }

// keysOf derives the lock and negative-entry keys from the token key.
func keysOf(tok string) keys {
	u := strings.TrimPrefix(tok, "tok:")
	return keys{tok: tok, lock: "lock:" + u, neg: "neg:" + u}
}

// tokKey is the store key of the user's token under generation gen, and
// the local layer's key for it: on every request, so it costs one
// allocation (the key itself).
func (c *Cache) tokKey(userID, gen string) string {
	sum := c.mac("user", userID)
	var fp [24]byte // base64 of 18 bytes
	base64.RawURLEncoding.Encode(fp[:], sum[:18])
	return "tok:{" + string(fp[:]) + "}:" + gen
}

// seal encrypts v with the user id as associated data, so a value copied
// under another user's key does not decrypt. Layout: token fingerprint (8) |
// nonce | ciphertext of (expiry | until | refreshAt, 8-byte Unix ns each |
// token). The fingerprint is a keyed hash: it reveals nothing of the token.
func (c *Cache) seal(v stored, userID string) []byte {
	plain := make([]byte, 24, 24+len(v.tok.Value))
	binary.BigEndian.PutUint64(plain, uint64(v.tok.Expiry.UnixNano()))
	binary.BigEndian.PutUint64(plain[8:], uint64(v.until.UnixNano()))
	binary.BigEndian.PutUint64(plain[16:], uint64(v.refreshAt.UnixNano()))
	plain = append(plain, v.tok.Value...)
	out := make([]byte, 0, 8+len(plain)+c.box.Overhead())
	return c.box.Seal(append(out, c.tokenFP(v.tok.Value)...), plain, []byte(userID))
}

func (c *Cache) open(b []byte, userID string) (stored, error) {
	if len(b) < 8 {
		return stored{}, errors.New("tokens: short cache value")
	}
	plain, err := c.box.Open(nil, b[8:], []byte(userID))
	if err != nil || len(plain) < 24 {
		return stored{}, errors.New("tokens: cache value does not decrypt")
	}
	at := func(i int) time.Time { return time.Unix(0, int64(binary.BigEndian.Uint64(plain[i:i+8]))) }
	return stored{tok: Token{Value: string(plain[24:]), Expiry: at(0)}, until: at(8), refreshAt: at(16)}, nil
}
