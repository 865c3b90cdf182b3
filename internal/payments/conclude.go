package payments

import (
	"slices"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/mutant"
)

// This file is settling's rules, and nothing else: a pure function from
// the evidence to one of three conclusions. docs/payments.md ("Settling")
// states the same rules in the same words; the table test in
// conclude_test.go has a row for each.

// Conclusion is what the evidence proves about one money request.
type Conclusion int

const (
	// Unknown: the evidence proves neither; the key is never sent again,
	// and the settler keeps looking.
	Unknown Conclusion = iota
	// NotMade: the upstream made no payment for this request; its key is
	// given back (or the owner sends once more after a 401).
	NotMade
	// Made: exactly one payment is this request's.
	Made
)

func (c Conclusion) String() string {
	return [...]string{"unknown", "not made", "made"}[c]
}

// Evidence is everything settlement reads about one money request.
type Evidence struct {
	// Request is what the request asked the upstream to create.
	Request Content
	// Snapshot is what the owner read of the user's payments just before
	// its send (recorded with the send mark).
	Snapshot ledger.SendEvidence
	// Listing is the user's payments as the upstream lists them now.
	Listing Listing
	// Quiet: no send of this request can still be acting at the upstream:
	// the upstream answered it, or its deadline has passed.
	Quiet bool
	// Others are the user's other money requests (any route, any state)
	// whose deadline came after this request's claim, or that own a listed
	// payment.
	Others []ledger.OtherRequest
}

// Result is a Conclusion, the payment when it is Made, and why.
type Result struct {
	Conclusion Conclusion
	Payment    Listed
	Reason     string
}

// Conclude applies the rules:
//
//   - Made needs exactly one fresh payment (not in the snapshot) whose
//     content equals the request's, created inside the adoption window,
//     that no other request of the user owns or could have made.
//   - NotMade needs a quiet request, a snapshot and a listing that each
//     read the whole list, and no fresh payment similar to the request's,
//     whoever owns it and whenever it was created: ownership and windows
//     narrow adopting, they never widen "not made".
//   - Anything else is Unknown.
func Conclude(e Evidence) Result {
	snap := e.Snapshot
	if !snap.Snapshot || e.Request.Info == nil {
		return unknownBecause("no snapshot was read before the send")
	}
	// The fresh payments similar to the request, and those equal to it.
	var similar, equal []Listed
	for _, p := range e.Listing.Payments {
		if !fresh(p, snap) {
			continue
		}
		if e.Request.Similar(p) && !(mutant.Is(mutant.OwnerWidensNotMade) && namedByAnother(p, e.Others)) {
			similar = append(similar, p)
		}
		if e.Request.Equal(p) || (mutant.Is(mutant.MadeOnSimilar) && e.Request.Similar(p)) {
			equal = append(equal, p)
		}
	}
	if len(similar) == 0 {
		switch {
		case !e.Listing.Whole:
			return unknownBecause("the listing did not reach the end of the list")
		case !snap.SeenCut.IsZero():
			return unknownBecause("the snapshot did not read the whole list")
		case !e.Quiet && !mutant.Is(mutant.NotMadeBeforeQuiet):
			return unknownBecause("the request may still be acting at the upstream")
		}
		return Result{Conclusion: NotMade, Reason: "no similar payment was made after the snapshot"}
	}
	var notOwned []Listed
	for _, p := range equal {
		if !ownedByAnother(p, e.Others) {
			notOwned = append(notOwned, p)
		}
	}
	switch {
	case len(notOwned) == 0:
		return unknownBecause("a similar payment was made, and none is this request's alone")
	case len(notOwned) > 1 && !mutant.Is(mutant.MadeOfTwoEqual):
		return unknownBecause("several payments equal this request")
	}
	candidate := notOwned[0]
	if !insideWindow(snap, candidate.CreatedAt) {
		return unknownBecause("the only equal payment was made outside this request's window")
	}
	for _, o := range e.Others {
		if mayHaveMade(o, candidate) {
			return unknownBecause("another request of the user could have made the payment")
		}
	}
	return Result{Conclusion: Made, Payment: candidate, Reason: "exactly one fresh payment equals this request"}
}

func unknownBecause(why string) Result { return Result{Conclusion: Unknown, Reason: why} }

// fresh reports whether p was not there when the snapshot was read: its id
// is not among SeenBefore.
func fresh(p Listed, snap ledger.SendEvidence) bool {
	if mutant.Is(mutant.FreshByClock) {
		return p.ID != "" && !p.CreatedAt.Before(snap.SeenFrom)
	}
	return p.ID != "" && !slices.Contains(snap.SeenBefore, p.ID)
}

// insideWindow reports whether a payment created at t (the upstream's
// clock) could be the one this request's send made.
func insideWindow(snap ledger.SendEvidence, t time.Time) bool {
	if mutant.Is(mutant.NoWindow) {
		return true
	}
	switch {
	case t.IsZero() || snap.WindowEnd.IsZero():
		return false // no time to judge by
	case !snap.SeenCut.IsZero() && !t.After(snap.SeenCut):
		return false // at or before what the snapshot read: it may have existed before
	case !snap.SeenFrom.IsZero() && t.Before(snap.SeenFrom):
		return false // created before the snapshot was read
	}
	return !t.After(snap.WindowEnd)
}

// ownedByAnother reports whether another request created p: its answer (or
// its settling) named p and it is a creation. An open-banking init of an
// existing payment names that payment but never owns its creation.
func ownedByAnother(p Listed, others []ledger.OtherRequest) bool {
	for _, o := range others {
		if o.PaymentID == p.ID && (o.Content != nil || o.Opaque) {
			return true
		}
	}
	return false
}

// mayHaveMade reports whether another request o could have made p: it was
// sent, asked for the same content, and nothing it learned since rules p
// out (another payment of its own, or the upstream's refusal of its body).
func mayHaveMade(o ledger.OtherRequest, p Listed) bool {
	if !o.Sent {
		return false
	}
	if !o.Opaque {
		if o.Content == nil {
			return false // it creates nothing (an init of an existing payment)
		}
		// Judged by what the upstream would have made of it (similar
		// content), never by strict equality: a member the upstream drops
		// or an amount it rounds must not rule o out. A record this model
		// cannot read rules nothing out.
		if c, ok := ParseContent(o.Content); ok && !couldHaveMade(c, p) {
			return false
		}
	}
	switch {
	case o.PaymentID != "":
		return o.PaymentID == p.ID
	case o.State == ledger.StateDone && o.Ending == ledger.EndAnswered && o.UpstreamStatus >= 400 && o.UpstreamStatus < 500:
		return false // the upstream refused its body
	}
	return true
}

// couldHaveMade reports whether a request with content c could have made p.
func couldHaveMade(c Content, p Listed) bool {
	if mutant.Is(mutant.CouldHaveMadeByEquality) {
		return c.Equal(p)
	}
	return c.Similar(p)
}

// namedByAnother is used only by the mutant OwnerWidensNotMade: whether
// another request's answer named p.
func namedByAnother(p Listed, others []ledger.OtherRequest) bool {
	for _, o := range others {
		if o.PaymentID == p.ID {
			return true
		}
	}
	return false
}
