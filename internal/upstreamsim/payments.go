package upstreamsim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Remittance-text triggers: a payment whose
// paymentInformation.remittanceInformation contains one of these words (in
// capitals) gets that status at creation. The reply is still 2xx: RJCT,
// CANC and ERROR are payment outcomes, not HTTP errors.
var outcomeTriggers = []string{statusRJCT, statusCANC, statusERROR}

func outcomeFor(remittance string) string {
	for _, t := range outcomeTriggers {
		if strings.Contains(remittance, t) {
			return t
		}
	}
	return statusInit
}

// viewPayment settles a payment of the caller's and copies it for encoding,
// with its payUrl: the consent page on this simulator, and the reply
// profile it is encoded in (see payment.MarshalJSON).
func (s *Server) viewPayment(r *http.Request, c *call) func(*payment) payment {
	profile := s.knobs.Load().replyProfile
	return func(p *payment) payment {
		s.settle(p, c.now)
		v := *p
		v.ProviderIDs = slices.Clone(p.ProviderIDs)
		v.PayURL = s.payURL(r, c.userID(), p)
		v.profile = profile
		return v
	}
}

// MarshalJSON encodes a payment in its reply profile: every field
// (ProfileFull, or a payment not made for a reply), or only the documented
// ones (ProfileDocumented, see documentedPayment).
func (p payment) MarshalJSON() ([]byte, error) {
	if p.profile != ProfileDocumented {
		type full payment // without the method: no recursion
		return json.Marshal(full(p))
	}
	return json.Marshal(documentedPayment{
		ID: p.ID, Status: p.Status, PaymentInformation: normalInfo(p.PaymentInformation),
		ProviderIDs: p.ProviderIDs, ProviderID: p.ProviderID, RedirectURL: p.RedirectURL,
		PayURL: p.PayURL, CreatedAt: p.CreatedAt,
	})
}

// documentedPayment is a payment in ProfileDocumented: the fields the
// upstream documents for a payment, so no updatedAt (it documents one for
// connections only). A client built against it cannot come to rely on a
// field the real upstream does not promise.
type documentedPayment struct {
	ID                 string         `json:"id"`
	Status             string         `json:"status"`
	PaymentInformation documentedInfo `json:"paymentInformation"`
	ProviderIDs        []string       `json:"providerIds"`
	ProviderID         string         `json:"providerId,omitempty"`
	RedirectURL        string         `json:"redirectUrl,omitempty"`
	PayURL             string         `json:"payUrl"`
	CreatedAt          time.Time      `json:"createdAt"`
}

// documentedInfo is a paymentInformation normalised as ProfileDocumented
// promises: only the members the simulator models, none an empty string
// or null, the amount a JSON number. Its members are paymentInfo's, in
// the same order.
type documentedInfo struct {
	Amount                float64     `json:"amount"` // positive: creation refuses anything else
	Currency              string      `json:"currency,omitempty"`
	RemittanceInformation string      `json:"remittanceInformation,omitempty"`
	MerchantID            string      `json:"merchantId,omitempty"`
	CreditorName          string      `json:"creditorName,omitempty"`
	CreditorAccount       *accountRef `json:"creditorAccount,omitempty"`
	DebtorAccount         *accountRef `json:"debtorAccount,omitempty"`
}

// normalInfo is pi as documentedInfo. A member the simulator does not
// model was never kept (paymentInfo has no place for it); an account
// without an IBAN is dropped. The full profile encodes every payment the
// simulator can hold the same way today (paymentInfo's omitempty drops
// empty strings and absent accounts, and creation refuses an empty IBAN
// or currency); this keeps the documented profile's promise should that
// change.
func normalInfo(pi paymentInfo) documentedInfo {
	account := func(a *accountRef) *accountRef {
		if a == nil || a.IBAN == "" {
			return nil
		}
		return &accountRef{IBAN: a.IBAN}
	}
	return documentedInfo{
		Amount: pi.Amount, Currency: pi.Currency, RemittanceInformation: pi.RemittanceInformation,
		MerchantID: pi.MerchantID, CreditorName: pi.CreditorName,
		CreditorAccount: account(pi.CreditorAccount), DebtorAccount: account(pi.DebtorAccount),
	}
}

