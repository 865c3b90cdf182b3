package session

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/sessions"

	"github.com/fintech-bff/bff/internal/seal"
)

// ErrBadCookie means the cookie failed authentication or decryption under
// every configured key: tampered, forged, too old or from a retired key.
var ErrBadCookie = errors.New("session: invalid cookie")

// CookieOptions configures the session cookie.
type CookieOptions struct {
	Name   string
	Secure bool
	// Keys are the master keys, newest first: the newest seals, every one
	// is tried on decode, so keys rotate without logging anyone out.
	Keys [][]byte
	// MaxAge bounds the cookie's own lifetime (the session's absolute timeout).
	MaxAge time.Duration
	Now    func() time.Time // time.Now when nil
}

// cookieVersion is the first byte of every value, for a future format.
const cookieVersion = 1

// maxCookieLen bounds what ID will try to decode.
const maxCookieLen = 512

// Cookies encodes session ids into cookies and back. The cookie holds the
// id only: AES-256-GCM sealed (confidential and authenticated) under a key
// derived from the newest master key, with the cookie's name as associated
// data (a login cookie cannot pass for a session cookie) and its issue time
// inside, checked against MaxAge. This is the "cheap codec for an id-only
// cookie" (README.md, "Dependencies and why each is there"): gorilla's securecookie (HMAC, AES-CTR, timestamps in
// text) cost 3× the time and allocations for the same guarantees. The
// cookie's attributes still come from gorilla/sessions. Safe for
// concurrent use.
type Cookies struct {
	name   string
	boxes  []*seal.Box
	maxAge time.Duration
	now    func() time.Time
	opts   sessions.Options
}

// NewCookies derives an AES-256-GCM key from each master key (HKDF-SHA256)
// and returns the codec.
func NewCookies(o CookieOptions) (*Cookies, error) {
	if len(o.Keys) == 0 {
		return nil, errors.New("session: at least one cookie key is required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	boxes := make([]*seal.Box, 0, len(o.Keys))
	for i, k := range o.Keys {
		box, err := seal.Derive(k, "bff session cookie aead v1")
		if err != nil {
			return nil, fmt.Errorf("session: key %d: %w", i, err)
		}
		boxes = append(boxes, box)
	}
	return &Cookies{
		name: o.Name, boxes: boxes, maxAge: o.MaxAge, now: o.Now,
		opts: sessions.Options{Path: "/", HttpOnly: true, Secure: o.Secure, SameSite: http.SameSiteLaxMode},
	}, nil
}

// Name is the cookie's name.
func (c *Cookies) Name() string { return c.name }

// Named returns the same codec for the cookie named Name()+suffix: it
// shares the keys and, like c, is safe for concurrent use. The name is the
// associated data of every value, so a value made under one name does not
// open under another.
func (c *Cookies) Named(suffix string) *Cookies {
	n := *c
	n.name = c.name + suffix
	return &n
}

// New returns the cookie that carries id. It is a session cookie for the
// browser (no Max-Age): the server enforces the timeouts.
func (c *Cookies) New(id string) (*http.Cookie, error) {
	plain := make([]byte, 8+len(id))
	binary.BigEndian.PutUint64(plain, uint64(c.now().Unix()))
	copy(plain[8:], id)
	out := make([]byte, 1, 1+len(plain)+c.boxes[0].Overhead())
	out[0] = cookieVersion
	out = c.boxes[0].Seal(out, plain, []byte(c.name))
	opts := c.opts
	return sessions.NewCookie(c.name, base64.RawURLEncoding.EncodeToString(out), &opts), nil
}

// Clear returns a cookie that deletes the session cookie.
func (c *Cookies) Clear() *http.Cookie {
	opts := c.opts
	opts.MaxAge = -1
	return sessions.NewCookie(c.name, "", &opts)
}

// ID decodes a cookie value into the session id, or ErrBadCookie.
func (c *Cookies) ID(value string) (string, error) {
	if len(value) == 0 || len(value) > maxCookieLen {
		return "", ErrBadCookie
	}
	id, issued, err := c.open(value)
	if err != nil || !c.fresh(issued) {
		return "", ErrBadCookie
	}
	return id, nil
}

// Issued decodes a cookie value as ID does and returns when it was made.
func (c *Cookies) Issued(value string) (time.Time, error) {
	if len(value) == 0 || len(value) > maxCookieLen {
		return time.Time{}, ErrBadCookie
	}
	_, issued, err := c.open(value)
	if err != nil || !c.fresh(issued) {
		return time.Time{}, ErrBadCookie
	}
	return issued, nil
}

// fresh checks a cookie's issue time against MaxAge (and clock skew).
func (c *Cookies) fresh(issued time.Time) bool {
	now := c.now()
	return c.maxAge <= 0 || (now.Sub(issued) <= c.maxAge && issued.Sub(now) <= time.Minute)
}

// openBuffers holds open's decoding and decryption buffers.
var openBuffers = sync.Pool{New: func() any { return new([2][maxCookieLen]byte) }}

// open authenticates and decrypts a cookie value under any configured key.
func (c *Cookies) open(value string) (string, time.Time, error) {
	bufs := openBuffers.Get().(*[2][maxCookieLen]byte) // on every request: pooled, not 1 KB of garbage
	defer openBuffers.Put(bufs)
	buf, plain := &bufs[0], &bufs[1]
	n, err := base64.RawURLEncoding.Decode(buf[:], []byte(value))
	if err != nil || n < 1 || buf[0] != cookieVersion {
		return "", time.Time{}, ErrBadCookie
	}
	raw := buf[1:n]
	for _, box := range c.boxes {
		p, err := box.Open(plain[:0], raw, []byte(c.name))
		if err != nil || len(p) < 8 {
			continue
		}
		return string(p[8:]), time.Unix(int64(binary.BigEndian.Uint64(p[:8])), 0), nil
	}
	return "", time.Time{}, ErrBadCookie
}
