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
)

// The money path: a money-moving request admitted (admit.go) is claimed in
// the ledger before anything is sent, then either held for the user's
// approval (holds.go), sent once by its owner (owner.go), or, when its key
// was claimed before, answered as a repeat (repeat.go); pay.go leads it
// through. This file is the path's state and its ledger calls.

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
	Event(ctx context.Context, id int64, req ledger.Request, what ledger.AuditEvent) error
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

// declineLapsed ends a hold that can no longer be approved (ending:
// expired, or withdrawn when step-up was turned off) without a send, and
// reports whether this call ended it.
func (s *MoneyPath) declineLapsed(ctx context.Context, id int64, ending string) bool {
	return s.declineHold(ctx, s.ledger, id, ending)
}

// event writes a repeat's audit event, and reports it by the same word.
func (s *MoneyPath) event(bg context.Context, m *moneyCall, id int64, what ledger.AuditEvent) {
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
