package payments

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/seal"
)

// The user's records: what GET /bff/payments, GET /bff/payments/{key}
// and the event stream read of the ledger, as the user sees it.

// RecordLedger is what the records read of the ledger: a user's records
// newest first (List), one by its key (Get), and the changes after a
// position (Changes, Position).
type RecordLedger interface {
	List(ctx context.Context, userID string, after ledger.Cursor, limit int) ([]ledger.Entry, error)
	Get(ctx context.Context, userID, key string) (ledger.Entry, bool, error)
	Changes(ctx context.Context, userID string, after int64, limit int) ([]ledger.Entry, error)
	Position(ctx context.Context, userID string) (int64, error)
}

var (
	_ RecordLedger = (*ledger.Postgres)(nil)
	_ RecordLedger = (*ledger.Memory)(nil)
)

// Paging of GET /bff/payments.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// Record is a money-moving request as its user sees it (GET /bff/payments,
// docs/endpoints.md): the api's PaymentRecord.
type Record struct {
	// Key is the Idempotency-Key as the client sent it (the ledger keeps
	// it as sent: it names the request, it is no secret).
	Key   string `json:"key"`
	Route string `json:"route"`
	// State is in_flight, done, unknown, awaiting_approval (held for the
	// user's approval, not sent) or declined (held and never approved:
	// never sent).
	State string `json:"state"`
	// Status is the HTTP status the BFF answered: the stored answer's when
	// done, 502 (PAYMENT_OUTCOME_UNKNOWN) when unknown, 401
	// (STEP_UP_REQUIRED) awaiting approval, 403 (STEP_UP_DECLINED)
	// declined; absent in flight.
	Status int `json:"status,omitempty"`
	// StepUpURL, awaiting approval, is where the user approves it: only
	// the session that made it can, so only that session is shown it
	// (ForSession).
	StepUpURL string `json:"stepUpUrl,omitempty"`
	// Declined says why a declined payment was not sent: denied, mismatch,
	// expired or withdrawn.
	Declined  string `json:"declined,omitempty"`
	PaymentID string `json:"paymentId,omitempty"`
	// PaymentStatus is the upstream's latest known status of the payment
	// (follower.go); null until one is known.
	PaymentStatus *string   `json:"paymentStatus"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`

	// sessionRef is the session that made it (session.Handle).
	sessionRef string
}

// ForSession is the record as the session handle sees it: a hold's
// stepUpUrl only for the session that made the payment, the only one
// whose approval can release it.
func (r Record) ForSession(handle string) Record {
	if r.sessionRef != handle {
		r.StepUpURL = ""
	}
	return r
}

// Records reads the user's records. Safe for concurrent use.
type Records struct {
	ledger  RecordLedger
	cursors *seal.Box
	refs    holdRefs // a hold's step-up URL, shown to its session
}

// newRecords returns the records read from led, their cursors sealed with
// cursors.
func newRecords(led RecordLedger, cursors *seal.Box, refs holdRefs) *Records {
	return &Records{ledger: led, cursors: cursors, refs: refs}
}

// Page is one page of a user's records, newest first. NextCursor is empty
// on the last page.
type Page struct {
	Items      []Record `json:"items"`
	NextCursor string   `json:"nextCursor,omitempty"`
}

func (s *Records) record(userID string, e ledger.Entry) Record {
	r := Record{Key: e.Key, Route: e.Route, State: string(e.State), PaymentID: e.PaymentID,
		CreatedAt: e.CreatedAt.UTC(), UpdatedAt: e.UpdatedAt.UTC(), sessionRef: e.SessionRef}
	if e.PaymentStatus != "" {
		r.PaymentStatus = &e.PaymentStatus
	}
	switch e.State {
	case ledger.StateDone:
		r.Status = e.Answered
	case ledger.StateUnknown:
		r.Status = http.StatusBadGateway // every request with the key is answered PAYMENT_OUTCOME_UNKNOWN
	case ledger.StateAwaiting:
		r.Status, r.StepUpURL = http.StatusUnauthorized, s.refs.stepUpURL(userID, e.SessionRef, e.ID)
	case ledger.StateDeclined:
		r.Status, r.Declined = http.StatusForbidden, e.Ending
	}
	return r
}

// A cursor of GET /bff/payments is the position after the last record of
// a page (created_at and the ledger's row id), sealed under the BFF's
// key and bound to its user: it opens only for that user, and says
// nothing of the row ids, which count every user's requests.

// cursorLen is a position's size: created_at (µs) and id.
const cursorLen = 16

// cursorAAD binds a sealed cursor to its user.
func cursorAAD(userID string) []byte { return []byte("bff payments cursor\x00" + userID) }

// sealCursor is the opaque cursor after c for userID.
func (s *Records) sealCursor(userID string, c ledger.Cursor) string {
	var b [cursorLen]byte
	binary.BigEndian.PutUint64(b[:8], uint64(c.CreatedAt.UnixMicro()))
	binary.BigEndian.PutUint64(b[8:], uint64(c.ID))
	return base64.RawURLEncoding.EncodeToString(s.cursors.Seal(nil, b[:], cursorAAD(userID)))
}