// listPayments is GET /v2/payments: cursor paging, newest first by
// default, optional status filter. With a list lag, a payment made less
// than the lag ago (simClock.steady: real time, which a step of the
// simulator's clock does not move, unless that clock is frozen) is left
// out, of the count too; GET /v2/payments/{id} finds it all the same.
func (s *Server) listPayments(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	q := r.URL.Query()
	pq, e := parsePage(q, -1)
	if e != nil {
		return e
	}
	lag, steady := s.knobs.Load().listLag, s.clock.steady()
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	items := u.payments
	if st := q.Get("status"); st != "" || lag > 0 {
		items = nil
		for _, p := range u.payments {
			if lag > 0 && !p.steadyAt.IsZero() && steady.Before(p.steadyAt.Add(lag)) {
				continue
			}
			if s.settle(p, c.now); st == "" || p.Status == st {
				items = append(items, p)
			}
		}
	}
	out := paginate(items, paymentKey, s.viewPayment(r, c), pq)
	u.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return nil
}

// lookupPayment applies the payment id rules: a malformed id is 400
// CLIENT_ERROR, an unknown one 404 CLIENT_ERROR. The caller holds u.mu.
func lookupPayment(u *userData, id string) (*payment, *apiError) {
	if !validULID(id) {
		return nil, newError(http.StatusBadRequest, typeClientError, "Payment id %q is not valid", id)
	}
	p, _, ok := find(u.payments, id, paymentKey)
	if !ok {
		return nil, notFound("Payment %s was not found", id)
	}
	return p, nil
}

