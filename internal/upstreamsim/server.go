// Package upstreamsim is a simulator of the upstream finance and payments
// API, as docs/upstream-sim.md describes it (its rules, paths and reply
// shapes). It is an http.Handler: tests run it
// in-process with httptest.NewServer, and cmd/upstream-sim serves it.
//
// It follows the upstream's rules (docs/upstream-sim.md): token exchange and 401s, the Free
// plan gate, the sandbox gate, the payment rules by condition, cursor
// paging, the on-demand refresh and its credits, the connection deletion
// lock, and connector tokens. Tests steer it through exported methods (or
// the /_sim/ control API): faults, secret rotation, revocation, the clock,
// the organization's plan, production access and credits.
package upstreamsim

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// Units of expiresIn in the token reply.
const (
	UnitSeconds      = "seconds"
	UnitMilliseconds = "milliseconds"
)

// Reply profiles: what a payment carries in replies (Options.ReplyProfile).
const (
	// ProfileFull sends every field the simulator keeps, updatedAt included.
	ProfileFull = "full"
	// ProfileDocumented sends only what the upstream documents for a
	// payment: no updatedAt (documented for connections only), and a
	// paymentInformation of the members the simulator models, none empty.
	ProfileDocumented = "documented"
)

// Shapes of the token endpoint's 401 on bad credentials.
const (
	Shape401Message = "message"
	Shape401Typed   = "typed"
)

// DefaultMCPResource is the resource (audience) of connector tokens; the
// upstream requires its trailing slash.
const DefaultMCPResource = "https://mcp.open-finance.test/mcp/"

// DefaultRedirectURLs is the redirect allow-list when none is given: the
// example web app's return pages under make run (http://localhost:8080)
// and at the documentation's example origin.
var DefaultRedirectURLs = []string{
	"https://app.example.com/payment-done", "https://app.example.com/connection-done",
	"http://localhost:8080/payment-done", "http://localhost:8080/connection-done",
}

// Options configures a Server. The zero value is usable: every field has
// the default given in its comment. Server.UpdateSettings changes most of
// them at run time; Reset restores them.
type Options struct {
	ClientID, ClientSecret string // defaults "dev-client", "dev-secret"
	// Plan is "free", "starter" or "pro" (default "pro").
	Plan string
	// ProductionAccess lifts the sandbox gate (default false: gate on).
	ProductionAccess bool
	// TokenTTL is the lifetime of access tokens (default 1h).
	TokenTTL time.Duration
	// ExpiresInUnit is the unit of expiresIn in the token reply: "seconds"
	// (default) or "milliseconds".
	ExpiresInUnit string
	// Credits is the starting credit balance (default 100; negative means 0).
	Credits int
	// AccountCap is the organization's corporate-account (connection) cap
	// for connections created through the API (default 5; negative means 0,
	// which refuses every new connection).
	AccountCap int
	// BigQueryLock, when true, makes DELETE of a connection younger than 90
	// minutes answer 423. Nil means true.
	BigQueryLock *bool
	// AllowedRedirectURLs is the organization's redirect allow-list of
	// absolute URLs without query or fragment (nil: DefaultRedirectURLs;
	// empty and non-nil: no redirect url is allowed).
	AllowedRedirectURLs []string
	// Control enables the /_sim/ control API (default off).
	Control bool
	// Now is the clock (default time.Now); Advance moves the simulator's
	// time ahead of it.
	Now func() time.Time
	// Logger receives one debug record per request (default: discard).
	// Secrets and tokens are never logged.
	Logger *slog.Logger
	// Unauthorized401Shape is the body of the token endpoint's 401 on bad
	// credentials: "message" (default, {"message":...}) or "typed" (the
	// real service's {"type":"CLIENT_ERROR","message":"{\"error\":...}"}).
	Unauthorized401Shape string
	// MCPResource is the audience of connector tokens (default DefaultMCPResource).
	MCPResource string
	// PublicURL is where a browser reaches this simulator, such as
	// "http://localhost:8081": payUrl, connectUrl and authorizationUrl point
	// at the bank consent pages under it. Empty (the default) means the
	// scheme and Host of the API request that produced the link.
	PublicURL string
	// Seed fixes the seed data and the ids of created resources (default
	// "": seed data from the user id alone, created ids from crypto/rand).
	// With Start as well, every id and date in every reply is the same on
	// every run and every day, given the same sequence of calls.
	Seed string
	// Start, when set, freezes the clock at that instant: only Advance (or
	// the control API) moves it. Tokens then expire only when the clock is
	// advanced past their lifetime. Zero (default) follows Now.
	Start time.Time
	// WebhookURL is where a webhook is posted on every change of a
	// payment's status (see webhooks.go): an absolute http(s) URL, or ""
	// (the default) for none. Their webhook-timestamp is read from Now,
	// not from the simulated clock Start and Advance move: receivers check
	// it against their own clock.
	WebhookURL string
	// WebhookSecret signs the webhooks: "whsec_" and the base64 of 24 to
	// 64 bytes (default DefaultWebhookSecret).
	WebhookSecret string
	// ReplyProfile is what payments carry in the replies of GET
	// /v2/payments, GET /v2/payments/{id} and DELETE /v2/payments/{id}:
	// "full" (default, ProfileFull) or "documented" (ProfileDocumented).
	ReplyProfile string
	// ListLag is how long, by the simulator's clock, a new payment stays
	// out of GET /v2/payments (the list) after it was created, as an
	// upstream whose list reads a replica lags behind; GET
	// /v2/payments/{id} finds it at once. 0 (default) is no lag; negative
	// is refused.
	ListLag time.Duration
}

