package payments

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// The money path: a money-moving request admitted (admit.go) is claimed in
// the ledger before anything is sent, then either held for the user's
// approval (holds.go), sent once by its owner (owner.go), or, when its key
// was claimed before, answered as a repeat (repeat.go).

// ClaimLedger is what the money path needs of the ledger (docs/payments.md,
// "How it is built"): the claim, the send mark (Sending), the owner's
// outcome (Finish, Release, Unknown), a claim ended past its deadline
// (Abandon), a lapsed hold ended (Decline), and the audit trail of a
// repeat (Event).
type ClaimLedger interface {
	Claim(ctx context.Context, req ledger.Request, bound time.Duration) (*ledger.Claim, *ledger.Record, error)
	Sending(ctx context.Context, c *ledger.Claim, s ledger.SendEvidence) (bool, error)
	Finish(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Release(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Unknown(ctx context.Context, c *ledger.Claim, o ledger.Outcome) (bool, error)
	Abandon(ctx context.Context, id int64) (ledger.State, error)
	Decline(ctx context.Context, id int64, ending string) (bool, error)
	Event(ctx context.Context, id int64, req ledger.Request, what string) error
}

var (
	_ ClaimLedger = (*ledger.Postgres)(nil)
	_ ClaimLedger = (*ledger.Memory)(nil)
)

// labels is what the edge learns of a money request for its metrics.
type labels struct {
	upstreamStatus int    // the last upstream status; 0 when none
	replayedCode   string // the code of a stored refusal replayed
}

// MoneyPath serves the money-moving requests: at most once per key.
type MoneyPath struct {
	base
	ledger   ClaimLedger
	evidence *evidence
	holds    *Holds        // nil when step-up is off
	timeout  time.Duration // the upstream timeout: a request's sends end within it
}

// serve runs a money-moving POST under route, or with change a change of
// a merchant (held for the user's approval), at most once per key:
// claimed in the ledger before anything is sent, marked durably just
// before the one send, never sent again after an end the BFF cannot read.
func (s *MoneyPath) serve(w http.ResponseWriter, r *http.Request, c proxy.Call, t proxy.Target, route string, change bool) (labels, *problem.Problem) {
	body, p := s.up.Body(r) // 413 BODY_TOO_LARGE first, as on every route
	if p != nil {
		return labels{}, p
	}
	m, refused, p := admit(r, body, c, t, route, change)
	if p != nil {
		s.observe.MoneyRequest(refused)
		return labels{}, p
	}
	if change || s.holds.wants(route, m.content) {
		m.req.Held = m.heldForm()
	}
	// The payment is detached from the client: a mobile app that loses its
	// connection mid-payment finds the outcome stored when it retries. Its
	// deadline starts before the claim, so the claim's deadline (the same
	// timeout plus ownerMargin, on the database's clock) comes later.
	bg := context.WithoutCancel(r.Context())
	ctx, cancel := context.WithTimeout(bg, s.timeout)
	defer cancel()
	return s.claimed(ctx, bg, w, m)
}

// claimed claims m's key and acts on what the ledger answered: a new
// claim is held (m.req.Held) or sent by its owner; a key claimed before is
// a repeat.
func (s *MoneyPath) claimed(ctx, bg context.Context, w http.ResponseWriter, m *moneyCall) (labels, *problem.Problem) {
	claim, rec, err := s.claim(bg, m.req)
	switch {
	case err != nil:
		return labels{}, s.ledgerFailed(m.call.RequestID, err)
	case rec != nil:
		return (&repeat{path: s, ctx: ctx, bg: bg, w: w, m: m}).answer(rec)
	case m.req.Held != nil:
		s.observe.MoneyRequest(MoneyHeld)
		return labels{}, s.holds.required(m.req.UserID, m.req.SessionRef, claim.ID, claim.ClaimedAt.Add(s.holds.policy.HoldFor))
	}
	m.claim = claim
	return (&owner{path: s, ctx: ctx, bg: bg, w: w, m: m}).run()
}

// claim claims req's key for as long as its owner may act: the upstream
// timeout plus ownerMargin, or a hold's time.
func (s *MoneyPath) claim(ctx context.Context, req ledger.Request) (*ledger.Claim, *ledger.Record, error) {
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	bound := s.timeout + ownerMargin
	if req.Held != nil {
		bound = s.holds.policy.HoldFor
	}
	return s.ledger.Claim(lctx, req, bound)
}

// sendApproved sends an approved hold, whose claim m holds, as its owner
// (the sender of Holds): the answer is stored, never written to a client.
func (s *MoneyPath) sendApproved(bg context.Context, m *moneyCall) *problem.Problem {
	ctx, cancel := context.WithTimeout(bg, s.timeout)
	defer cancel()
	_, p := (&owner{path: s, ctx: ctx, bg: bg, w: &recorder{header: http.Header{}}, m: m}).run()
	return p
}

// declineLapsed ends a hold that can no longer be approved (ending:
// expired, or withdrawn when step-up was turned off) without a send, and
// reports whether this call ended it.
func (s *MoneyPath) declineLapsed(ctx context.Context, id int64, ending string) bool {
	ok, err := withLedger(context.WithoutCancel(ctx), func(ctx context.Context) (bool, error) {
		return s.ledger.Decline(ctx, id, ending)
	})
	if err != nil {
		s.log.Warn("a held payment could not be declined; it expires at its deadline", slog.String("error", err.Error()))
		return false
	}
	if ok {
		s.observe.MoneyRequest(declinedResult(ending))
	}
	return ok
}

// event writes a repeat's audit event, and reports it by the same word.
func (s *MoneyPath) event(bg context.Context, m *moneyCall, id int64, what string) {
	s.observe.MoneyRequest(MoneyResult(what))
	ectx, cancel := context.WithTimeout(bg, ledgerTimeout)
	defer cancel()
	if err := s.ledger.Event(ectx, id, m.req, what); err != nil {
		s.log.Warn("a payment's audit event could not be written", slog.String("requestId", m.call.RequestID), slog.String("error", err.Error()))
	}
}

// outcomeUnknown is the answer when the upstream may or may not have acted.
func outcomeUnknown(code string, status int) *problem.Problem {
	detail := "the upstream may or may not have made this payment and it could not be confirmed; it will not be sent again. Check the payment list before making a new payment"
	switch {
	case code == problem.CodeUpstreamTimeout:
		detail = "the upstream did not answer in time; " + detail
	case status == http.StatusUnauthorized:
		detail = "the upstream refused the BFF's credentials after receiving this payment; " + detail
	case status >= 500:
		detail = "the upstream failed while handling this payment; " + detail
	}
	return problem.New(problem.CodePaymentOutcomeUnknown, detail)
}

// paymentID reads the id a 2xx money-moving reply names, for the audit.
func paymentID(body []byte) string {
	var v struct {
		ID        string `json:"id"`
		PaymentID string `json:"paymentId"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	if v.ID != "" {
		return v.ID
	}
	return v.PaymentID
}

// errClaimLost is the send mark's failure when the claim ran out before
// the send: another request or the recoverer has it now, and nothing was
// sent.
var errClaimLost = errors.New("the claim ran out before the send")