func (s *Server) getPayment(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	p, e := lookupPayment(u, r.PathValue("paymentId"))
	var v payment
	if e == nil {
		v = s.viewPayment(r, c)(p)
	}
	u.mu.Unlock()
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// cancelPayment is DELETE /v2/payments/{id}: the payment becomes CANC. A
// payment already settled, rejected or failed cannot be cancelled (400).
func (s *Server) cancelPayment(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	defer u.mu.Unlock()
	p, e := lookupPayment(u, r.PathValue("paymentId"))
	if e != nil {
		return e
	}
	defer s.paymentChanged(p, p.Status) // before u.mu.Unlock: deferred later, runs first
	p.settle(c.now)
	switch p.Status {
	case statusCANC:
	case statusACSC, statusRJCT, statusERROR:
		return newError(http.StatusBadRequest, typeClientError, "Payment %s in status %s cannot be cancelled", p.ID, p.Status)
	default:
		p.Status, p.UpdatedAt = statusCANC, c.now
	}
	writeJSON(w, http.StatusOK, s.viewPayment(r, c)(p))
	return nil
}

// paymentRequest is a validated payment creation.
type paymentRequest struct {
	info                 paymentInfo
	providerIDs          []string
	redirectURL          string
	includeFakeProviders bool
	origin               string // the X-Request-Id of the request, for PaymentOrigins
}

// parsePaymentInformation validates the paymentInformation object into ck.
func parsePaymentInformation(ck *checker, pi map[string]any) paymentInfo {
	var info paymentInfo
	amountOK := false
	switch v := pi["amount"].(type) {
	case nil:
		ck.add(isRequired("paymentInformation.amount"))
	case float64:
		info.Amount, amountOK = v, true
	case string:
		f, err := strconv.ParseFloat(v, 64)
		info.Amount, amountOK = f, err == nil
		if !amountOK {
			ck.add(`"paymentInformation.amount" must be a number`)
		}
	default:
		ck.add(`"paymentInformation.amount" must be a number`)
	}
	if amountOK && info.Amount <= 0 {
		ck.add(`"paymentInformation.amount" must be a positive number`)
	}
	info.Currency = ck.str(pi, "currency", "paymentInformation.currency", true)
	if info.Currency != "" && len(info.Currency) != 3 {
		ck.add(`"paymentInformation.currency" length must be 3 characters long`)
	}
	info.RemittanceInformation = ck.str(pi, "remittanceInformation", "paymentInformation.remittanceInformation", false)
	info.MerchantID = ck.str(pi, "merchantId", "paymentInformation.merchantId", false)
	info.CreditorName = ck.str(pi, "creditorName", "paymentInformation.creditorName", false)
	if ca := ck.obj(pi, "creditorAccount", "paymentInformation.creditorAccount", false); ca != nil {
		info.CreditorAccount = &accountRef{IBAN: ck.str(ca, "iban", "paymentInformation.creditorAccount.iban", true)}
	}
	if da := ck.obj(pi, "debtorAccount", "paymentInformation.debtorAccount", false); da != nil {
		info.DebtorAccount = &accountRef{IBAN: ck.str(da, "iban", "paymentInformation.debtorAccount.iban", true)}
	}
	return info
}

// parsePaymentRequest validates a POST /v2/payments body: see
// parsePaymentFields.
func parsePaymentRequest(r *http.Request, body []byte) (paymentRequest, *apiError) {
	m, e := jsonObject(r, body)
	if e != nil {
		return paymentRequest{}, e
	}
	return parsePaymentFields(m)
}

// parsePaymentFields validates the fields of a payment creation, read from
// a JSON object: field problems (paymentInformation missing or malformed)
// are a 400 VALIDATION_ERROR with a stringified list; so is a payment with
// neither merchantId nor creditorAccount. POST /v2/payments and the direct
// payment of the control API (CreateDirectPayment) share it.
func parsePaymentFields(m map[string]any) (paymentRequest, *apiError) {
	var ck checker
	var req paymentRequest
	pi := ck.obj(m, "paymentInformation", "paymentInformation", true)
	if pi != nil {
		req.info = parsePaymentInformation(&ck, pi)
	}
	req.providerIDs = ck.strList(m, "providerIds", "providerIds", false)
	if id := ck.str(m, "providerId", "providerId", false); id != "" && !slices.Contains(req.providerIDs, id) {
		req.providerIDs = append(req.providerIDs, id)
	}
	req.redirectURL = ck.str(m, "redirectUrl", "redirectUrl", false)
	req.includeFakeProviders = ck.boolean(m, "includeFakeProviders", "includeFakeProviders")
	if len(ck.problems) > 0 {
		return req, problemList(typeValidationError, ck.problems...)
	}
	if req.info.MerchantID == "" && req.info.CreditorAccount == nil {
		return req, problemList(typeValidationError,
			`"paymentInformation" must contain at least one of [merchantId, creditorAccount]`)
	}
	return req, nil
}

// redirectAllowed reports whether raw is on the allow-list. Query and
// fragment are ignored: scheme, host and path must match an entry.
func redirectAllowed(raw string, allowed []string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return false
	}
	u.RawQuery, u.Fragment, u.RawFragment, u.ForceQuery = "", "", "", false
	return slices.Contains(allowed, u.String())
}

func normIBAN(s string) string { return strings.ToUpper(strings.ReplaceAll(s, " ", "")) }

