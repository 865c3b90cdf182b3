package upstreamsim

import (
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sync/atomic"
	"time"
)

// The bank consent pages. Creating a payment answers with a payUrl,
// open-banking-init with an authorizationUrl and creating a connection with
// a connectUrl; the end-user's browser is sent there to approve at the
// bank. The simulator serves those pages itself, under consentPrefix:
//
//	GET  /consent/payments/{paymentId}?token=T        the payment, with Approve / Reject / Cancel
//	POST /consent/payments/{paymentId}                 token=T&decision=approve|reject|cancel
//	GET  /consent/connections/{connectionId}?token=T  the bank connection, same buttons
//	POST /consent/connections/{connectionId}           same form
//
// They are browser pages, not API routes: no Bearer token, no faults, not
// in the request log. The token is an HMAC of the id and its owner under a
// key drawn when the simulator starts (derived from the seed when there is
// one, see consentPages.setSeed), so a page cannot be driven by guessing
// ids. A decision answers 303 to the redirect url with the outcome
// in the query (paymentId or connectionId, and status), or, with no
// redirect url or once the consent is already decided, to the page itself,
// which then shows the outcome and changes nothing.

// consentPrefix is the path prefix of the consent pages.
const consentPrefix = "/consent/"

// Kinds of consent, as they appear in the pages' paths.
const (
	consentPayments    = "payments"
	consentConnections = "connections"
)

// Connection statuses the consent pages and the control API use.
const (
	connActive   = "ACTIVE"
	connPending  = "PENDING" // created, waiting for the end-user's consent
	connInactive = "INACTIVE"
	connRevoked  = "REVOKED"
)

// paymentStatuses are the upstream's payment statuses (PART only in sandbox).
var paymentStatuses = []string{
	"ACCC", statusACSC, "ACSP", "ACTC", "ACWC", "ACFC", "RCVD", statusRJCT, "PATC",
	statusPending, statusERROR, statusCANC, statusInit, "PART",
}

// connectionStatuses are the connection statuses the upstream is known to send.
var connectionStatuses = []string{connActive, connPending, connInactive, "EXPIRED", connRevoked, "FETCHING_ERROR"}

// awaitingAuthorisation are the payment statuses in which the end-user has
// not decided yet: received, technically accepted, partially authorised,
// and the simulator's own INIT and PENDING. Only these are decided by the
// consent page.
var awaitingAuthorisation = []string{statusInit, statusPending, "RCVD", "ACTC", "PATC"}

// decision is one of the consent page's three buttons and what it does.
type decision struct {
	payment    string     // the payment's new status
	connection string     // the connection's new status
	connErr    *connError // the connection's error afterwards
}

var decisions = map[string]decision{
	"approve": {payment: statusACSC, connection: connActive},
	"reject": {payment: statusRJCT, connection: connRevoked,
		connErr: &connError{Code: "CONSENT_REJECTED", Message: "The user refused access at the bank"}},
	"cancel": {payment: statusCANC, connection: connInactive,
		connErr: &connError{Code: "CONSENT_CANCELLED", Message: "The user cancelled at the bank"}},
}

// consentPages serves the pages under consentPrefix and signs their links.
// It is safe for concurrent use.
type consentPages struct {
	key atomic.Pointer[[32]byte]
	http.Handler
}

func newConsentPages(s *Server, seed string) *consentPages {
	c := &consentPages{}
	c.setSeed(seed)
	mux := http.NewServeMux()
	for _, kind := range []string{consentPayments, consentConnections} {
		mux.HandleFunc("GET "+consentPrefix+kind+"/{id}", s.showConsent(kind))
		mux.HandleFunc("POST "+consentPrefix+kind+"/{id}", s.decideConsent(kind))
	}
	mux.HandleFunc(consentPrefix, func(w http.ResponseWriter, r *http.Request) {
		writeAPIError(w, notFound("Cannot %s %s", r.Method, r.URL.Path))
	})
	c.Handler = mux
	return c
}

// setSeed picks the key that signs consent links: drawn at random, or,
// with a seed, derived from it so that seeded runs give the same links
// (anyone who knows the seed can then make them: a simulator's trade-off).
func (c *consentPages) setSeed(seed string) {
	var key [32]byte
	if seed == "" {
		_, _ = crand.Read(key[:]) // never fails (crypto/rand crashes the program instead)
	} else {
		key = sha256.Sum256([]byte("upstream-sim consent links\x00" + seed))
	}
	c.key.Store(&key)
}

