package money

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Seen is a payment's content as another party wrote it: the upstream's
// list (which may drop members, empties and nulls, and write amounts as
// numbers), or an identity provider's grant. It is read leniently and never
// refused; comparisons with an Info decide what it can be.
type Seen struct {
	Amount Read
	// Currency is as written (Amount.Currency is in capitals).
	Currency              string
	MerchantID            string
	CreditorName          string
	CreditorIBAN          string
	DebtorIBAN            string
	RemittanceInformation string
}

// ReadSeen reads a paymentInformation object as another party wrote it;
// nil when raw is absent, null or not an object. Members it does not model
// are ignored: only the upstream adds them, never a body the BFF sent.
func ReadSeen(raw json.RawMessage) *Seen {
	if len(bytes.TrimSpace(raw)) == 0 || isNull(raw) {
		return nil
	}
	var v struct {
		Amount                json.RawMessage     `json:"amount"`
		Currency              any                 `json:"currency"`
		MerchantID            any                 `json:"merchantId"`
		CreditorName          any                 `json:"creditorName"`
		CreditorAccount       *struct{ IBAN any } `json:"creditorAccount"`
		DebtorAccount         *struct{ IBAN any } `json:"debtorAccount"`
		RemittanceInformation any                 `json:"remittanceInformation"`
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return nil
	}
	s := &Seen{
		Currency: text(v.Currency), MerchantID: text(v.MerchantID), CreditorName: text(v.CreditorName),
		RemittanceInformation: text(v.RemittanceInformation),
	}
	if v.CreditorAccount != nil {
		s.CreditorIBAN = text(v.CreditorAccount.IBAN)
	}
	if v.DebtorAccount != nil {
		s.DebtorIBAN = text(v.DebtorAccount.IBAN)
	}
	amount, _ := amountText(v.Amount)
	s.Amount = ReadAmount(amount, s.Currency)
	return s
}

// text is a JSON string's value, or a number's text; "" for anything else
// (null, absent: the canonical absence).
func text(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case json.Number:
		return t.String()
	}
	return ""
}

// Equal reports whether s is exactly the content i: the same amount (to
// the minor unit), currency, payee and texts, an absent member equal only
// to an absent one.
func (i *Info) Equal(s *Seen) bool {
	if s == nil {
		return false
	}
	return s.Amount.Exact && s.Amount.Minor == i.Amount.Minor && s.Currency == i.Amount.Currency &&
		s.MerchantID == i.MerchantID && s.CreditorName == i.CreditorName &&
		s.CreditorIBAN == iban(i.CreditorAccount) && s.DebtorIBAN == iban(i.DebtorAccount) &&
		s.RemittanceInformation == i.RemittanceInformation
}

// Similar reports whether s could be what an upstream made of i, read
// loosely: not similar only when its currency differs, or its amount
// differs by a minor unit or more. Whatever an upstream does to a body
// (drops a member, rounds an amount it reads as a double, changes a
// currency's case), the payment it made of i is similar to i.
func (i *Info) Similar(s *Seen) bool {
	if s == nil {
		return true
	}
	if s.Currency != "" && !strings.EqualFold(strings.TrimSpace(s.Currency), i.Amount.Currency) {
		return false
	}
	return s.Amount.Text == "" || s.Amount.Near(i.Amount)
}

func iban(a *Account) string {
	if a == nil {
		return ""
	}
	return a.IBAN
}
