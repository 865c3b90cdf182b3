package payments

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/fintech-bff/bff/internal/money"
	"github.com/fintech-bff/bff/internal/mutant"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// heldRequest is what a hold keeps to send once approved.
type heldRequest struct {
	// Method is the held request's method ("" for a POST: a payment).
	Method string `json:"m,omitempty"`
	Path   string `json:"p"` // the canonical upstream path
	Route  string `json:"r"` // the route template, for the metrics
	Query  string `json:"q,omitempty"`
	Body   []byte `json:"b"`
}

func (h heldRequest) method() string {
	if h.Method == "" {
		return http.MethodPost
	}
	return h.Method
}

// isPayeeChange reports whether the held request changes a merchant
// rather than making a payment.
func (h heldRequest) isPayeeChange() bool {
	return h.Path == merchantsPath || strings.HasPrefix(h.Path, merchantsPath+"/")
}

// DetailType is the RFC 9396 type of a payment's authorization details.
const DetailType = "payment_initiation"

// paymentDetail is the authorization detail (RFC 9396, payment_initiation)
// of a payment's content: what the identity provider shows the user and
// what the approval must grant, field for field. The amount is the
// canonical decimal of the held payment (money.Amount.String), exactly
// what was sent.
func paymentDetail(c Content) paymentInitiation {
	i := c.Info
	d := paymentInitiation{Type: DetailType, CreditorName: i.CreditorName, MerchantID: i.MerchantID,
		RemittanceInformationUnstructured: i.RemittanceInformation}
	d.InstructedAmount.Currency, d.InstructedAmount.Amount = i.Amount.Currency, i.Amount.String()
	if i.CreditorAccount != nil {
		d.CreditorAccount = &ibanRef{IBAN: i.CreditorAccount.IBAN}
	}
	if i.DebtorAccount != nil {
		d.DebtorAccount = &ibanRef{IBAN: i.DebtorAccount.IBAN}
	}
	return d
}

// paymentInitiation is one RFC 9396 authorization detail of type
// payment_initiation, as the BFF asks for it and as the provider grants it.
type paymentInitiation struct {
	Type             string `json:"type"`
	InstructedAmount struct {
		Currency string `json:"currency"`
		Amount   string `json:"amount"`
	} `json:"instructedAmount"`
	CreditorName                      string   `json:"creditorName,omitempty"`
	MerchantID                        string   `json:"merchantId,omitempty"`
	CreditorAccount                   *ibanRef `json:"creditorAccount,omitempty"`
	DebtorAccount                     *ibanRef `json:"debtorAccount,omitempty"`
	RemittanceInformationUnstructured string   `json:"remittanceInformationUnstructured,omitempty"`
}

type ibanRef struct {
	IBAN string `json:"iban"`
}

// repointed is the granted detail got with the payee of want: the name too
// when the payment names none of its own (it showed the merchant's), so
// an approval that differs from want only in where the money goes (the
// merchant renamed or re-pointed since it was shown) is told apart from
// one of another payment.
func repointed(got, want paymentInitiation, c Content) paymentInitiation {
	if c.Info.CreditorName == "" {
		got.CreditorName = want.CreditorName
	}
	got.CreditorAccount = want.CreditorAccount
	return got
}

// grantedDetail reads the granted authorization_details: exactly one
// payment_initiation, with no member the BFF did not ask for.
func grantedDetail(granted json.RawMessage) (paymentInitiation, bool) {
	var list []json.RawMessage
	if json.Unmarshal(granted, &list) != nil {
		return paymentInitiation{}, false
	}
	var found json.RawMessage
	for _, raw := range list {
		var head struct{ Type string }
		if json.Unmarshal(raw, &head) == nil && head.Type == DetailType {
			if found != nil {
				return paymentInitiation{}, false
			}
			found = raw
		}
	}
	if found == nil {
		return paymentInitiation{}, false
	}
	var got paymentInitiation
	d := json.NewDecoder(bytes.NewReader(found))
	d.DisallowUnknownFields()
	if d.Decode(&got) != nil {
		return paymentInitiation{}, false
	}
	return got, true
}

// sameDetail reports whether got is want: every text equal, the amount
// equal to the minor unit (read exactly from its decimal text, never
// through a float).
func sameDetail(got, want paymentInitiation) bool {
	amount := money.ReadAmount(got.InstructedAmount.Amount, got.InstructedAmount.Currency)
	wantAmount, err := money.ParseAmount(want.InstructedAmount.Amount, want.InstructedAmount.Currency)
	if err != nil || !amount.Exact || amount.Amount != wantAmount || got.InstructedAmount.Currency != want.InstructedAmount.Currency {
		return false
	}
	return got.Type == want.Type && got.CreditorName == want.CreditorName && got.MerchantID == want.MerchantID &&
		sameIBAN(got.CreditorAccount, want.CreditorAccount) && sameIBAN(got.DebtorAccount, want.DebtorAccount) &&
		got.RemittanceInformationUnstructured == want.RemittanceInformationUnstructured
}

func sameIBAN(a, b *ibanRef) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.IBAN == b.IBAN
}

