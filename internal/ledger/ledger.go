// Package ledger is the durable record of money-moving requests: for each
// user, route and Idempotency-Key, whether the request is running, how it
// ended, the upstream's status and payment id, and the answer to replay;
// and an append-only trail of every HTTP request that touched the key.
//
// The ledger is the system of record for "did this payment run": it lives
// in PostgreSQL (Postgres), never in Redis, whose loss must cost a re-login
// and never a payment. Memory is the same protocol in one process, for
// development without a database.
//
// The protocol (the proxy drives it):
//
//	Claim    the first request with a key inserts its row (a unique
//	         constraint, so exactly one request anywhere wins) in state
//	         in_flight, with a deadline after which its owner can no
//	         longer reach the upstream.
//	Sending  the owner marks, durably and before it sends, that the
//	         request is about to leave (with the evidence settling needs);
//	         the mark is fenced by the claim and its deadline.
//	Finish   the owner stores the final answer (done): repeats replay it.
//	Release  the owner learned that the upstream surely did not act
//	         (released): the next request with the key claims it again.
//	Unknown  the owner cannot tell whether the upstream acted (unknown):
//	         the key is never sent upstream again.
//	Abandon  an in_flight row past its deadline: the owner died or hung.
//	         Without the send mark the request provably never left, and
//	         the key is released; with it the row becomes unknown.
//	Settle   an unknown row whose outcome was learned from the upstream
//	         becomes done, and repeats replay that.
//	Due      the background settler leases the open rows to look at, one
//	         instance at a time per row.
//
// The package is plain Go: no HTTP framework.
package ledger

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/fintech-bff/bff/internal/seal"
)

// State is where a money-moving request stands.
type State string

// States of a record.
const (
	StateInFlight State = "in_flight" // claimed; the upstream may be acting
	StateDone     State = "done"      // final answer stored; repeats replay it
	StateReleased State = "released"  // the upstream surely did not act; the key may run again
	StateUnknown  State = "unknown"   // the upstream may have acted; never sent again
	// StateAwaiting: held for the user's approval (step-up), not sent.
	StateAwaiting State = "awaiting_approval"
	// StateDeclined: held and never approved (denied, mismatched,
	// expired): never sent; repeats get the refusal.
	StateDeclined State = "declined"
)

// Endings say how a request ended, for the audit trail.
const (
	EndAnswered  = "answered"   // the upstream gave a final answer
	EndNotSent   = "not_sent"   // failed before reaching the upstream
	EndRefused   = "refused"    // the upstream answered that it did not act
	EndFailed    = "failed"     // the upstream's own 5xx error body, and no payment found
	EndAmbiguous = "ambiguous"  // timeout, hang-up or 5xx after the request was sent
	EndOwnerLost = "owner_lost" // the owning instance died or hung past its deadline, after its send mark
	EndNeverSent = "never_sent" // the owner died or hung before its send mark: given back
	EndSettled   = "settled"    // the outcome was learned from the upstream afterwards
	EndNotMade   = "not_made"   // settling proved, after the outcome was unknown, that the upstream made nothing: given back
	EndDenied    = "denied"     // the user did not approve the held payment at the identity provider
	EndMismatch  = "mismatch"   // the approval did not match the held payment (amount, payee, user, authentication)
	EndExpired   = "expired"    // the hold ran out before an approval
	EndWithdrawn = "withdrawn"  // held under a step-up policy since turned off: no approval can come
)

// AuditEvent is an event of the audit trail, one per HTTP request on a
// key: the value stored in money_request_events.what.
type AuditEvent string

// The audit events.
const (
	EventClaimed    AuditEvent = "claimed"
	EventReplayed   AuditEvent = "replayed"
	EventInProgress AuditEvent = "in_progress"
	EventReused     AuditEvent = "key_reused"
	EventUnknown    AuditEvent = "outcome_unknown"
	EventSettled    AuditEvent = "settled"
	EventNotMade    AuditEvent = "not_made" // an unknown outcome proved not made: given back
	EventHeld       AuditEvent = "held"     // a repeat of a key held for approval
	EventApproved   AuditEvent = "approved" // the approval released the held request
)

// ErrUnavailable wraps every failure to reach the ledger's database.
var ErrUnavailable = errors.New("ledger: unavailable")

// ErrNoRecord: no record has the id asked for.
var ErrNoRecord = errors.New("ledger: no such record")

// ErrUnreadable: a stored answer does not open under the configured keys.
var ErrUnreadable = errors.New("ledger: a stored answer does not decrypt under redis.encryption_key or redis.decryption_keys")

// Request identifies one money-moving HTTP request and who sent it.
type Request struct {
	UserID      string
	Route       string // the money route's prefix: keys are scoped to user and route
	Key         string // the Idempotency-Key
	Fingerprint []byte // SHA-256 of method, path, query and body
	// Content is what settling compares of a payment (JSON; sealed at
	// rest); nil when the request carries none.
	Content    []byte
	SessionRef string // a hash of the session id (session.Handle), never the id
	ClientIP   string
	RequestID  string
	// Held, when set, is the request to send once the user approves it
	// (sealed at rest): the claim holds the key in StateAwaiting, and its
	// bound is how long the hold waits for the approval.
	Held []byte
}

// Response is a final answer kept for replay.
type Response struct {
	Status int         `json:"s"`
	Header http.Header `json:"h"`
	Body   []byte      `json:"b"`
}

// Outcome is how the owner's request ended.
type Outcome struct {
	Ending         string
	UpstreamStatus int    // 0: no upstream answer
	PaymentID      string // the id the upstream returned, when it did
	Response       *Response
}

