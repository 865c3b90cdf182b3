package payments

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/money"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// A change of where money goes is held like a payment: with step-up on,
// creating, changing or deleting a merchant (POST /v2/merchants, PUT or
// DELETE /v2/merchants/{id}) needs the user's approval, bound to the
// change itself, before it is sent. Otherwise a stolen session could
// re-point a merchant's account with an unheld request, before or after the
// user approves a payment to that merchant, and the money would go to the
// thief's account.

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

// changesPayee reports whether a call to path with method changes where
// money goes and is held: with step-up on, a POST, PUT or DELETE under the
// merchants.
func (s *Service) changesPayee(path, method string) bool {
	if s.stepUp == nil {
		return false
	}
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodDelete:
	default:
		return false
	}
	return path == merchantsPath || strings.HasPrefix(path, merchantsPath+"/")
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

// readMerchant decodes a merchant body strictly (the model's members only,
// each a string, name required) and returns its canonical encoding.
func readMerchant(body []byte) (merchantBody, []byte, *problem.Problem) {
	refused := func(field, msg string) *problem.Problem {
		p := problem.New(problem.CodeValidationError, field+" "+msg+"; nothing was sent")
		p.Fields = []problem.Field{{Field: field, Message: field + " " + msg}}
		return p
	}
	var m map[string]json.RawMessage
	if !utf8.Valid(body) || json.Unmarshal(body, &m) != nil || m == nil {
		return merchantBody{}, nil, refused("body", "must be a JSON object")
	}
	var out merchantBody
	for k, raw := range m {
		var to *string
		switch k {
		case "name":
			to = &out.Name
		case "iban":
			to = &out.IBAN
		case "website":
			to = &out.Website
		default:
			return merchantBody{}, nil, refused(k, "is not a member the API documents for a merchant (allowed: name, iban, website); the BFF sends only what it can read, so remove it")
		}
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			continue
		}
		if json.Unmarshal(raw, to) != nil {
			return merchantBody{}, nil, refused(k, "must be a string")
		}
		if !money.Printable(*to) {
			return merchantBody{}, nil, refused(k, "must not hold control or invisible formatting characters")
		}
	}
	if out.Name == "" {
		return merchantBody{}, nil, refused("name", "is required")
	}
	enc, _ := json.Marshal(out)
	return out, enc, nil
}

// changePayee holds a change of a merchant for the user's approval: read
// once, claimed under its Idempotency-Key with what it will send, and
// answered 401 STEP_UP_REQUIRED; a repeat of the key gets what became of
// it, as a payment's does.
func (s *Service) changePayee(w http.ResponseWriter, r *http.Request, c proxy.Call, t proxy.Target) (labels, *problem.Problem) {
	body, p := s.up.Body(r)
	if p != nil {
		return labels{}, p
	}
	key, p := idempotencyKey(r.Header)
	if p != nil {
		s.observe.MoneyRequest(MoneyKeyRequired)
		p.Detail = "a change of a merchant (where money goes) is approved by the user before it is sent: " + p.Detail
		return labels{}, p
	}
	action, _, ok := payeeTarget(t.Path, r.Method)
	if !ok {
		s.observe.MoneyRequest(MoneyRouteRefused)
		return labels{}, problem.New(problem.CodeRouteNotFound, "the upstream defines no change of a merchant at this path; nothing was sent")
	}
	if p := readable(r.Header, body); p != nil {
		s.observe.MoneyRequest(MoneyBodyRefused)
		return labels{}, p
	}
	if p := noQuery(r.URL); p != nil {
		s.observe.MoneyRequest(MoneyBodyRefused)
		return labels{}, p
	}
	path := strings.TrimSuffix(t.Path, "/")
	var send []byte
	if action == "delete" {
		if len(bytes.TrimSpace(body)) > 0 {
			p := problem.New(problem.CodeValidationError, "a merchant's deletion has no body; nothing was sent")
			p.Fields = []problem.Field{{Field: "body", Message: "must be empty"}}
			return labels{}, p
		}
	} else {
		if p := checkMediaType(r.Header); p != nil {
			s.observe.MoneyRequest(MoneyBodyRefused)
			return labels{}, p
		}
		if _, send, p = readMerchant(body); p != nil {
			s.observe.MoneyRequest(MoneyBodyRefused)
			return labels{}, p
		}
	}
	req := ledger.Request{
		UserID: c.UserID, Route: merchantsPath, Key: key, Fingerprint: fingerprint(r.Method, path, r.URL.RawQuery, send),
		SessionRef: c.SessionRef, ClientIP: c.ClientIP, RequestID: c.RequestID,
	}
	req.Held, _ = json.Marshal(heldRequest{Method: r.Method, Path: path, Route: t.Route, Query: r.URL.RawQuery, Body: send})
	bg := context.WithoutCancel(r.Context())
	ctx, cancel := context.WithTimeout(bg, s.timeout)
	defer cancel()
	header := r.Header.Clone()
	header.Set("Content-Type", "application/json")
	m := &moneyCall{call: c, target: proxy.Target{Path: path, Route: t.Route}, rawQuery: r.URL.RawQuery, header: header,
		req: req, body: send, method: r.Method, rawFingerprint: fingerprint(r.Method, t.Path, r.URL.RawQuery, body)}
	return s.hold(ctx, bg, w, m)
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

// heldDetails is the authorization_details of a held record: its payment
// (with the payee it goes to) or its change of a merchant. requestID names
// the look-up of a merchant, when one is needed.
func (s *Service) heldDetails(ctx context.Context, rec *ledger.Record, requestID string) (json.RawMessage, *problem.Problem) {
	var held heldRequest
	if json.Unmarshal(rec.Held, &held) != nil {
		return nil, s.ledgerFailed(proxy.Call{}, ledger.ErrUnreadable)
	}
	if held.isPayeeChange() {
		d, ok := payeeChangeOf(held)
		if !ok {
			return nil, s.ledgerFailed(proxy.Call{}, ledger.ErrUnreadable)
		}
		b, _ := json.Marshal([]payeeChange{d})
		return b, nil
	}
	c, ok := ParseContent(rec.Content)
	if !ok {
		// Held by an earlier version in a form this model does not read:
		// it cannot be shown, so it cannot be approved (its hold expires).
		return nil, problem.New(problem.CodeNotFound, "this payment cannot be shown for an approval (it was held by an earlier version); it will not be sent: pay again with a new Idempotency-Key")
	}
	pe, p := s.payeeOf(ctx, rec.UserID, requestID, c)
	if p != nil {
		return nil, p
	}
	b, _ := json.Marshal([]paymentInitiation{withPayee(paymentDetail(c), pe)})
	return b, nil
}
