// Package mutant names the plausible broken rules of the money path that
// the checkers must catch (mutation testing, one rule at a time). A
// product build has none active: Active is "", and every Is is false. A
// test build sets one by the linker,
//
//	go test -ldflags=-X=github.com/fintech-bff/bff/internal/mutant.active=made-similar ...
//
// and `make mutants` builds and runs the fast checks once for each name
// in All, requiring each to fail (bench/mutants.txt lists what killed
// which). The checks are a variable and a string comparison: the cost on
// the money path is nil next to one ledger round trip.
package mutant

// active is the mutant this build runs with; "" in every product build.
var active string

// Active is the mutant this build runs with ("" for none).
func Active() string { return active }

// Is reports whether this build runs with the mutant name.
func Is(name string) bool { return active != "" && active == name }

// The mutants: each breaks one rule, as a plausible bug would.
const (
	// MadeOnSimilar concludes "made" on a payment similar to the request
	// (same amount and currency) instead of one equal to it.
	MadeOnSimilar = "made-on-similar"
	// MadeOfTwoEqual concludes "made" with the first of several equal
	// candidates instead of unknown.
	MadeOfTwoEqual = "made-of-two-equal"
	// CaseVariantKeys lets a body with keys that differ only in case
	// through (only exact duplicates are refused).
	CaseVariantKeys = "case-variant-keys"
	// FinalReplaceable lets a later status replace a final one.
	FinalReplaceable = "final-replaceable"
	// FreshByClock judges a payment fresh by the snapshot's clock (created
	// after it was read) instead of by its id set.
	FreshByClock = "fresh-by-clock"
	// NoWindow removes the adoption window: a fresh equal payment made any
	// time after the snapshot is adopted.
	NoWindow = "no-window"
	// NotMadeBeforeQuiet concludes "not made" while the request may still
	// be acting at the upstream.
	NotMadeBeforeQuiet = "not-made-before-quiet"
	// NoTrailingSlash removes the trailing-slash canonicalisation: a
	// creation at /v2/payments/ is refused as an undefined sub-path.
	NoTrailingSlash = "no-trailing-slash"
	// CouldHaveMadeByEquality rules another request out of having made a
	// payment when its content is not strictly equal to it.
	CouldHaveMadeByEquality = "could-have-made-by-equality"
	// AmountThroughFloat reads an amount through float64 (rounding a long
	// decimal instead of refusing it).
	AmountThroughFloat = "amount-through-float"
	// PayeeUnbound leaves a merchant payment's payee out of its approval:
	// the merchant's account is neither shown, granted nor checked at the
	// send.
	PayeeUnbound = "payee-unbound"
	// ListLagIgnored settles as if the upstream's list were current
	// whatever payments.list_lag says: "not made" read from a list that
	// may not show the payment yet.
	ListLagIgnored = "list-lag-ignored"
	// OthersSinceClaim takes settling's others from the request's claim
	// whatever payments.list_lag says: a request that made a payment in the
	// lag before the claim (so missing from the snapshot) is not among them,
	// and its payment can be adopted.
	OthersSinceClaim = "others-since-claim"
	// OwnerWidensNotMade lets another request's naming of a fresh payment
	// conclude "not made" (ownership widening "not made").
	OwnerWidensNotMade = "owner-widens-not-made"
	// ApprovalContentUnchecked releases a held payment on an approval
	// whose granted authorization_details are not compared with it.
	ApprovalContentUnchecked = "approval-content-unchecked"
)

// All lists every mutant, in the order make mutants runs them.
var All = []string{
	MadeOnSimilar, MadeOfTwoEqual, CaseVariantKeys, FinalReplaceable, FreshByClock, NoWindow,
	NotMadeBeforeQuiet, NoTrailingSlash, CouldHaveMadeByEquality, AmountThroughFloat, PayeeUnbound,
	OwnerWidensNotMade, ApprovalContentUnchecked, ListLagIgnored, OthersSinceClaim,
}