// token is the consent token of the kind's id owned by userID.
func (c *consentPages) token(kind, userID, id string) string {
	return sign(c.key.Load(), kind, userID, id)
}

// sign is the consent token of the kind's id owned by userID under key.
func sign(key *[32]byte, kind, userID, id string) string {
	m := hmac.New(sha256.New, key[:])
	m.Write([]byte(kind + "\x00" + userID + "\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// valid reports whether token is the consent token of the kind's id owned
// by userID, in constant time.
func (c *consentPages) valid(kind, userID, id, token string) bool {
	return hmac.Equal([]byte(c.token(kind, userID, id)), []byte(token))
}

// publicBase is where a browser reaches the simulator: the publicURL
// setting, else the scheme and Host the request came to, else (no request)
// "", which leaves links as paths on the simulator.
func (s *Server) publicBase(r *http.Request) string {
	if u := s.knobs.Load().publicURL; u != "" {
		return u
	}
	if r == nil { // a Go call (CreateDirectPayment): no Host to go by, the link is a path
		return ""
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// payURL is p's consent page link. Its token is signed once per signing
// key and kept on p, so a list does not sign every payment on every read.
// The caller holds the owner's mu.
func (s *Server) payURL(r *http.Request, userID string, p *payment) string {
	if key := s.consent.key.Load(); p.tokenKey != key {
		p.token, p.tokenKey = sign(key, consentPayments, userID, p.ID), key
	}
	return s.publicBase(r) + consentPrefix + consentPayments + "/" + p.ID + "?token=" + p.token
}

// consentURL is the consent page link of the kind's id owned by userID.
func (s *Server) consentURL(r *http.Request, kind, userID, id string) string {
	return s.publicBase(r) + consentPrefix + kind + "/" + id + "?token=" + s.consent.token(kind, userID, id)
}

// validPublicURL accepts "" or an absolute http(s) URL with no query or
// fragment.
func validPublicURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("upstreamsim: public URL %q: want an absolute http(s) URL such as http://localhost:8081", raw)
	}
	return nil
}

// lockOwner returns the user for whom has is true, with its mu held, or nil.
func (s *userStore) lockOwner(has func(*userData) bool) *userData {
	s.mu.Lock()
	all := slices.Collect(maps.Values(s.users))
	s.mu.Unlock()
	for _, u := range all {
		u.mu.Lock()
		if has(u) {
			return u
		}
		u.mu.Unlock()
	}
	return nil
}

// lockPayment finds the payment id and its owner, with the owner's mu held.
func (s *Server) lockPayment(id string) (*userData, *payment) {
	var p *payment
	u := s.users.lockOwner(func(u *userData) bool {
		var ok bool
		p, _, ok = find(u.payments, id, paymentKey)
		return ok
	})
	return u, p
}

// lockConnection finds the connection id and its owner, with the owner's mu
// held.
func (s *Server) lockConnection(id string) (*userData, *connection) {
	var c *connection
	u := s.users.lockOwner(func(u *userData) bool {
		var ok bool
		c, _, ok = find(u.connections, id, connectionKey)
		return ok
	})
	return u, c
}

// SetPaymentStatus sets the status of one of userID's payments, as the bank
// would. status must be one of the upstream's payment statuses (ACCC, ACSC,
// ACSP, ACTC, ACWC, ACFC, RCVD, RJCT, PATC, PENDING, ERROR, CANC, INIT,
// PART). A payment set to PENDING stays PENDING: it does not settle.
func (s *Server) SetPaymentStatus(userID, paymentID, status string) error {
	if !slices.Contains(paymentStatuses, status) {
		return fmt.Errorf("upstreamsim: unknown payment status %q", status)
	}
	u := s.users.get(userID, s.clock.now())
	u.mu.Lock()
	defer u.mu.Unlock()
	p, _, ok := find(u.payments, paymentID, paymentKey)
	if !ok {
		return fmt.Errorf("upstreamsim: user %q has no payment %q", userID, paymentID)
	}
	before := p.Status
	setPaymentStatus(p, status, s.clock.now())
	s.paymentChanged(p, before)
	return nil
}

// setPaymentStatus moves p to status. The caller holds the owner's mu.
func setPaymentStatus(p *payment, status string, now time.Time) {
	p.Status, p.UpdatedAt, p.initiatedAt = status, now, time.Time{}
}

// setConnectionStatus moves c to status. A connection that becomes ACTIVE
// for the first time (it was never fetched) is filled with fresh data, as
// after the end-user's consent; one that becomes ACTIVE after its consent
// ran out gets a new consent from now, or it would still read EXPIRED and
// refresh would answer 409. The caller holds u.mu.
func setConnectionStatus(u *userData, c *connection, status string, now time.Time) {
	c.Status, c.UpdatedAt = status, now
	if status != connActive {
		return
	}
	c.Error = nil
	if c.LastFetchedAt == nil {
		fillConnection(u, c, now)
	}
	if !now.Before(c.ExpiryDate) {
		c.StartDate, c.ExpiryDate = now, now.Add(consentDuration)
	}
}

// paymentOpen reports whether p still waits for the end-user's decision.
func paymentOpen(p *payment) bool { return slices.Contains(awaitingAuthorisation, p.Status) }

// connectionOpen reports whether c still waits for the end-user's consent:
// created through the API, never fetched, not refused or cancelled.
func connectionOpen(c *connection) bool {
	return c.Status == connPending && c.Error == nil && c.LastFetchedAt == nil
}

// providerName is the bank's display name, or its id if unknown.
func providerName(id string) string {
	if p, ok := findProvider(id); ok {
		return p.Name
	}
	return id
}

// paymentBank is the provider that shows the payment: the one chosen at
// open-banking-init, else the first the payment names, else the sandbox bank.
func paymentBank(p *payment) string {
	switch {
	case p.ProviderID != "":
		return p.ProviderID
	case len(p.ProviderIDs) > 0:
		return p.ProviderIDs[0]
	}
	return ProviderSandbox
}

// returnURL is redirect with the outcome added to its query: idName=id and
// status. It is "" when redirect is.
func returnURL(redirect, idName, id, status string) string {
	if redirect == "" {
		return ""
	}
	u, err := url.Parse(redirect)
	if err != nil {
		return "" // cannot happen: redirect urls are checked against the allow-list when stored
	}
	q := u.Query()
	q.Set(idName, id)
	q.Set("status", status)
	u.RawQuery = q.Encode()
	return u.String()
}

// plainOrigin matches an origin safe to put in a CSP header as is.
var plainOrigin = regexp.MustCompile(`^https?://[A-Za-z0-9.\-]+(:[0-9]+)?$`)

// redirectOrigin is the scheme and host of redirect, for the page's CSP
// form-action: browsers check the form's 303 target against it. "" if none.
func redirectOrigin(redirect string) string {
	u, err := url.Parse(redirect)
	if err != nil || redirect == "" {
		return ""
	}
	if o := u.Scheme + "://" + u.Host; plainOrigin.MatchString(o) {
		return o
	}
	return ""
}

// decide reads a consent form: the token and the decision. ok is false
// (and the reply written) on a malformed form.
func decide(w http.ResponseWriter, r *http.Request) (token string, d decision, ok bool) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10) // three short fields
	if err := r.ParseForm(); err != nil {
		renderError(w, http.StatusBadRequest, "The form could not be read.")
		return "", decision{}, false
	}
	d, ok = decisions[r.PostFormValue("decision")]
	if !ok {
		renderError(w, http.StatusBadRequest, "Choose Approve, Reject or Cancel.")
	}
	return r.PostFormValue("token"), d, ok
}

// seeOther answers 303 to loc; after a decision the browser must GET it.
func seeOther(w http.ResponseWriter, loc string) {
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusSeeOther)
}

