package payments

import (
	"encoding/json"
	"time"

	"github.com/fintech-bff/bff/internal/money"
)

// What a money request asks the upstream to create, and what the upstream
// lists: the two sides every comparison of settling reads.

// Content is what a money request asks the upstream to create, as the
// BFF read it once (money.Decode) and sent it: the payment's content and
// the redirectUrl. Info is nil when the request creates no payment. The
// ledger stores it in the form Encode writes (the body's own canonical
// members), so what is compared, held and approved is what was sent.
type Content struct {
	Info        *money.Info
	RedirectURL string
}

// contentOf is what body asks the upstream to create.
func contentOf(b money.Body) Content {
	if !b.Creates() {
		return Content{}
	}
	return Content{Info: b.Info, RedirectURL: b.RedirectURL}
}

// ParseContent reads a stored Content (the ledger's, from Encode). A record
// an earlier version stored that this model does not read is !ok: the
// callers then rule nothing out with it.
func ParseContent(raw []byte) (Content, bool) {
	if raw == nil {
		return Content{}, false
	}
	b, e := money.Decode(money.Creation, raw)
	if e != nil || b.Info == nil {
		return Content{}, false
	}
	return Content{Info: b.Info, RedirectURL: b.RedirectURL}, true
}

// Encode is the Content as the ledger stores it.
func (c Content) Encode() []byte {
	return money.Body{Kind: money.Creation, Info: c.Info, RedirectURL: c.RedirectURL}.Encode()
}

// Equal reports whether p is exactly what c asked for: every member of
// the model equal (the amount to the minor unit), an absent member equal
// only to an absent one.
func (c Content) Equal(p Listed) bool {
	return c.RedirectURL == p.RedirectURL && c.Info.Equal(p.Content)
}

// Similar reports whether p could be what the upstream made of c, read
// loosely: not similar only when its currency differs or its amount
// differs by a minor unit or more. A payment this request made is always
// similar to it; "not made" needs none.
func (c Content) Similar(p Listed) bool {
	return c.Info.Similar(p.Content)
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
	ID          string          `json:"id"`
	Status      string          `json:"status"`
	ProviderID  string          `json:"providerId"`
	PayURL      string          `json:"payUrl"`
	RedirectURL string          `json:"redirectUrl"`
	CreatedAt   time.Time       `json:"createdAt"`
	Info        json.RawMessage `json:"paymentInformation"`
	// Content is Info as read (money.ReadSeen): nil when the list gave
	// none.
	Content *money.Seen `json:"-"`
}
