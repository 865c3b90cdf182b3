// Package webhooks verifies the signed webhooks the upstream simulator posts
// when a payment's status changes (docs/payments.md, "Webhooks"). They follow Standard Webhooks
// (https://www.standardwebhooks.com): a webhook-id, a webhook-timestamp in
// unix seconds, and a webhook-signature holding one or more space-separated
// "v1,<base64 HMAC-SHA256(key, id.timestamp.body)>", under a secret
// written "whsec_<base64 key>".
//
// Why no library: the reference Go library
// (github.com/standard-webhooks/standard-webhooks/libraries, v0.0.1 on the
// module proxy, its only release) reads time.Now inside Verify with its
// tolerance in a package variable, so a test cannot inject the clock or
// check the edges; it takes one secret per value, so rotation would be a
// loop around it anyway; it accepts an empty key; and it reports a garbled
// signature as a mismatch. What it would do for us is the HMAC and the
// compare, about ten lines, for a module whose zip carries eight other
// languages. Its published test vector is checked in this package's tests,
// so the two agree.
//
// The simulator (internal/upstreamsim) signs with its own code, not Sign,
// so that its tests, which verify with this package, check one
// implementation against another.
package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names, as Standard Webhooks spells them.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultTolerance is how far from the receiver's clock a timestamp may be,
// either way: the five minutes Standard Webhooks recommends, which bounds
// how long a captured message can be replayed.
const DefaultTolerance = 5 * time.Minute

// Secret lengths Standard Webhooks allows: 24 to 64 bytes of key.
const (
	minKey = 24
	maxKey = 64
)

// maxID bounds the webhook-id a receiver accepts: a receiver keeps ids to
// drop duplicates, so it must not store whatever a sender puts there.
const maxID = 256

// Errors Verify returns, wrapped; decide with errors.Is.
var (
	// ErrMalformed is a missing or unreadable header, or a signature
	// header with no well-formed v1 signature in it.
	ErrMalformed = errors.New("webhooks: malformed webhook headers")
	// ErrStale is a timestamp further than the tolerance from now, in the
	// past or in the future.
	ErrStale = errors.New("webhooks: webhook timestamp outside the tolerance")
	// ErrForged is a message none of whose v1 signatures matches any
	// secret.
	ErrForged = errors.New("webhooks: no webhook signature matches")
)

// Message is a verified webhook's identity: its id (the same on every
// retry of one message, so a receiver drops duplicates by it) and the
// time it was signed.
type Message struct {
	ID        string
	Timestamp time.Time
}

// Verifier checks webhook signatures under one or more secrets. It is
// safe for concurrent use and never changes after NewVerifier.
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
}

// NewVerifier returns a Verifier accepting messages signed under any of
// secrets (more than one while a secret is rotated), each "whsec_"
// followed by the base64 of 24 to 64 bytes, with timestamps at most
// tolerance from the receiver's clock. A malformed secret is an error
// naming its index, never its value.
func NewVerifier(secrets []string, tolerance time.Duration) (*Verifier, error) {
	if len(secrets) == 0 {
		return nil, errors.New("webhooks: no secret")
	}
	if tolerance <= 0 {
		return nil, fmt.Errorf("webhooks: tolerance %s: want more than 0 (%s is the usual)", tolerance, DefaultTolerance)
	}
	v := &Verifier{tolerance: tolerance}
	for i, s := range secrets {
		key, err := ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("webhooks: secret %d: %w", i, err)
		}
		v.keys = append(v.keys, key)
	}
	return v, nil
}

// ParseSecret reads a "whsec_" secret: the standard base64 of 24 to 64
// bytes of key after the prefix. It is the one reading of a secret, for
// start-up (NewVerifier) and for the configuration check alike; its error
// never quotes the secret.
func ParseSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, errors.New(`want the "whsec_" prefix`)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, errors.New(`want standard base64 after "whsec_"`)
	}
	if len(key) < minKey || len(key) > maxKey {
		return nil, fmt.Errorf("key of %d bytes: want %d to %d", len(key), minKey, maxKey)
	}
	return key, nil
}

// Verify checks h's webhook headers against body at now. The headers
// are read first (ErrMalformed), then the signatures (ErrForged), then
// the timestamp (ErrStale): a stale message is one a secret did sign, so
// ErrStale tells a replay or a skewed clock from a forgery. A timestamp
// exactly tolerance away is accepted. Signature entries of other versions
// (v1a and later schemes) are skipped, as the scheme asks.
func (v *Verifier) Verify(h http.Header, body []byte, now time.Time) (Message, error) {
	id, rawTS, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || len(id) > maxID || rawTS == "" || sigs == "" {
		return Message{}, fmt.Errorf("%w: want %s (at most %d bytes), %s and %s", ErrMalformed, HeaderID, maxID, HeaderTimestamp, HeaderSignature)
	}
	secs, err := strconv.ParseInt(rawTS, 10, 64)
	// Only the canonical decimal form: the signature covers the number as
	// the sender wrote it, so "+17..." or "017..." would be a different
	// string signing the same instant.
	if err != nil || secs < 0 || strconv.FormatInt(secs, 10) != rawTS {
		return Message{}, fmt.Errorf("%w: %s is not unix seconds", ErrMalformed, HeaderTimestamp)
	}
	var macs [][]byte
	for _, key := range v.keys {
		macs = append(macs, mac(key, id, secs, body))
	}
	wellFormed, matched := 0, false
	for entry := range strings.FieldsSeq(sigs) {
		version, b64, _ := strings.Cut(entry, ",")
		if version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(got) != sha256.Size {
			continue
		}
		wellFormed++
		for _, want := range macs {
			matched = hmac.Equal(got, want) || matched // no early exit: time does not tell which key
		}
	}
	switch {
	case wellFormed == 0:
		return Message{}, fmt.Errorf("%w: %s holds no v1 signature", ErrMalformed, HeaderSignature)
	case !matched:
		return Message{}, ErrForged
	}
	ts := time.Unix(secs, 0)
	if d := now.Sub(ts); d > v.tolerance || d < -v.tolerance {
		return Message{}, fmt.Errorf("%w: signed %s, now %s", ErrStale, ts.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return Message{ID: id, Timestamp: ts}, nil
}

// mac is the HMAC-SHA256 of "id.timestamp.body" under key.
func mac(key []byte, id string, secs int64, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(secs, 10) + "."))
	m.Write(body)
	return m.Sum(nil)
}

// Sign returns the webhook-signature value ("v1,<base64>") of body sent as
// message id at ts under secret. It is for tests that build webhooks for a
// receiver; the simulator has its own signer.
func Sign(secret, id string, ts time.Time, body []byte) (string, error) {
	key, err := ParseSecret(secret)
	if err != nil {
		return "", fmt.Errorf("webhooks: secret: %w", err)
	}
	return "v1," + base64.StdEncoding.EncodeToString(mac(key, id, ts.Unix(), body)), nil
}
