package money

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is which money endpoint a body is for.
type Kind int

const (
	// Creation is POST /v2/payments: it always creates a payment.
	Creation Kind = iota
	// Init is POST /v2/pay/open-banking-init: it starts an existing
	// payment (PaymentID) or creates one (Info).
	Init
)

// Account is a bank account, by its IBAN.
type Account struct {
	IBAN string
}

// Info is a payment's content (the upstream's paymentInformation): what
// moves, and where to.
type Info struct {
	Amount Amount
	// MerchantID names a merchant the upstream knows (its account is the
	// merchant's); CreditorAccount names the account itself. At least one
	// is the upstream's rule, and the upstream checks it.
	MerchantID            string
	CreditorName          string
	CreditorAccount       *Account
	DebtorAccount         *Account
	RemittanceInformation string
}

// Body is a money-moving request's body as the BFF read it. An optional
// member that was absent, null or the empty string is the zero value here:
// one canonical absence.
type Body struct {
	Kind Kind
	// Info is the payment to create; nil for an init of an existing
	// payment.
	Info *Info
	// PaymentID is the existing payment an init starts (Init only).
	PaymentID            string
	ProviderID           string
	ProviderIDs          []string
	PaymentService       string
	RedirectURL          string
	IncludeFakeProviders *bool
}

// Creates reports whether the body asks the upstream to create a payment.
func (b Body) Creates() bool { return b.Info != nil }

// FieldError is a refused body: the member at fault (a dotted path, "" for
// the body itself) and why, in words a developer can act on.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + " " + e.Message
}

func refuse(field, msg string) *FieldError { return &FieldError{Field: field, Message: msg} }

// members are the documented members of each body, and of its
// paymentInformation.
var (
	members = map[Kind][]string{
		Creation: {"paymentInformation", "providerIds", "providerId", "redirectUrl", "includeFakeProviders"},
		Init:     {"paymentId", "paymentInformation", "providerId", "paymentService", "redirectUrl", "includeFakeProviders"},
	}
	infoMembers = []string{"amount", "currency", "merchantId", "creditorName", "creditorAccount", "debtorAccount", "remittanceInformation"}
)

// Decode reads a money body for kind, strictly: a UTF-8 JSON object whose
// members are exactly the documented ones (any other member is refused,
// naming it), each of its type, with the amount exact (ParseAmount). It
// does not look for duplicate or case-variant keys: the caller refuses
// those first, on the bytes.
func Decode(kind Kind, raw []byte) (Body, *FieldError) {
	var b Body
	b.Kind = kind
	if !utf8.Valid(raw) {
		return b, refuse("", "the body is not UTF-8 text")
	}
	top, e := object(raw, "")
	if e != nil {
		return b, e
	}
	if e := onlyKnown(top, "", members[kind]); e != nil {
		return b, e
	}
	var fe *FieldError
	str := func(m map[string]json.RawMessage, name, path string) string {
		if fe != nil {
			return ""
		}
		var s string
		s, fe = optionalString(m, name, path)
		return s
	}
	b.PaymentID = str(top, "paymentId", "paymentId")
	b.ProviderID = str(top, "providerId", "providerId")
	b.PaymentService = str(top, "paymentService", "paymentService")
	b.RedirectURL = str(top, "redirectUrl", "redirectUrl")
	if fe != nil {
		return b, fe
	}
	if b.ProviderIDs, fe = stringList(top, "providerIds"); fe != nil {
		return b, fe
	}
	if b.IncludeFakeProviders, fe = optionalBool(top, "includeFakeProviders"); fe != nil {
		return b, fe
	}
	info, present, fe := optionalObject(top, "paymentInformation", "paymentInformation")
	if fe != nil {
		return b, fe
	}
	switch {
	case kind == Creation && !present:
		return b, refuse("paymentInformation", "is required")
	case kind == Init && present && b.PaymentID != "":
		return b, refuse("paymentId", "and paymentInformation cannot both be sent: send paymentId to start an existing payment, or paymentInformation to create one")
	case kind == Init && !present && b.PaymentID == "":
		return b, refuse("paymentInformation", "is required when no paymentId is sent")
	}
	if present {
		if b.Info, fe = decodeInfo(info); fe != nil {
			return b, fe
		}
	}
	return b, nil
}

