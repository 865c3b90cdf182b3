package payments

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/receipts"
	"github.com/fintech-bff/bff/internal/signing"
)

// Receipts signs the receipts of the users' payments: what the ledger
// knows of one money request, never more (package receipts). Safe for
// concurrent use.
type Receipts struct {
	ledger ReceiptLedger
	keys   *signing.Keys
	issuer string // the BFF's public URL
	now    func() time.Time
}

// newReceipts returns the receipts of led's records, signed with keys in
// issuer's name; nil (no receipts) when keys is nil.
func newReceipts(led ReceiptLedger, keys *signing.Keys, issuer string) *Receipts {
	if keys == nil {
		return nil
	}
	return &Receipts{ledger: led, keys: keys, issuer: issuer, now: time.Now}
}

// ReceiptLedger is the ledger's part receipts read.
type ReceiptLedger interface {
	Facts(ctx context.Context, userID, key string) (ledger.Facts, bool, error)
}

var (
	_ ReceiptLedger = (*ledger.Postgres)(nil)
	_ ReceiptLedger = (*ledger.Memory)(nil)
)

// Receipt is the signed receipt (a compact JWS) of the user's request
// with key: 404 ROUTE_NOT_FOUND for another user's key or one never used,
// as GET /bff/payments/{key}; 409 IDEMPOTENCY_IN_PROGRESS, saying why,
// while the BFF does not know its outcome (in flight, awaiting approval,
// or unknown and being settled): a receipt never states more than the
// ledger knows.
func (r *Receipts) Receipt(ctx context.Context, userID, key string) (string, error) {
	if !ValidKey(key) {
		return "", notFound()
	}
	lctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	f, ok, err := r.ledger.Facts(lctx, userID, key)
	switch {
	case err != nil:
		return "", problem.Wrap(problem.CodeLedgerUnavailable, "payments cannot be read right now", err)
	case !ok:
		return "", notFound()
	}
	d, p := r.document(userID, f)
	if p != nil {
		return "", p
	}
	jws, err := receipts.Sign(r.keys, d)
	if err != nil {
		return "", problem.Wrap(problem.CodeInternal, "the receipt could not be signed", err)
	}
	return jws, nil
}

// JWKS is the JWK Set of the receipts' public keys (GET
// /bff/receipts/jwks.json).
func (r *Receipts) JWKS() []byte { return r.keys.PublicJWKS() }

// document is f as its receipt states it, or why it has none yet.
func (r *Receipts) document(userID string, f ledger.Facts) (receipts.Document, *problem.Problem) {
	d := receipts.Document{Version: receipts.Version, Issuer: r.issuer, IssuedAt: stamp(r.now()), UserID: userID,
		Key: f.Key, Route: f.Route, State: string(f.State), PaymentID: f.PaymentID,
		RequestedAt: stamp(f.CreatedAt), AnsweredAt: stamp(f.FinishedAt),
		PaymentStatus: f.PaymentStatus, PaymentStatusAt: stamp(f.StatusAt)}
	switch f.State {
	case ledger.StateDone:
		d.Status = f.Answered
	case ledger.StateDeclined:
		d.Status, d.Declined = 403, f.Ending
	case ledger.StateAwaiting:
		return d, problem.New(problem.CodeIdempotencyInProgress, "this payment waits for your approval: it has a receipt once it is sent or declined")
	case ledger.StateUnknown:
		return d, problem.New(problem.CodeIdempotencyInProgress, "this payment's outcome is not known yet (the BFF is settling it with the bank): it has a receipt once it is")
	default:
		return d, problem.New(problem.CodeIdempotencyInProgress, "this payment is still being sent: it has a receipt once it is answered")
	}
	if d.Status == 0 {
		// The stored answer does not open (a key retired too early): what
		// was answered is not known here, and a receipt would guess.
		return d, problem.New(problem.CodeIdempotencyInProgress, "this payment's answer cannot be read right now: try again later")
	}
	if c, ok := ParseContent(f.Content); ok {
		sum := sha256.Sum256(f.Content)
		d.BodySHA256 = base64.RawURLEncoding.EncodeToString(sum[:])
		i := c.Info
		d.Amount = &receipts.Amount{Minor: i.Amount.Minor, Currency: i.Amount.Currency, Text: i.Amount.String()}
		d.Payee = &receipts.Payee{Name: i.CreditorName, MerchantID: i.MerchantID}
		if i.CreditorAccount != nil {
			d.Payee.Account = MaskIBAN(i.CreditorAccount.IBAN)
		}
	}
	if a := f.Approval; a != nil {
		d.Approval = &receipts.Approval{ACR: a.ACR, AuthTime: stamp(a.AuthTime), DetailsSHA256: a.DetailsSHA256}
	}
	return d, nil
}

// MaskIBAN keeps an IBAN's country, check digits and last four
// characters: enough to recognise the account, not to pay into it
// ("DE89 … 3000"). Shorter than any IBAN (15 characters), it keeps
// nothing: what it keeps would be all or most of it.
func MaskIBAN(iban string) string {
	r := []rune(strings.ReplaceAll(iban, " ", ""))
	if len(r) < minIBAN {
		return "…"
	}
	return string(r[:4]) + " … " + string(r[len(r)-4:])
}

// minIBAN is the length of the shortest IBAN (Norway's).
const minIBAN = 15

// stamp is t in RFC 3339, UTC, to the microsecond; "" for the zero time.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.999999Z07:00")
}
