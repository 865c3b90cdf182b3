//go:build brokenrule

package payments

import "github.com/fintech-bff/bff/internal/ledger"

// brokenRule breaks two rules on purpose. "Not made", as the first attack
// found it broken: a fresh payment that another request names (an
// open-banking init of it, say) is not counted, so ownership widens "not
// made"; the history checker (e2e/history_test.go) catches it. And the
// approval of a held payment: its granted authorization_details are not
// compared with the payment, so an approval of other content releases it;
// the hold checker (stepup_history_test.go) catches that. Only the
// checkers' tests build with it.
const brokenRule = true

func namedByAnother(p Listed, others []ledger.Other) bool {
	for _, o := range others {
		if o.PaymentID == p.ID {
			return true
		}
	}
	return false
}