// Bool returns a pointer to b, for Options.BigQueryLock.
func Bool(b bool) *bool { return &b }

func (o Options) withDefaults() Options {
	if o.ClientID == "" {
		o.ClientID = "dev-client"
	}
	if o.ClientSecret == "" {
		o.ClientSecret = "dev-secret"
	}
	if o.Plan == "" {
		o.Plan = PlanPro
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = time.Hour
	}
	if o.ExpiresInUnit == "" {
		o.ExpiresInUnit = UnitSeconds
	}
	if o.Credits == 0 {
		o.Credits = 100
	}
	o.Credits = max(o.Credits, 0)
	if o.AccountCap == 0 {
		o.AccountCap = 5
	}
	o.AccountCap = max(o.AccountCap, 0)
	if o.BigQueryLock == nil {
		o.BigQueryLock = Bool(true)
	}
	if o.AllowedRedirectURLs == nil {
		o.AllowedRedirectURLs = slices.Clone(DefaultRedirectURLs)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Unauthorized401Shape == "" {
		o.Unauthorized401Shape = Shape401Message
	}
	if o.MCPResource == "" {
		o.MCPResource = DefaultMCPResource
	}
	o.PublicURL = strings.TrimSuffix(o.PublicURL, "/")
	if o.WebhookSecret == "" {
		o.WebhookSecret = DefaultWebhookSecret
	}
	if o.ReplyProfile == "" {
		o.ReplyProfile = ProfileFull
	}
	return o
}

// Validate reports an Options value New would refuse.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case !validPlan(o.Plan):
		return fmt.Errorf("upstreamsim: plan %q: want free, starter or pro", o.Plan)
	case o.ExpiresInUnit != UnitSeconds && o.ExpiresInUnit != UnitMilliseconds:
		return fmt.Errorf("upstreamsim: expiresIn unit %q: want seconds or milliseconds", o.ExpiresInUnit)
	case o.Unauthorized401Shape != Shape401Message && o.Unauthorized401Shape != Shape401Typed:
		return fmt.Errorf("upstreamsim: 401 shape %q: want message or typed", o.Unauthorized401Shape)
	case !strings.HasSuffix(o.MCPResource, "/"):
		return fmt.Errorf("upstreamsim: MCP resource %q needs a trailing slash", o.MCPResource)
	case !validWebhookURL(o.WebhookURL):
		return fmt.Errorf("upstreamsim: webhook url %q: want an absolute http(s) URL without user info or fragment", o.WebhookURL)
	case !validProfile(o.ReplyProfile):
		return fmt.Errorf("upstreamsim: reply profile %q: want full or documented", o.ReplyProfile)
	case o.ListLag < 0:
		return fmt.Errorf("upstreamsim: list lag %s: want 0 or more", o.ListLag)
	}
	if _, err := decodeWebhookSecret(o.WebhookSecret); err != nil {
		return fmt.Errorf("upstreamsim: webhook secret: %w", err)
	}
	for _, u := range o.AllowedRedirectURLs {
		if !redirectURLValid(u) {
			return fmt.Errorf("upstreamsim: allowed redirect url %q: want an absolute URL without query or fragment", u)
		}
	}
	return validPublicURL(o.PublicURL)
}

