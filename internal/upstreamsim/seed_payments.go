package upstreamsim

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// MaxSeedPayments bounds one SeedPayments call: twenty pages at the
// largest page size, and still quick (a few milliseconds).
const MaxSeedPayments = 10000

// seedPaymentSpacing is the time between two seeded payments' createdAt:
// the clock reads whole seconds, so each gets its own, and sorting by
// createdAt sorts as the ids do.
const seedPaymentSpacing = time.Second

// seedPaymentsAge is how old the newest seeded payment is: older than any
// list lag a test would set, so seeded payments are listed at once.
const seedPaymentsAge = time.Minute

// defaultSeedTemplate is the payment SeedPayments makes without a
// template: one that passes every rule with the sandbox gate on.
var defaultSeedTemplate = []byte(`{"paymentInformation":{"amount":10,"currency":"EUR",` +
	`"remittanceInformation":"Seeded payment","creditorName":"Seed Creditor",` +
	`"creditorAccount":{"iban":"FR7630006000011234567890189"}},"providerIds":["` + ProviderSandbox + `"]}`)

// SeedPayments gives userID n more payments at once (1 to
// MaxSeedPayments), so that a test can have a user whose payments span
// many pages without making them one request at a time. template is a
// POST /v2/payments body, checked once as CreateDirectPayment checks one;
// nil or empty is a default payment of 10 EUR to the sandbox provider. A
// refusal, of the template or of an empty userID or an n out of range
// (400 CLIENT_ERROR), is a *PaymentError, and adds no payment. Every payment is the template's, with its
// own id and the status its remittance trigger gives (INIT without one).
//
// They are history, not new payments: made before the simulator's now,
// the newest a minute before it and each earlier one a second before the
// next, so they sort by createdAt as by id, a list lag under a minute does
// not hide them, and their ids sort before those of payments made from
// now on. Like
// direct payments, they are not API requests (not in Requests, never
// faulted, no plan gate) and their PaymentOrigins entry is "". No webhook
// is posted for them, as none is for the seed data.
func (s *Server) SeedPayments(userID string, n int, template []byte) error {
	if len(bytes.TrimSpace(template)) == 0 {
		template = defaultSeedTemplate
	}
	m, e := parseJSONObject(template)
	if e == nil {
		e = s.seedPayments(userID, n, m)
	}
	if e != nil {
		return paymentError(e)
	}
	return nil
}

// seedPayments is SeedPayments with the template read into m.
func (s *Server) seedPayments(userID string, n int, m map[string]any) *apiError {
	switch {
	case userID == "":
		return newError(http.StatusBadRequest, typeClientError, "%s", isRequired("userId"))
	case n < 1 || n > MaxSeedPayments:
		return newError(http.StatusBadRequest, typeClientError, "%s", countHint)
	}
	req, e := parsePaymentFields(m)
	if e != nil {
		return e
	}
	now := s.clock.now()
	u := s.users.get(userID, now)
	u.mu.Lock()
	defer u.mu.Unlock()
	if e := s.checkPayment(u, req); e != nil {
		return e
	}
	status := outcomeFor(req.info.RemittanceInformation)
	made := make([]*payment, 0, n)
	for i := range n {
		at := now.Add(-seedPaymentsAge - time.Duration(n-1-i)*seedPaymentSpacing)
		p := &payment{
			ID: u.historyID(at), Status: status, PaymentInformation: req.info,
			ProviderIDs: slices.Clone(req.providerIDs), RedirectURL: req.redirectURL,
			CreatedAt: at, UpdatedAt: at, madeAt: at, includeFake: req.includeFakeProviders,
		}
		if p.ProviderIDs == nil {
			p.ProviderIDs = []string{}
		}
		made = append(made, p)
	}
	// One sort, not n inserts: the user may hold payments made after them.
	u.payments = append(u.payments, made...)
	slices.SortFunc(u.payments, func(a, b *payment) int { return strings.Compare(a.ID, b.ID) })
	return nil
}

// countHint is the refusal of a count out of range.
var countHint = `"count" must be a whole number from 1 to ` + strconv.Itoa(MaxSeedPayments)

// historyID is the id of a payment made at t, before the user's latest
// ids (newID only goes forward): a ULID of t, from the seeded generator
// when there is one. A clash with an id the user holds (80 random bits:
// never in practice) takes the next id, a bounded number of times. The
// caller holds u.mu.
func (u *userData) historyID(t time.Time) string {
	id := ""
	if u.ids == nil {
		id = newULID(t)
	} else {
		id = seededULID(t, u.ids)
	}
	for range 8 {
		if _, _, taken := find(u.payments, id, paymentKey); !taken {
			break
		}
		id = nextULID(id)
	}
	return id
}

// seedPaymentsControl adds POST /_sim/payments/seed to mux: SeedPayments
// for the user named in the body, with count payments made from the
// template the body's other keys are (those of POST /_sim/payments; none
// is the default template); 204. The keys are the control API's, the
// template's values are checked as POST /v2/payments checks them, with its
// error shapes, as POST /_sim/payments does.
func (s *Server) seedPaymentsControl(mux *http.ServeMux) {
	mux.HandleFunc("POST /_sim/payments/seed", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			UserID string `json:"userId"`
			Count  *int   `json:"count"`
			paymentKeys
		}
		if !decodeControl(w, r, &in) {
			return
		}
		if in.Count == nil {
			controlError(w, `"count" is required: `+countHint)
			return
		}
		m := in.object()
		if len(m) == 0 {
			m, _ = parseJSONObject(defaultSeedTemplate) // a constant that parses
		}
		if e := s.seedPayments(in.UserID, *in.Count, m); e != nil {
			writeAPIError(w, e)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