// selfURL is the consent page r was posted to, where it shows its outcome.
func selfURL(r *http.Request, token string) string {
	return r.URL.Path + "?token=" + url.QueryEscape(token)
}

// consentItem is a payment or a connection as its consent page sees it.
// Every method is called with the owner's mu held.
type consentItem interface {
	// page is what the owner u sees at the link carrying token.
	page(u *userData, token string, now time.Time) page
	// redirect is where the end-user goes back to; "" for none.
	redirect() string
	// decide applies d if the item still waits for the end-user, and
	// reports whether it did.
	decide(u *userData, d decision, now time.Time) bool
	// returnURL is redirect with the outcome in its query.
	returnURL() string
}

// paymentConsent is a payment on its consent page; s sends the webhooks
// of what the page changes.
type paymentConsent struct {
	*payment
	s *Server
}

func (p paymentConsent) page(u *userData, token string, now time.Time) page {
	p.s.settle(p.payment, now)
	return paymentPage(u, p.payment, token)
}

func (p paymentConsent) redirect() string { return p.RedirectURL }

func (p paymentConsent) decide(_ *userData, d decision, now time.Time) bool {
	defer p.s.paymentChanged(p.payment, p.Status)
	if p.settle(now); !paymentOpen(p.payment) {
		return false
	}
	decidePayment(p.payment, d, now)
	return true
}

