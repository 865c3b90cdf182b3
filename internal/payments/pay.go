package payments

import (
	"context"
	"net/http"

	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// A money-moving request's way through the money path: admitted, claimed,
// then held for the user's approval, sent by its owner, or answered as a
// repeat of its key.

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
	if change || s.holds.policy.wants(route, m.content) {
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
		return labels{}, s.holds.newlyHeld(m, claim)
	}
	m.claim = claim
	return s.owners.run(ctx, bg, w, m)
}
