//go:build brokenrule

package payments

import "github.com/fintech-bff/bff/internal/ledger"

// brokenRule breaks "not made" on purpose, as the first attack found it
// broken: a fresh payment that another request names (an open-banking init
// of it, say) is not counted, so ownership widens "not made". Only the
// history checker's test builds with it.
const brokenRule = true

func namedByAnother(p Listed, others []ledger.Other) bool {
	for _, o := range others {
		if o.PaymentID == p.ID {
			return true
		}
	}
	return false
}