// Record is a key's row as another request (or the settler) finds it.
type Record struct {
	ID             int64
	UserID         string
	Route          string
	Key            string
	RequestID      string // the request that claimed it
	State          State
	Fingerprint    []byte
	ClaimedAt      time.Time
	Deadline       time.Time
	Expired        bool // past Deadline by the store's clock
	UpstreamStatus int
	PaymentID      string
	Ending         string
	Response       *Response // set when State is done
	// Sent: the owner marked the send (it may have reached the upstream).
	Sent bool
	// Content is the request's (opened); Send is the evidence recorded
	// with the mark.
	Content []byte
	Send    SendEvidence
	// SessionRef is the claiming request's session (a hash of its id).
	SessionRef string
	// Held is the request a hold sends once approved (opened); nil when
	// the record was never held.
	Held []byte
}

// Claim is a won claim: the holder may send the request upstream once.
type Claim struct {
	ID    int64
	Owner string
	// ClaimedAt is when the claim was made, on the store's clock (the
	// clock of every deadline).
	ClaimedAt time.Time
}

// SendEvidence is what the owner records, with the mark, just before it sends: the
// evidence a later settling of this request reads. The zero value marks a
// send that is never settled (no snapshot).
type SendEvidence struct {
	// Snapshot: the owner read the user's payments just before the send,
	// and the fields below are what it learned. Without it the send is
	// never settled from the upstream.
	Snapshot bool
	// SeenBefore are the ids of the payments with this content that the
	// upstream listed just before the send: never this request's.
	SeenBefore []string
	// SeenFrom (the upstream's clock): every payment created after the
	// snapshot has a createdAt at or after it. Zero: not known.
	SeenFrom time.Time
	// SeenCut (the upstream's clock): the snapshot did not read every
	// payment, only those created after SeenCut. Zero: it read them all.
	SeenCut time.Time
	// WindowEnd (the upstream's clock): a payment created after it cannot
	// be this request's. Zero: not known.
	WindowEnd time.Time
}

// OtherRequest is another money-moving request of the same user, as settling
// reads it: what it asked for, and what became of it.
type OtherRequest struct {
	Route          string
	Key            string
	State          State
	Ending         string
	UpstreamStatus int
	PaymentID      string
	// Sent: it may have reached the upstream (it marked a send, or was
	// claimed by a version that writes no mark).
	Sent bool
	// Content is what it asked the upstream to create (nil: nothing).
	Content []byte
	// Opaque: its content does not open under the configured keys, so it
	// could have asked for anything.
	Opaque bool
}

// sealer seals stored answers: they hold payment data (ids, consent URLs).
// The record id is the associated data, so an answer cannot be moved to
// another row.
type sealer struct{ box *seal.Box }

func newSealer(encryptionKey []byte, decryptionKeys [][]byte) (sealer, error) {
	box, err := seal.Derive(encryptionKey, "bff ledger answers", decryptionKeys...)
	if err != nil {
		return sealer{}, fmt.Errorf("ledger: %w", err)
	}
	return sealer{box}, nil
}

func (s sealer) seal(id int64, r *Response) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	plain, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return s.box.Seal(nil, plain, aad(id)), nil
}

func (s sealer) open(id int64, b []byte) (*Response, error) {
	if b == nil {
		return nil, nil
	}
	plain, err := s.box.Open(nil, b, aad(id))
	if err != nil {
		return nil, ErrUnreadable
	}
	var r Response
	if err := json.Unmarshal(plain, &r); err != nil {
		return nil, ErrUnreadable
	}
	return &r, nil
}

func aad(id int64) []byte { return fmt.Appendf(nil, "money_requests/%d", id) }

// sealContent seals what settling compares (payment data) under its own
// associated data, the row's key (written with the claim, before the row
// has an id), so it cannot pass for an answer or move to another row.
func (s sealer) sealContent(userID, route, key string, content []byte) []byte {
	if content == nil {
		return nil
	}
	return s.box.Seal(nil, content, contentAAD(userID, route, key))
}

func contentAAD(userID, route, key string) []byte {
	return fmt.Appendf(nil, "money_requests/content/%q/%q/%q", userID, route, key)
}

// sealHeld seals a held request under the row's key, like content.
func (s sealer) sealHeld(userID, route, key string, held []byte) []byte {
	if held == nil {
		return nil
	}
	return s.box.Seal(nil, held, heldAAD(userID, route, key))
}

func heldAAD(userID, route, key string) []byte {
	return fmt.Appendf(nil, "money_requests/held/%q/%q/%q", userID, route, key)
}

func (s sealer) openHeld(userID, route, key string, b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	plain, err := s.box.Open(nil, b, heldAAD(userID, route, key))
	if err != nil {
		return nil, ErrUnreadable
	}
	return plain, nil
}

func (s sealer) openContent(userID, route, key string, b []byte) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	plain, err := s.box.Open(nil, b, contentAAD(userID, route, key))
	if err != nil {
		return nil, ErrUnreadable
	}
	return plain, nil
}

// markingOwner starts the owner fence of every claim made by a version
// that writes the send mark before it sends. Only such a claim, found past
// its deadline without a mark, provably sent nothing: a claim made by an
// earlier version (still running during a rolling upgrade, whose owners
// have no prefix) never writes the mark, and is ended as unknown.
const markingOwner = "m1."

func newOwner() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return markingOwner + base64.RawURLEncoding.EncodeToString(b[:])
}

// inFlightBound is how long a claim may stay in flight; the caller passes
// the longest its request can reach the upstream.
func checkBound(d time.Duration) error {
	if d <= 0 {
		return errors.New("ledger: the in-flight bound must be positive")
	}
	return nil
}

// unavailable wraps a database failure so that callers can tell it apart.
func unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnreadable) {
		return err
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