// Server is the simulated upstream. It is an http.Handler and is safe for
// concurrent use; its methods may be called while it serves.
type Server struct {
	opts    Options
	clock   *simClock
	tokens  *tokenIssuer
	org     *org
	users   *userStore
	faults  *faultSet
	seen    *requestLog
	mints   *mintCounter
	knobs   atomic.Pointer[knobs] // the settings read on the request path
	api     http.Handler
	control http.Handler
	consent *consentPages
	hooks   *webhookSender
	late    *lateActs // the acts of ActLate faults, after their request
}

var _ http.Handler = (*Server)(nil)

// New returns a simulator configured by opts. It panics if opts.Validate
// fails: a bad option is a programming error in the test or main using it.
func New(opts Options) *Server {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	opts = opts.withDefaults()
	s := &Server{
		opts:   opts,
		clock:  &simClock{base: opts.Now},
		tokens: newTokenIssuer(opts.ClientID, opts.ClientSecret),
		org:    &org{},
		users:  &userStore{},
		faults: &faultSet{},
		seen:   &requestLog{},
		mints:  &mintCounter{},
		hooks:  newWebhookSender(opts.Now, opts.Logger),
		late:   newLateActs(),
	}
	s.users.seed = opts.Seed
	if !opts.Start.IsZero() {
		s.clock.freeze(opts.Start)
	}
	s.resetOrg()
	s.knobs.Store(knobsFrom(opts))
	s.api = s.routes()
	s.control = s.controlRoutes()
	s.consent = newConsentPages(s, opts.Seed)
	return s
}

// ServeHTTP serves the upstream API, the bank consent pages under
// /consent/ and, with Options.Control, /_sim/. Each API request is recorded,
// then faults apply, then routing, auth and the plan gate, then the route's
// handler. Every reply it writes, a fault's included, carries a Date header
// read from the simulator's clock when the reply's header is written (see
// statusWriter); a hang-up writes none.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w, now: s.clock.now}
	sw.stampDate() // for a reply no handler writes: net/http's implicit 200
	defer func() {
		s.opts.Logger.LogAttrs(r.Context(), slog.LevelDebug, "upstream-sim request",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", sw.status), slog.Duration("took", time.Since(start)))
	}()
	if s.opts.Control && strings.HasPrefix(r.URL.Path, "/_sim/") {
		s.control.ServeHTTP(sw, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, consentPrefix) {
		s.consent.ServeHTTP(sw, r) // browser pages, not API calls: not recorded, never faulted
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		writeAPIError(sw, newError(http.StatusBadRequest, typeClientError, "could not read the request body"))
		return
	}
	seen := seenRequest(r, body, s.clock.now())
	s.seen.add(seen)
	f, faulted := s.faults.take(r, seen.UserID)
	if faulted && f.ActLate {
		s.actLate(sw, r, body, f, time.Now())
		return
	}
	if faulted && !f.AfterActing && f.apply(sw, r) {
		return
	}
	if len(body) > maxBody {
		writeAPIError(sw, newError(http.StatusRequestEntityTooLarge, typeClientError, "request entity too large"))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if faulted && f.AfterActing {
		f.applyAfter(sw, r, s.api)
		return
	}
	s.api.ServeHTTP(sw, r)
}

// statusWriter records the status for the request log line, and stamps the
// reply's Date header from the simulator's clock (now) as the header goes
// out: a client that measures the upstream's clock through Date then sees
// the clock that stamps createdAt, moved by Advance or frozen by fixtures,
// not the host's. net/http keeps a Date the handler set. Unwrap keeps
// http.ResponseController (hijacking for HangUp faults) working.
type statusWriter struct {
	http.ResponseWriter
	now    func() time.Time
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		w.stampDate()
	}
	w.ResponseWriter.WriteHeader(code)
}

// stampDate sets the Date header to the simulator's time.
func (w *statusWriter) stampDate() { w.Header().Set("Date", w.now().Format(http.TimeFormat)) }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) resetOrg() {
	s.org.mu.Lock()
	s.org.plan = s.opts.Plan
	s.org.productionAccess = s.opts.ProductionAccess
	s.org.credits = s.opts.Credits
	s.org.userCredits = nil
	s.org.refreshUntil = time.Time{}
	s.org.connectorDown = false
	s.org.apiConnections = 0
	s.org.mu.Unlock()
}