func decodeInfo(m map[string]json.RawMessage) (*Info, *FieldError) {
	const at = "paymentInformation."
	if e := onlyKnown(m, at, infoMembers); e != nil {
		return nil, e
	}
	var info Info
	var fe *FieldError
	str := func(name string) string {
		if fe != nil {
			return ""
		}
		var s string
		s, fe = optionalString(m, name, at+name)
		return s
	}
	currency := str("currency")
	info.MerchantID = str("merchantId")
	info.CreditorName = str("creditorName")
	info.RemittanceInformation = str("remittanceInformation")
	if fe != nil {
		return nil, fe
	}
	if currency == "" {
		return nil, refuse(at+"currency", "is required")
	}
	if _, ok := MinorDigits(currency); !ok {
		return nil, refuse(at+"currency", "must be an ISO 4217 currency code in capitals, such as EUR")
	}
	raw, ok := m["amount"]
	if !ok || isNull(raw) {
		return nil, refuse(at+"amount", "is required")
	}
	text, isText := amountText(raw)
	if !isText {
		return nil, refuse(at+"amount", "must be a decimal number or a string holding one, such as 10.50")
	}
	a, err := ParseAmount(text, currency)
	if err != nil {
		return nil, refuse(at+"amount", err.Error())
	}
	info.Amount = a
	for _, acc := range []struct {
		name string
		to   **Account
	}{{"creditorAccount", &info.CreditorAccount}, {"debtorAccount", &info.DebtorAccount}} {
		obj, present, e := optionalObject(m, acc.name, at+acc.name)
		if e != nil {
			return nil, e
		}
		if !present {
			continue
		}
		if e := onlyKnown(obj, at+acc.name+".", []string{"iban"}); e != nil {
			return nil, e
		}
		iban, e := optionalString(obj, "iban", at+acc.name+".iban")
		if e != nil {
			return nil, e
		}
		if iban == "" {
			return nil, refuse(at+acc.name+".iban", "is required")
		}
		*acc.to = &Account{IBAN: iban}
	}
	if info.MerchantID != "" && info.CreditorAccount != nil {
		return nil, refuse(at+"merchantId", "and creditorAccount cannot both be sent: a payment goes to a merchant (its account) or to an account, and the approval shows the one it goes to")
	}
	return &info, nil
}

// amountText is the decimal text of a JSON number, or of a string.
func amountText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return "", false
	}
	return n.String(), true // an exponent is refused by ParseAmount's grammar, with its reason
}

func object(raw []byte, path string) (map[string]json.RawMessage, *FieldError) {
	var m map[string]json.RawMessage
	if len(bytes.TrimSpace(raw)) == 0 || bytes.TrimSpace(raw)[0] != '{' || json.Unmarshal(raw, &m) != nil {
		if path == "" {
			return nil, refuse("", "the body must be a JSON object")
		}
		return nil, refuse(path, "must be an object")
	}
	return m, nil
}