// openCursor reads a cursor sealCursor made for userID; "" is the start.
func (s *Records) openCursor(userID, cursor string) (ledger.Cursor, bool) {
	if cursor == "" {
		return ledger.Cursor{}, true
	}
	// Strict and of the exact length: one spelling per cursor (the decoder
	// would skip CR and LF, and accept stray low bits).
	if len(cursor) != base64.RawURLEncoding.EncodedLen(cursorLen+s.cursors.Overhead()) {
		return ledger.Cursor{}, false
	}
	sealed, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	if err != nil {
		return ledger.Cursor{}, false
	}
	b, err := s.cursors.Open(nil, sealed, cursorAAD(userID))
	if err != nil || len(b) != cursorLen {
		return ledger.Cursor{}, false
	}
	id := int64(binary.BigEndian.Uint64(b[8:]))
	if id <= 0 {
		return ledger.Cursor{}, false
	}
	return ledger.Cursor{CreatedAt: time.UnixMicro(int64(binary.BigEndian.Uint64(b[:8]))).UTC(), ID: id}, true
}

func invalid(field, msg string) *problem.Problem {
	p := problem.New(problem.CodeValidationError, msg)
	p.Fields = []problem.Field{{Field: field, Message: msg}}
	return p
}

// Records returns a page of the user's money-moving requests, newest
// first: limit of them (0: DefaultLimit; at most MaxLimit) after cursor.
func (s *Records) Records(ctx context.Context, userID, cursor string, limit int) (Page, error) {
	after, ok := s.openCursor(userID, cursor)
	if !ok {
		return Page{}, invalid("cursor", "cursor is not one this endpoint returned")
	}
	switch {
	case limit == 0:
		limit = DefaultLimit
	case limit < 0 || limit > MaxLimit:
		return Page{}, invalid("limit", "limit must be between 1 and 100")
	}
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	// One more than the page: whether there is a next page, without a
	// cursor that leads to an empty one.
	entries, err := s.ledger.List(lctx, userID, after, limit+1)
	if err != nil {
		return Page{}, problem.Wrap(problem.CodeLedgerUnavailable, "payments cannot be read right now", err)
	}
	page := Page{Items: make([]Record, 0, min(len(entries), limit))}
	for i, e := range entries {
		if i == limit {
			page.NextCursor = s.sealCursor(userID, entries[i-1].Cursor())
			break
		}
		page.Items = append(page.Items, s.record(userID, e))
	}
	return page, nil
}

// Record returns the user's money-moving request with the Idempotency-Key
// (the newest, should the key be on several money routes). Another user's
// key, or one never used, is 404 ROUTE_NOT_FOUND, the same answer.
func (s *Records) Record(ctx context.Context, userID, key string) (Record, error) {
	if !ValidKey(key) {
		return Record{}, notFound()
	}
	r, ok, err := s.get(ctx, userID, key)
	switch {
	case err != nil:
		return Record{}, problem.Wrap(problem.CodeLedgerUnavailable, "payments cannot be read right now", err)
	case !ok:
		return Record{}, notFound()
	}
	return r, nil
}

// get reads the user's record with key; ok is false when there is none.
func (s *Records) get(ctx context.Context, userID, key string) (Record, bool, error) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	e, ok, err := s.ledger.Get(lctx, userID, key)
	if err != nil || !ok {
		return Record{}, false, err
	}
	return s.record(userID, e), true, nil
}

func notFound() *problem.Problem {
	return problem.New(problem.CodeRouteNotFound, "no payment request of yours has this Idempotency-Key")
}

// ChangesPage is how many changes Changes returns at most: a stream reads
// again while a read fills it.
const ChangesPage = 100

// Change is a record at its position in its user's stream of changes.
type Change struct {
	Seq    int64
	Record Record
}

// Changes returns the user's records changed after position after, in
// order, up to ChangesPage: each once, as it stands now.
func (s *Records) Changes(ctx context.Context, userID string, after int64) ([]Change, error) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	entries, err := s.ledger.Changes(lctx, userID, after, ChangesPage)
	if err != nil {
		return nil, problem.Wrap(problem.CodeLedgerUnavailable, "payment changes cannot be read right now", err)
	}
	out := make([]Change, len(entries))
	for i, e := range entries {
		out[i] = Change{Seq: e.Seq, Record: s.record(userID, e)}
	}
	return out, nil
}

// Position is the user's latest position: a stream that starts now sends
// what comes after it.
func (s *Records) Position(ctx context.Context, userID string) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	n, err := s.ledger.Position(lctx, userID)
	if err != nil {
		return 0, problem.Wrap(problem.CodeLedgerUnavailable, "payment changes cannot be read right now", err)
	}
	return n, nil
}
