package payments

import (
	"encoding/json"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
)

// This file is settlement's rules, and nothing else: a pure function from
// the evidence to one of three conclusions. docs/payments.md ("Settling")
// states the same rules in the same words; the table test in
// settlement_test.go has a row for each.

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
	Snapshot ledger.Send
	// Listing is the user's payments as the upstream lists them now.
	Listing Listing
	// Quiet: no send of this request can still be acting at the upstream:
	// the upstream answered it, or its deadline has passed.
	Quiet bool
	// Others are the user's other money requests (any route, any state)
	// whose deadline came after this request's claim, or that own a listed
	// payment.
	Others []ledger.Other
}

// Listing is a read of the user's payments, newest first.
type Listing struct {
	Payments []Listed
	// Whole: the read reached the end of the list.
	Whole bool
	// Date is the upstream's clock when it answered (zero: not sent).
	Date time.Time
}

// Listed is one payment as the upstream lists it.
type Listed struct {
	ID          string         `json:"id"`
	Status      string         `json:"status"`
	ProviderID  string         `json:"providerId"`
	PayURL      string         `json:"payUrl"`
	RedirectURL string         `json:"redirectUrl"`
	CreatedAt   time.Time      `json:"createdAt"`
	Info        map[string]any `json:"paymentInformation"`
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
		if e.Request.Similar(p) && !(brokenRule && namedByAnother(p, e.Others)) {
			similar = append(similar, p)
		}
		if e.Request.Equal(p) {
			equal = append(equal, p)
		}
	}
	if len(similar) == 0 {
		switch {
		case !e.Listing.Whole:
			return unknownBecause("the listing did not reach the end of the list")
		case !snap.SeenCut.IsZero():
			return unknownBecause("the snapshot did not read the whole list")
		case !e.Quiet:
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
	case len(notOwned) > 1:
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
func fresh(p Listed, snap ledger.Send) bool {
	return p.ID != "" && !slices.Contains(snap.SeenBefore, p.ID)
}

// insideWindow reports whether a payment created at t (the upstream's
// clock) could be the one this request's send made.
func insideWindow(snap ledger.Send, t time.Time) bool {
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
func ownedByAnother(p Listed, others []ledger.Other) bool {
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
func mayHaveMade(o ledger.Other, p Listed) bool {
	if !o.Sent {
		return false
	}
	if !o.Opaque {
		c, ok := ParseContent(o.Content)
		if !ok || !c.Equal(p) {
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

// Content is what a money request asks the upstream to create, read as
// the upstream reads it: the exact keys paymentInformation and
// redirectUrl. Info is nil when the request creates no payment.
type Content struct {
	Info        map[string]any `json:"paymentInformation"`
	RedirectURL string         `json:"redirectUrl,omitempty"`
}

// creates reads the payment a money body on path asks to create: a
// creation's paymentInformation (whatever else it carries: the upstream's
// POST /v2/payments reads no paymentId), or an open-banking init's when it
// names no existing paymentId. ok is false when it creates none.
func creates(body []byte, path string) (Content, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return Content{}, false
	}
	if raw, ok := m["paymentId"]; ok && path != creationPath {
		var id string
		if json.Unmarshal(raw, &id) != nil || id != "" {
			return Content{}, false // an existing payment: its init creates nothing
		}
	}
	var c Content
	if json.Unmarshal(m["paymentInformation"], &c.Info) != nil || len(c.Info) == 0 {
		return Content{}, false
	}
	if raw, ok := m["redirectUrl"]; ok && json.Unmarshal(raw, &c.RedirectURL) != nil {
		return Content{}, false
	}
	return c, true
}

// ParseContent reads a stored Content (the ledger's, from Encode).
func ParseContent(raw []byte) (Content, bool) {
	var c Content
	if raw == nil || json.Unmarshal(raw, &c) != nil || len(c.Info) == 0 {
		return Content{}, false
	}
	return c, true
}

// Encode is the Content as the ledger stores it.
func (c Content) Encode() []byte {
	b, _ := json.Marshal(c)
	return b
}

// Equal reports whether p is exactly what c asked for: the same keys at
// every level, strings compared as strings, and numbers by value, where
// the upstream has numbers (amount: a client may send it as a string).
func (c Content) Equal(p Listed) bool {
	return c.RedirectURL == p.RedirectURL && equalObject(c.Info, p.Info)
}

// upstreamNumbers are the paymentInformation fields the upstream keeps
// as numbers, whatever JSON type the client sent.
var upstreamNumbers = map[string]bool{"amount": true}

func equalObject(sent, listed map[string]any) bool {
	if listed == nil || len(sent) != len(listed) {
		return false
	}
	for k, v := range sent {
		w, ok := listed[k]
		if !ok || !equalValue(upstreamNumbers[k], v, w) {
			return false
		}
	}
	return true
}

func equalValue(numeric bool, a, b any) bool {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		return ok && equalObject(av, bv)
	case string:
		if numeric {
			return sameNumber(a, b)
		}
		bs, ok := b.(string)
		return ok && av == bs
	case float64:
		return sameNumber(a, b)
	case bool:
		bv, ok := b.(bool)
		return ok && av == bv
	case nil:
		return b == nil
	}
	return false // arrays: the upstream keeps none in paymentInformation
}

// sameNumber compares two numbers exactly by value (a string only where
// the upstream reads it as one: the caller decides).
func sameNumber(a, b any) bool {
	x, ok1 := decimal(a)
	y, ok2 := decimal(b)
	return ok1 && ok2 && x.Cmp(y) == 0
}

func decimal(v any) (*big.Rat, bool) {
	switch n := v.(type) {
	case float64:
		r := new(big.Rat)
		if r.SetFloat64(n) == nil {
			return nil, false
		}
		return r, true
	case string:
		f, ok := new(big.Float).SetString(strings.TrimSpace(n))
		if !ok {
			return nil, false
		}
		// As the upstream reads it: a JSON number, a float64.
		x, _ := f.Float64()
		return decimal(x)
	}
	return nil, false
}

// Similar reports whether p could be what c asked for, read loosely: it is
// not similar only when its amount or its currency differs. A payment this
// request made is always similar to it; "not made" needs none.
func (c Content) Similar(p Listed) bool {
	if p.Info == nil {
		return true
	}
	if a, b := c.Info["amount"], p.Info["amount"]; a != nil && b != nil {
		x, ok1 := decimal(a)
		y, ok2 := decimal(b)
		if ok1 && ok2 && x.Cmp(y) != 0 {
			return false
		}
	}
	a, ok1 := c.Info["currency"].(string)
	b, ok2 := p.Info["currency"].(string)
	return !ok1 || !ok2 || strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b))
}