// checkPayment applies the business rules, in this order: redirect url
// allowed (400 CLIENT_ERROR); providers known (400 CLIENT_ERROR); sandbox
// gate (400 CLIENT_ERROR); merchant exists (404 CLIENT_ERROR); creditor and
// debtor differ (400 CLIENT_ERROR); providers up (400
// PROVIDER_UNAVAILABLE) and not failing (500 PROVIDER_ERROR). The caller
// holds u.mu.
func (s *Server) checkPayment(u *userData, req paymentRequest) *apiError {
	if req.redirectURL != "" && !redirectAllowed(req.redirectURL, s.knobs.Load().allowedRedirectURLs) {
		return newError(http.StatusBadRequest, typeClientError, "Redirect url %s is not allowed for this organization", req.redirectURL)
	}
	if e := checkProvidersKnown(req.providerIDs); e != nil {
		return e
	}
	sandboxIncluded := slices.ContainsFunc(req.providerIDs, isSandboxProvider) ||
		(len(req.providerIDs) == 0 && req.includeFakeProviders)
	if !s.org.hasProductionAccess() && !sandboxIncluded {
		return newError(http.StatusBadRequest, typeClientError, msgSandboxGate)
	}
	creditor := ""
	if req.info.MerchantID != "" {
		mer, _, ok := find(u.merchants, req.info.MerchantID, merchantKey)
		if !ok {
			return notFound("Merchant %s was not found", req.info.MerchantID)
		}
		creditor = mer.IBAN
	}
	if req.info.CreditorAccount != nil {
		creditor = req.info.CreditorAccount.IBAN
	}
	if req.info.DebtorAccount != nil && creditor != "" && normIBAN(creditor) == normIBAN(req.info.DebtorAccount.IBAN) {
		return newError(http.StatusBadRequest, typeClientError, "Creditor and debtor accounts must be different")
	}
	return checkProvidersUp(req.providerIDs)
}

// makePayment applies the business rules (checkPayment) to req for userID
// and stores the payment, made at now (exact: see addPayment).
func (s *Server) makePayment(userID string, req paymentRequest, now time.Time) (*payment, *apiError) {
	u := s.users.get(userID, now)
	u.mu.Lock()
	defer u.mu.Unlock()
	if e := s.checkPayment(u, req); e != nil {
		return nil, e
	}
	p := addPayment(u, req, now)
	p.steadyAt = s.clock.steady()
	s.paymentChanged(p, "")
	return p, nil
}

// addPayment stores a new payment made at now, the simulator's exact time
// (call.at): its createdAt is now in whole seconds, and the list lag
// counts from now itself. The caller holds u.mu.
func addPayment(u *userData, req paymentRequest, now time.Time) *payment {
	at := now
	now = now.Truncate(time.Second) // as replies show it, and as the id has always been drawn
	p := &payment{
		ID: u.newID(now), Status: outcomeFor(req.info.RemittanceInformation), PaymentInformation: req.info,
		ProviderIDs: req.providerIDs, RedirectURL: req.redirectURL, CreatedAt: now, UpdatedAt: now,
		includeFake: req.includeFakeProviders, origin: req.origin, madeAt: at,
	}
	if p.ProviderIDs == nil {
		p.ProviderIDs = []string{}
	}
	u.payments = insert(u.payments, p, paymentKey)
	return p
}

// createPayment is POST /v2/payments: 201 {id, payUrl}. payUrl is the
// payment's consent page on this simulator (see consent.go).
func (s *Server) createPayment(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	req, e := parsePaymentRequest(r, c.body)
	if e != nil {
		return e
	}
	req.origin = r.Header.Get("X-Request-Id")
	p, e := s.makePayment(c.userID(), req, c.at)
	if e != nil {
		return e
	}
	writeJSON(w, http.StatusCreated, struct {
		ID     string `json:"id"`
		PayURL string `json:"payUrl"`
	}{p.ID, s.consentURL(r, consentPayments, c.userID(), p.ID)})
	return nil
}