// payee is where a merchant payment's money goes: the merchant's name and
// account, as the upstream has them now.
type payee struct {
	Name string
	IBAN string
}

// withPayee is d with the merchant's name and account as its creditor:
// what the user approves is where the money goes.
func withPayee(d paymentInitiation, pe *payee) paymentInitiation {
	if pe == nil {
		return d
	}
	if d.CreditorName == "" {
		d.CreditorName = pe.Name
	}
	d.CreditorAccount = &ibanRef{IBAN: pe.IBAN}
	return d
}

// PayeeChangeType is the RFC 9396 authorization details type of a held
// change of a merchant.
const PayeeChangeType = "payee_change"

// payeeChange is one RFC 9396 authorization detail of type payee_change:
// what is created, changed or deleted, as the BFF sends it.
type payeeChange struct {
	Type string `json:"type"`
	// Action is create, update or delete.
	Action          string   `json:"action"`
	MerchantID      string   `json:"merchantId,omitempty"`
	Name            string   `json:"name,omitempty"`
	CreditorAccount *ibanRef `json:"creditorAccount,omitempty"`
	Website         string   `json:"website,omitempty"`
}

// merchantBody is a merchant as the BFF reads and sends it: the name
// (required), the account it is paid to and a website.
type merchantBody struct {
	Name    string `json:"name"`
	IBAN    string `json:"iban,omitempty"`
	Website string `json:"website,omitempty"`
}

// payeeTarget reads a merchant change's path as the upstream routes it (a
// trailing slash is the same endpoint): the action and the merchant's id.
// ok is false for a path or method the upstream defines no change at.
func payeeTarget(path, method string) (action, id string, ok bool) {
	p := strings.TrimSuffix(path, "/")
	rest, sub := strings.CutPrefix(p, merchantsPath+"/")
	switch {
	case p == merchantsPath && method == http.MethodPost:
		return "create", "", true
	case sub && rest != "" && !strings.Contains(rest, "/") && method == http.MethodPut:
		return "update", rest, true
	case sub && rest != "" && !strings.Contains(rest, "/") && method == http.MethodDelete:
		return "delete", rest, true
	}
	return "", "", false
}

// payeeChangeOf is the authorization detail of a held change.
func payeeChangeOf(held heldRequest) (payeeChange, bool) {
	action, id, ok := payeeTarget(held.Path, held.method())
	if !ok {
		return payeeChange{}, false
	}
	d := payeeChange{Type: PayeeChangeType, Action: action, MerchantID: id}
	if action != "delete" {
		var m merchantBody
		if json.Unmarshal(held.Body, &m) != nil {
			return payeeChange{}, false
		}
		d.Name, d.Website = m.Name, m.Website
		if m.IBAN != "" {
			d.CreditorAccount = &ibanRef{IBAN: m.IBAN}
		}
	}
	return d, true
}

// grantedChange reports whether the granted authorization_details hold
// exactly one payee_change, and it is want: no member more or less.
func grantedChange(granted json.RawMessage, want payeeChange) bool {
	var list []json.RawMessage
	if json.Unmarshal(granted, &list) != nil || len(list) != 1 {
		return false
	}
	var got payeeChange
	d := json.NewDecoder(bytes.NewReader(list[0]))
	d.DisallowUnknownFields()
	if d.Decode(&got) != nil {
		return false
	}
	return got.Type == want.Type && got.Action == want.Action && got.MerchantID == want.MerchantID &&
		got.Name == want.Name && sameIBAN(got.CreditorAccount, want.CreditorAccount) && got.Website == want.Website
}

// payeeOf resolves where a held payment's money goes, when its content
// names only a merchant: the approval then shows and binds the merchant's
// account itself, not an id whose account can be re-pointed. nil when the
// content names its own creditor account (the upstream pays that one).
func payeeOf(ctx context.Context, up Upstream, userID, requestID string, c Content) (*payee, *problem.Problem) {
	if c.Info == nil || c.Info.MerchantID == "" || c.Info.CreditorAccount != nil || mutant.Is(mutant.PayeeUnbound) {
		return nil, nil
	}
	rep, p := up.Exchange(ctx, proxy.Exchange{
		Call:   proxy.Call{UserID: userID, RequestID: requestID},
		Target: proxy.Target{Path: merchantsPath + "/" + url.PathEscape(c.Info.MerchantID), Route: merchantsPath},
		Method: http.MethodGet, Header: http.Header{"Accept": {"application/json"}},
	})
	if p != nil {
		return nil, p
	}
	var m struct {
		Name string `json:"name"`
		IBAN string `json:"iban"`
	}
	if rep.Status != http.StatusOK || json.Unmarshal(rep.Body, &m) != nil {
		return nil, problem.Newf(problem.CodeUpstreamError, "the payment's merchant could not be read (the upstream answered %d); nothing was sent", rep.Status)
	}
	if m.IBAN == "" {
		return nil, problem.New(problem.CodeValidationError, "the payment's merchant has no account to pay; nothing was sent")
	}
	return &payee{Name: m.Name, IBAN: m.IBAN}, nil
}