func (p paymentConsent) returnURL() string {
	return returnURL(p.RedirectURL, "paymentId", p.ID, p.Status)
}

type connectionConsent struct{ *connection }

func (c connectionConsent) page(_ *userData, token string, now time.Time) page {
	return connectionPage(c.connection, token, now)
}

func (c connectionConsent) redirect() string { return c.redirectURL }

func (c connectionConsent) decide(u *userData, d decision, now time.Time) bool {
	if !connectionOpen(c.connection) {
		return false
	}
	decideConnection(u, c.connection, d, now)
	return true
}

func (c connectionConsent) returnURL() string {
	return returnURL(c.redirectURL, "connectionId", c.ID, c.Status)
}

// lockConsent finds the payment or connection (by kind) id whose consent
// token is token, and its owner, with the owner's mu held. The owner is
// nil, and nothing held, for an unknown id and a wrong token alike.
func (s *Server) lockConsent(kind, id, token string) (*userData, consentItem) {
	var u *userData
	var it consentItem
	if kind == consentPayments {
		var p *payment
		u, p = s.lockPayment(id)
		it = paymentConsent{p, s}
	} else {
		var c *connection
		u, c = s.lockConnection(id)
		it = connectionConsent{c}
	}
	if u != nil && !s.consent.valid(kind, u.id, id, token) {
		u.mu.Unlock()
		return nil, nil
	}
	return u, it
}

// showConsent serves GET of a kind's consent page: the form while the
// end-user has not decided, the outcome afterwards.
func (s *Server) showConsent(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token := r.URL.Query().Get("token")
		u, it := s.lockConsent(kind, r.PathValue("id"), token)
		if u == nil {
			renderNotFound(w)
			return
		}
		defer u.mu.Unlock()
		renderPage(w, http.StatusOK, it.page(u, token, s.clock.now()), redirectOrigin(it.redirect()))
	}
}

// decideConsent serves POST of a kind's consent page: the decision, then
// 303 to the redirect url with the outcome, or to the page itself when
// there is no redirect url or the consent was already decided.
func (s *Server) decideConsent(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, d, ok := decide(w, r)
		if !ok {
			return
		}
		u, it := s.lockConsent(kind, r.PathValue("id"), token)
		if u == nil {
			renderNotFound(w)
			return
		}
		defer u.mu.Unlock()
		if it.decide(u, d, s.clock.now()) && it.redirect() != "" {
			seeOther(w, it.returnURL())
			return
		}
		seeOther(w, selfURL(r, token))
	}
}

// decidePayment applies the end-user's decision to an open payment; the
// bank that showed the page becomes its provider.
func decidePayment(p *payment, d decision, now time.Time) {
	setPaymentStatus(p, d.payment, now)
	if d.payment != statusCANC {
		p.ProviderID = paymentBank(p)
	}
}

// decideConnection applies the end-user's decision to an open connection.
// The caller holds u.mu.
func decideConnection(u *userData, c *connection, d decision, now time.Time) {
	setConnectionStatus(u, c, d.connection, now)
	if d.connErr != nil {
		e := *d.connErr
		c.Error = &e
	}
}

// consentDuration is how long a consent given at the bank lasts.
const consentDuration = 90 * day

// consentTransactionCount is how many transactions (over the year before)
// a newly connected account brings.
const consentTransactionCount = 20

// fillConnection gives a newly consented connection fresh data: a current
// account with consentTransactionCount transactions, fetched now, and a
// consent running for consentDuration from now. Seeded like the rest of
// the user's data. The caller holds u.mu.
func fillConnection(u *userData, c *connection, now time.Time) {
	u.seedTransactions() // first: seeding later would also seed the account added here
	rng := seededRand(u.seed, u.id, "consent\x00"+c.ID)
	c.StartDate, c.ExpiryDate = now, now.Add(consentDuration)
	acc := seedAccount(c, accountSpec{typ: "CHECKING", product: "חשבון עו\"ש", txs: consentTransactionCount}, rng)
	for range acc.txCount {
		t := seedTransaction(acc, now, rng)
		u.txs = insert(u.txs, t, transactionKey)
		u.txBySK[t.SK] = t
	}
	u.accounts = insert(u.accounts, acc, accountKey)
	fetched, dataDate := now, now
	c.LastFetchedAt, c.LastFetchedDataDate = &fetched, &dataDate
}