// openBankingInit is POST /v2/pay/open-banking-init: start a payment at
// one provider, for an existing payment (paymentId) or a new one
// (paymentInformation); its authorizationUrl is the payment's consent page,
// which shows the chosen provider. Rules, in order: body validation (400
// VALIDATION_ERROR); payment id malformed (400) or unknown (404); provider
// unknown (400 CLIENT_ERROR); provider not allowed for this payment (404
// CLIENT_ERROR: not among the payment's providerIds, or a sandbox provider
// without includeFakeProviders on a payment that names no providers);
// sandbox gate (400); provider down (400 PROVIDER_UNAVAILABLE) or failing
// (500). The reply is 200 with the payment's status, RJCT/CANC/ERROR
// included.
func (s *Server) openBankingInit(w http.ResponseWriter, r *http.Request, c *call) *apiError {
	m, e := jsonObject(r, c.body)
	if e != nil {
		return e
	}
	var ck checker
	providerID := ck.str(m, "providerId", "providerId", true)
	paymentID := ck.str(m, "paymentId", "paymentId", false)
	service := ck.str(m, "paymentService", "paymentService", false)
	include := ck.boolean(m, "includeFakeProviders", "includeFakeProviders")
	redirect := ck.str(m, "redirectUrl", "redirectUrl", false)
	pi := ck.obj(m, "paymentInformation", "paymentInformation", false)
	var info paymentInfo
	if pi != nil {
		info = parsePaymentInformation(&ck, pi)
	}
	if len(ck.problems) > 0 {
		return problemList(typeValidationError, ck.problems...)
	}
	if paymentID == "" && pi == nil {
		return problemList(typeValidationError, `"value" must contain at least one of [paymentId, paymentInformation]`)
	}
	if pi != nil && info.MerchantID == "" && info.CreditorAccount == nil {
		return problemList(typeValidationError, `"paymentInformation" must contain at least one of [merchantId, creditorAccount]`)
	}
	if service == "" {
		service = "SEPA_CREDIT_TRANSFER"
	}

	u := s.users.get(c.userID(), c.now)
	u.mu.Lock()
	defer u.mu.Unlock()
	var p *payment
	before := "" // a new payment's creation is a change too
	if paymentID != "" {
		if p, e = lookupPayment(u, paymentID); e != nil {
			return e
		}
		before = p.Status
	}
	if e := checkProvidersKnown([]string{providerID}); e != nil {
		return e
	}
	if p != nil {
		allowed := slices.Contains(p.ProviderIDs, providerID) ||
			(len(p.ProviderIDs) == 0 && (!isSandboxProvider(providerID) || include || p.includeFake))
		if !allowed {
			return notFound("Provider %s is not allowed for this payment", providerID)
		}
	}
	if !s.org.hasProductionAccess() && !isSandboxProvider(providerID) {
		return newError(http.StatusBadRequest, typeClientError, msgSandboxGate)
	}
	if p == nil {
		req := paymentRequest{info: info, providerIDs: []string{providerID}, redirectURL: redirect, includeFakeProviders: include}
		if e := s.checkPayment(u, req); e != nil {
			return e
		}
	} else if e := checkProvidersUp([]string{providerID}); e != nil {
		return e
	}
	if p == nil {
		p = addPayment(u, paymentRequest{info: info, providerIDs: []string{providerID}, redirectURL: redirect, includeFakeProviders: include,
			origin: r.Header.Get("X-Request-Id")}, c.at)
		p.steadyAt = s.clock.steady()
	}
	p.settle(c.now)
	if p.Status == statusInit {
		p.Status, p.initiatedAt = statusPending, c.now
		s.wakeSettler() // its settlement is due in settleAfter
	}
	p.ProviderID, p.UpdatedAt = providerID, c.now
	s.paymentChanged(p, before)
	writeJSON(w, http.StatusOK, struct {
		PaymentID        string `json:"paymentId"`
		ProviderID       string `json:"providerId"`
		PaymentService   string `json:"paymentService"`
		Status           string `json:"status"`
		AuthorizationURL string `json:"authorizationUrl"`
	}{p.ID, providerID, service, p.Status, s.consentURL(r, consentPayments, c.userID(), p.ID)})
	return nil
}

// PaymentOrigins maps each of userID's payments to the X-Request-Id of the
// API request that made it ("" for a payment made through another
// channel): the ground truth a history checker holds a BFF's answers to.
func (s *Server) PaymentOrigins(userID string) map[string]string {
	u := s.users.get(userID, s.clock.now())
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string]string, len(u.payments))
	for _, p := range u.payments {
		out[p.ID] = p.origin
	}
	return out
}
