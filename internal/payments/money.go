package payments

import (
	"context"
	"log/slog"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
)

// The money path: a money-moving request admitted (admit.go) is claimed in
// the ledger before anything is sent, then either held for the user's
// approval (holds.go), sent once by its owner (owner.go), or, when its key
// was claimed before, answered as a repeat (repeat.go); pay.go leads it
// through. This file is the path's state and its ledger calls.

// ClaimLedger is what the money path needs of the ledger (docs/payments.md,
// "How it is built"): the claim, what its owner writes (OwnerLedger), a
// claim ended past its deadline (Abandon), and the audit trail of a repeat
// (Event).
type ClaimLedger interface {
	OwnerLedger
	Claim(ctx context.Context, req ledger.Request, bound time.Duration) (*ledger.Claim, *ledger.Record, error)
	Abandon(ctx context.Context, id int64) (ledger.State, error)
	Event(ctx context.Context, id int64, req ledger.Request, what ledger.AuditEvent) error
}

var (
	_ ClaimLedger = (*ledger.Postgres)(nil)
	_ ClaimLedger = (*ledger.Memory)(nil)
)

// MoneyPath serves the money-moving requests: at most once per key.
type MoneyPath struct {
	base
	ledger   ClaimLedger
	evidence *evidence // a repeat's settling
	owners   *owners   // a new claim's send
	holds    *Holds    // which requests are held, and a lapsed hold's end
	timeout  time.Duration
}

// newMoneyPath returns the money path that claims through led, sends its
// claims through owners within timeout, and holds what holds names.
func newMoneyPath(b base, led ClaimLedger, ev *evidence, owners *owners, holds *Holds, timeout time.Duration) *MoneyPath {
	return &MoneyPath{base: b, ledger: led, evidence: ev, owners: owners, holds: holds, timeout: timeout}
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

// event writes a repeat's audit event, and reports it by the same word.
func (s *MoneyPath) event(bg context.Context, m *moneyCall, id int64, what ledger.AuditEvent) {
	s.observe.MoneyRequest(MoneyResult(what))
	ectx, cancel := context.WithTimeout(bg, ledgerTimeout)
	defer cancel()
	if err := s.ledger.Event(ectx, id, m.req, what); err != nil {
		s.log.Warn("a payment's audit event could not be written", slog.String("requestId", m.call.RequestID), slog.String("error", err.Error()))
	}
}