// Reset returns the simulator to its starting state: the options'
// settings (see Settings), no per-user credits, no running refresh, fresh
// seed data, no faults, no recorded requests, zero mint counters, the clock
// offset at zero and the configured client secret (if it had been rotated, that is
// one more rotation: tokens minted under the rotated secret die), no
// webhooks: those in flight are cancelled and the list emptied, and no
// late acts (ActLate): those still waiting are cancelled, those acting
// finish first. Tokens minted under the configured secret stay valid.
func (s *Server) Reset() {
	s.late.stop(false) // first: a late act must not land in the fresh state, nor queue a webhook
	s.hooks.stop(false)
	s.resetOrg()
	s.knobs.Store(knobsFrom(s.opts))
	s.users.reset()
	s.faults.clear()
	s.seen.clear()
	s.mints.reset()
	s.clock.reset()
	s.tokens.rotate(s.opts.ClientSecret, false)
}

// InjectFault adds a fault and returns its id; see Fault. It panics on a
// fault the control API refuses (an ActLate fault with a Delay over
// MaxActLateDelay, a Status or AfterActing): a programming error in the
// test using it.
func (s *Server) InjectFault(f Fault) string {
	if err := f.validate(); err != nil {
		panic("upstreamsim: " + err.Error())
	}
	return s.faults.add(f)
}

// Faults returns the active faults in injection order, each with its id
// and the Times it has left.
func (s *Server) Faults() []Fault { return s.faults.list() }

// RemoveFault removes the fault with id and reports whether there was one.
func (s *Server) RemoveFault(id string) bool { return s.faults.remove(id) }

// ClearFaults removes every fault.
func (s *Server) ClearFaults() { s.faults.clear() }

// RotateSecret makes newSecret the client secret. The old secret, and every
// token minted under it, get 401 from now on.
func (s *Server) RotateSecret(newSecret string) { s.tokens.rotate(newSecret, false) }

// RotateSecretPurgeFailed makes newSecret the client secret as the
// application does when it reports that purging the cached tokens failed:
// the old secret gets 401 from now on, but tokens minted under it keep
// working until their lifetime ends. The next rotation purges them.
func (s *Server) RotateSecretPurgeFailed(newSecret string) { s.tokens.rotate(newSecret, true) }

// RevokeUser kills every token issued so far for userID (client and
// connector tokens): they get 401. New tokens for the user work.
func (s *Server) RevokeUser(userID string) { s.tokens.revoke(userID) }

// Mints is the number of successful token exchanges for userID.
func (s *Server) Mints(userID string) int { return s.mints.get(userID) }

// TotalMints is the number of successful token exchanges for all users.
func (s *Server) TotalMints() int {
	_, n := s.mints.snapshot()
	return n
}

// Requests returns the requests received so far (at most the last 10000),
// oldest first. Control API requests are not included.
func (s *Server) Requests() []SeenRequest { return s.seen.list() }

// ClearRequests forgets the recorded requests.
func (s *Server) ClearRequests() { s.seen.clear() }