func onlyKnown(m map[string]json.RawMessage, at string, known []string) *FieldError {
	var unknown []string
	for k := range m {
		if !contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	first := unknown[0]
	for _, k := range unknown {
		first = min(first, k)
	}
	return refuse(at+first, "is not a member the API documents here (allowed: "+strings.Join(known, ", ")+"); the BFF sends only what it can read, so remove it")
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

func optionalString(m map[string]json.RawMessage, name, path string) (string, *FieldError) {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return "", nil
	}
	var s string
	if bytes.TrimSpace(raw)[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", refuse(path, "must be a string")
	}
	if !Printable(s) {
		return "", refuse(path, "must not hold control or invisible formatting characters (they could make an approval screen show other text than is sent)")
	}
	return s, nil
}

// Printable reports whether s holds no control character (Unicode Cc) and
// no invisible formatting character (Cf: bidirectional overrides,
// zero-width joiners), which could make what the user is shown differ from
// what is sent.
func Printable(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

func optionalBool(m map[string]json.RawMessage, name string) (*bool, *FieldError) {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var v bool
	if json.Unmarshal(raw, &v) != nil {
		return nil, refuse(name, "must be true or false")
	}
	return &v, nil
}

func stringList(m map[string]json.RawMessage, name string) ([]string, *FieldError) {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return nil, nil
	}
	var list []*string
	if bytes.TrimSpace(raw)[0] != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, refuse(name, "must be a list of strings")
	}
	var out []string
	for _, s := range list {
		if s == nil || *s == "" {
			return nil, refuse(name, "must not hold null or an empty string")
		}
		out = append(out, *s)
	}
	return out, nil
}

func optionalObject(m map[string]json.RawMessage, name, path string) (map[string]json.RawMessage, bool, *FieldError) {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return nil, false, nil
	}
	obj, e := object(raw, path)
	return obj, e == nil, e
}

// Encode is the body as the BFF sends it: its members in one fixed order,
// absent ones left out, the amount as a JSON number with exactly its
// currency's minor-unit digits. The same Body always encodes to the same
// bytes.
func (b Body) Encode() []byte {
	var w jsonWriter
	w.open()
	w.str("paymentId", b.PaymentID)
	if b.Info != nil {
		w.key("paymentInformation")
		b.Info.encode(&w)
	}
	w.str("providerId", b.ProviderID)
	if len(b.ProviderIDs) > 0 {
		w.key("providerIds")
		enc, _ := json.Marshal(b.ProviderIDs)
		w.raw(enc)
	}
	w.str("paymentService", b.PaymentService)
	w.str("redirectUrl", b.RedirectURL)
	if b.IncludeFakeProviders != nil {
		w.key("includeFakeProviders")
		if *b.IncludeFakeProviders {
			w.raw([]byte("true"))
		} else {
			w.raw([]byte("false"))
		}
	}
	w.close()
	return w.buf.Bytes()
}

// EncodeInfo is the content alone, in Encode's form.
func (i *Info) EncodeInfo() []byte {
	var w jsonWriter
	i.encode(&w)
	return w.buf.Bytes()
}

func (i *Info) encode(w *jsonWriter) {
	w.open()
	w.key("amount")
	w.raw([]byte(i.Amount.String()))
	w.str("currency", i.Amount.Currency)
	w.str("merchantId", i.MerchantID)
	w.str("creditorName", i.CreditorName)
	for _, acc := range []struct {
		name string
		a    *Account
	}{{"creditorAccount", i.CreditorAccount}, {"debtorAccount", i.DebtorAccount}} {
		if acc.a != nil {
			w.key(acc.name)
			w.open()
			w.str("iban", acc.a.IBAN)
			w.close()
		}
	}
	w.str("remittanceInformation", i.RemittanceInformation)
	w.close()
}

// jsonWriter writes an object's members in the order they are given.
type jsonWriter struct {
	buf   bytes.Buffer
	first []bool
}

func (w *jsonWriter) open() {
	w.buf.WriteByte('{')
	w.first = append(w.first, true)
}

func (w *jsonWriter) close() {
	w.buf.WriteByte('}')
	w.first = w.first[:len(w.first)-1]
}

func (w *jsonWriter) key(k string) {
	if !w.first[len(w.first)-1] {
		w.buf.WriteByte(',')
	}
	w.first[len(w.first)-1] = false
	enc, _ := json.Marshal(k)
	w.buf.Write(enc)
	w.buf.WriteByte(':')
}

// str writes a string member, leaving it out when empty (the canonical
// absence).
func (w *jsonWriter) str(k, v string) {
	if v == "" {
		return
	}
	w.key(k)
	enc, _ := json.Marshal(v)
	w.buf.Write(enc)
}

func (w *jsonWriter) raw(b []byte) { w.buf.Write(b) }
