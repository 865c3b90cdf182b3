package session

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"math"
	"time"

	"github.com/fintech-bff/bff/internal/nearcache"
)

// The session record as stored, its public name, and the compact form a
// local copy holds it in.

// Record is a session as stored.
type Record struct {
	UserID    string    `json:"u"`
	CreatedAt time.Time `json:"c"`
	LastSeen  time.Time `json:"l"`
	AuthTime  time.Time `json:"a"`
	Method    string    `json:"m"`
	// Sub and SID are the OpenID provider's subject and session id, for
	// back-channel logout; empty for dev logins.
	Sub string `json:"s,omitempty"`
	SID string `json:"i,omitempty"`
	// JKT is the thumbprint (RFC 7638, SHA-256, base64url) of the key a
	// device-bound session is bound to at its creation (DPoP, RFC 9449):
	// such a session is accepted only with a proof of that key. Empty for
	// an unbound session, and in records written before it existed.
	JKT string `json:"k,omitempty"`
}

// New describes a session to create.
type New struct {
	UserID   string
	Method   string
	AuthTime time.Time // when the user authenticated at the provider; now when zero
	Sub, SID string
	JKT      string // the DPoP key's thumbprint for a device-bound session; "" unbound
}

// cached is a session as a local copy holds it, keyed by its handle
// (which the store's key and invalidation messages name). How old the copy
// is, nearcache counts.
type cached struct {
	rec    Record
	handle string
}

// compact is a cached session as the local copy's bytes hold it
// (appendCompact): its times as int64 nanoseconds, Unix times (they are
// the stored record's).
type compact struct {
	userID, method, sub, sid, jkt, handle string
	created, lastSeen, authTime           int64
}

func (c cached) compact() compact {
	r := c.rec
	return compact{userID: r.UserID, method: r.Method, sub: r.Sub, sid: r.SID, jkt: r.JKT, handle: c.handle,
		created: unixNano(r.CreatedAt), lastSeen: unixNano(r.LastSeen), authTime: unixNano(r.AuthTime)}
}

func (k compact) cached() cached {
	return cached{handle: k.handle, rec: Record{UserID: k.userID, Method: k.method, Sub: k.sub, SID: k.sid, JKT: k.jkt,
		CreatedAt: timeAt(k.created), LastSeen: timeAt(k.lastSeen), AuthTime: timeAt(k.authTime)}}
}

// expiresAt is ExpiresAt of the copy's record, reading only the two times
// it needs: nearcache asks it on every use of a copy.
func (k compact) expiresAt(m *Manager) time.Time {
	return m.ExpiresAt(Record{CreatedAt: timeAt(k.created), LastSeen: timeAt(k.lastSeen)})
}

// timeAt is the time unixNano(t) came from.
func timeAt(ns int64) time.Time {
	if ns == zeroTime {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// zeroTime stands for the zero time.Time, whose UnixNano is undefined.
const zeroTime = math.MinInt64

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return zeroTime
	}
	return t.UnixNano()
}

// appendCompact is how a local copy holds a session: its times, then its
// strings (the handle is the copy's key).
func appendCompact(b []byte, k compact) []byte {
	for _, t := range [...]int64{k.created, k.lastSeen, k.authTime} {
		b = nearcache.AppendInt(b, t)
	}
	for _, s := range [...]string{k.userID, k.method, k.sub, k.sid, k.jkt} {
		b = nearcache.AppendString(b, s)
	}
	return b
}

// readCompact is the session appendCompact wrote under handle.
func readCompact(handle string, b []byte) compact {
	r := nearcache.Reader(b)
	k := compact{handle: handle, created: r.Int(), lastSeen: r.Int(), authTime: r.Int(), userID: r.String()}
	k.method = internMethod(r.Bytes())
	k.sub, k.sid, k.jkt = r.String(), r.String(), r.String()
	return k
}

// internMethod is the constant's string for one of the three methods, not
// a copy per session read.
func internMethod(b []byte) string {
	switch string(b) {
	case MethodDev:
		return MethodDev
	case MethodOIDC:
		return MethodOIDC
	case MethodMobile:
		return MethodMobile
	}
	return string(b)
}

// ExpiresAt is when the record ends if unused: the earlier of the idle and
// the absolute deadline.
func (m *Manager) ExpiresAt(r Record) time.Time {
	idle := r.LastSeen.Add(m.idle)
	abs := r.CreatedAt.Add(m.absolute)
	if idle.Before(abs) {
		return idle
	}
	return abs
}

// Handle is a session's public name: a hash of its id. The store keys
// sessions by handle, so it never holds a usable session id (a Redis dump
// cannot be replayed as cookies), and GET /auth/sessions shows handles.
func Handle(id string) string {
	sum := sha256.Sum256([]byte(id))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

func key(id string) string { return handleKey(Handle(id)) }

func handleKey(handle string) string { return "sess:" + handle }

// indexKey names the set of a user's (or a provider subject's, or a
// provider session's) session handles.
func indexKey(kind, v string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + v))
	return "sessidx:" + kind + ":" + base64.RawURLEncoding.EncodeToString(sum[:18])
}

// NewID returns a fresh 256-bit random session id, URL-safe.
func NewID() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// indexes are the sets a session's handle belongs to.
func indexes(r Record) []string {
	out := []string{indexKey("user", r.UserID)}
	if r.Sub != "" {
		out = append(out, indexKey("sub", r.Sub))
	}
	if r.SID != "" {
		out = append(out, indexKey("sid", r.SID))
	}
	return out
}