// Advance moves the simulator clock ahead by d and returns the new time.
// With webhooks on, the payments whose settlement time it passes settle,
// and their webhooks are queued, before it returns.
func (s *Server) Advance(d time.Duration) time.Time {
	t := s.clock.advance(d)
	s.settleDue()
	s.wakeSettler()
	return t
}

// Now is the simulator's current time.
func (s *Server) Now() time.Time { return s.clock.now() }

// SetPlan sets the organization's plan. It panics on a plan other than
// "free", "starter" or "pro".
func (s *Server) SetPlan(plan string) {
	if !validPlan(plan) {
		panic(fmt.Sprintf("upstreamsim: unknown plan %q", plan))
	}
	s.org.mu.Lock()
	s.org.plan = plan
	s.org.mu.Unlock()
}

// SetProductionAccess turns the sandbox gate off (true) or on (false).
func (s *Server) SetProductionAccess(on bool) {
	s.org.mu.Lock()
	s.org.productionAccess = on
	s.org.mu.Unlock()
}

// SetCredits sets the organization's credit balance.
func (s *Server) SetCredits(n int) {
	s.org.mu.Lock()
	s.org.credits = max(n, 0)
	s.org.mu.Unlock()
}

// Org returns the organization's plan, production access and credits.
func (s *Server) Org() OrgState { return s.org.state() }

// SetConnectorVerificationDown makes connector-token requests fail with 503
// MCP_TEMPORARILY_UNAVAILABLE (true) or verify normally (false).
func (s *Server) SetConnectorVerificationDown(down bool) {
	s.org.mu.Lock()
	s.org.connectorDown = down
	s.org.mu.Unlock()
}

// IssueConnectorToken mints a connector (MCP) token for userID with the
// given scopes, as the AI client's connector would. linked=false models a
// user with no linked account of the service. Such tokens are accepted on
// GET routes only and never come from /oauth/token.
func (s *Server) IssueConnectorToken(userID string, scopes []string, linked bool) string {
	return s.tokens.mint(claims{
		Sub: userID, Aud: s.opts.MCPResource, Kind: kindConnector,
		Scope: strings.Join(scopes, " "), Linked: linked,
	}, s.clock.now(), s.knobs.Load().tokenTTL)
}

// SetConnectionStatus sets the status of one of userID's connections:
// ACTIVE, PENDING, INACTIVE, EXPIRED, REVOKED or FETCHING_ERROR. A
// connection made ACTIVE for the first time gets its data, as if the
// end-user had consented; one made ACTIVE after its consent ran out gets a
// new 90-day consent.
func (s *Server) SetConnectionStatus(userID, connectionID, status string) error {
	if !slices.Contains(connectionStatuses, status) {
		return fmt.Errorf("upstreamsim: unknown connection status %q", status)
	}
	u := s.users.get(userID, s.clock.now())
	u.mu.Lock()
	defer u.mu.Unlock()
	c, _, ok := find(u.connections, connectionID, connectionKey)
	if !ok {
		return fmt.Errorf("upstreamsim: user %q has no connection %q", userID, connectionID)
	}
	setConnectionStatus(u, c, status, s.clock.now())
	return nil
}

// PaymentRemittance returns the remittance information of the user's
// payment with this id, so a test can check that a payment a client was
// told about is the one its request made.
func (s *Server) PaymentRemittance(userID, paymentID string) (string, bool) {
	u := s.users.get(userID, s.clock.now())
	u.mu.Lock()
	defer u.mu.Unlock()
	p, _, ok := find(u.payments, paymentID, paymentKey)
	if !ok {
		return "", false
	}
	return p.PaymentInformation.RemittanceInformation, true
}

// PaymentRemittances returns the remittance information of every payment
// the user has, one entry per payment, so a test can count the payments a
// request made (a duplicate shows as a repeated entry).
func (s *Server) PaymentRemittances(userID string) []string {
	u := s.users.get(userID, s.clock.now())
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make([]string, len(u.payments))
	for i, p := range u.payments {
		out[i] = p.PaymentInformation.RemittanceInformation
	}
	return out
}
