// Package edge is the BFF's HTTP edge: Echo routing, middleware (request id,
// recover, access log, metrics, CORS, CSRF) and the auth handlers. The
// session, token, proxy and problem packages below it know nothing of Echo.
package edge

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
)

// Payments is what the edge needs of payments.Service: which calls are
// its own, and serving them.
type Payments interface {
	Handles(t proxy.Target, method string) bool
	Serve(w http.ResponseWriter, r *http.Request, c proxy.Call, t proxy.Target) (proxy.Result, error)
}

// Deps is what the public edge is built from, grouped by concern. A
// group's zero value leaves its routes out, or its limits off.
type Deps struct {
	Observability Observability
	Clients       Clients
	Sessions      Sessions
	// DPoP binds native sessions to a device key (session.mobile_dpop);
	// its zero value binds none.
	DPoP     DPoP
	Login    Login
	Limits   Limits
	API      API
	Payments PaymentRoutes
	// Webhooks, when set, receives the upstream's signed payment-status
	// webhooks on its path (payments.webhook_path).
	Webhooks *Webhooks
	// Static, when set, is the web app served at / (static_dir).
	Static *Static
}

// Observability is where the edge reports what it serves.
type Observability struct {
	Logger *slog.Logger
	// Observe, when set, is told of each request served, error envelope,
	// login, revocation, refusal and webhook (metrics).
	Observe Observer
}

// Clients is whom the edge answers and what it believes of them.
type Clients struct {
	// PublicOrigin is public_url's origin (scheme://host[:port]).
	PublicOrigin string
	// AllowedOrigins are cors.allowed_origins.
	AllowedOrigins []string
	// TrustedProxies are the peers whose X-Forwarded-For and X-Request-Id are believed.
	TrustedProxies []netip.Prefix
	// TraceparentFrom are the peers whose W3C trace headers are believed
	// (traceparent_from; never implied by TrustedProxies).
	TraceparentFrom []netip.Prefix
	// TrustClientTraceparent believes the trace headers of any client.
	TrustClientTraceparent bool
}

// Sessions is who the caller is: the session store and its cookie.
type Sessions struct {
	Manager *session.Manager
	Cookies *session.Cookies
	// Tokens drops a user's upstream token when their last session ends.
	Tokens TokenInvalidator
}

// Login is how sessions begin.
type Login struct {
	// Dev enables POST /auth/dev/login (auth.mode: dev).
	Dev bool
	// OIDC, when set, enables the OpenID Connect endpoints: /auth/login,
	// /auth/callback, /auth/mobile/token and /auth/backchannel-logout.
	OIDC *login.Provider
	// Cookies binds a pending login's state to the browser.
	Cookies *session.Cookies
	// MobileRedirectURIs are auth.mobile_redirect_uris.
	MobileRedirectURIs []string
}

// Limits are the budgets the edge spends before anything reaches the
// upstream.
type Limits struct {
	// PerAddress, when set, keeps the per-client-address budgets, shared
	// by every instance: /auth/* requests (limits.auth_per_minute), the
	// back-channel logout (limits.backchannel_per_minute) and logins
	// started (limits.pending_logins_per_address per login.StateTTL); 0
	// switches one off. An IPv6 client is its first IPv6Prefix bits
	// (limits.ipv6_prefix), here and in the event streams' per-address
	// bound.
	PerAddress              RateLimiter
	AuthPerMinute           int
	BackchannelPerMinute    int
	PendingLoginsPerAddress int
	IPv6Prefix              int
	// Budget, when set, is each session's request budget on /api and
	// /bff (limits.requests_per_second, burst), shared by every instance.
	Budget SessionBudget
}

// API is /api: the upstream's API in the caller's name.
type API struct {
	Forwarder *proxy.Forwarder
	// Payments, when set, serves the API calls that cost money (money-
	// moving POSTs, the refresh); the Forwarder serves the rest.
	Payments Payments
	// Development (env: development) adds the upstream's own message to
	// its error answers (problem.WithUpstreamMessage).
	Development bool
}

// PaymentRoutes are the BFF's own views of the caller's payments.
type PaymentRoutes struct {
	// Records, when set, serves GET /bff/payments and
	// GET /bff/payments/{idempotencyKey}: the caller's money-moving
	// requests from the ledger.
	Records PaymentRecords
	// Streams, when set, serves GET /bff/events: the caller's payment
	// changes as they happen.
	Streams StreamOpener
	// StepUps, when set with an OpenID login, takes the approvals of held
	// payments: GET /auth/step-up and POST /auth/step-up/token.
	StepUps StepUps
}

// Observer receives the edge's events, on the public listener and the
// admin one. Implementations must be cheap (Served and Problem are on
// every request's path) and safe for concurrent use.
type Observer interface {
	// Served reports a request served on the public listener: its route
	// template (never the raw path), its method as sent, the status and
	// the time it took.
	Served(route, method string, status int, took time.Duration)
	// Problem reports an error envelope sent on the public listener, by
	// its code: one of the BFF's, or an upstream's own error type.
	Problem(code string)
	// Login reports how a login, or a step of one, ended: method is dev,
	// oidc, mobile, step_up or unknown (a state that names none); result
	// is ok, started, code_issued, failed, state, invalid_grant, approved
	// or declined (login.Method and login.Outcome name them).
	Login(method login.Method, result login.Outcome)
	// Revoked reports n sessions ended before their timeout, by reason:
	// logout, user, admin or backchannel (session.Reason).
	Revoked(reason session.Reason, n int)
	// Refused reports a request a limit refused before it reached the
	// upstream: requests (the session's budget), auth, backchannel,
	// pending_logins or dpop (the per-address budgets), or the open event
	// streams on this instance: streams (a user's), streams_address (a
	// client address's) or streams_instance (the instance's bound)
	// (limits.Kind).
	Refused(limit limits.Kind)
	// Webhook reports a verified-or-not webhook answered before anything
	// was stored, by a result of payments' follow metric:
	// WebhookForged, WebhookStale or WebhookMalformed (refused), or
	// WebhookIgnored (a type or a payment status the BFF does not read).
	// Payments reports those that reach the ledger.
	Webhook(result payments.FollowResult)
}

type nopObserver struct{}

func (nopObserver) Served(string, string, int, time.Duration) {}
func (nopObserver) Problem(string)                            {}
func (nopObserver) Login(login.Method, login.Outcome)         {}
func (nopObserver) Revoked(session.Reason, int)               {}
func (nopObserver) Refused(limits.Kind)                       {}
func (nopObserver) Webhook(payments.FollowResult)             {}

// SessionBudget spends one request of a session's budget, in process
// (limits.Budget).
type SessionBudget interface {
	Allow(key string) (bool, time.Duration)
}

// RateLimiter spends one of perMinute requests a minute of a key
// (limits.Redis, limits.Local).
type RateLimiter interface {
	AllowPer(ctx context.Context, key string, n int, per time.Duration) (limits.Decision, error)
}

// NewPublic returns the public handler: auth endpoints and /api.
func NewPublic(d Deps) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger.SetOutput(discard{})
	e.IPExtractor = ipExtractor(d.Clients.TrustedProxies)
	e.HTTPErrorHandler = errorHandler(d.Observability.Logger, d.API.Development)
	if d.Observability.Observe == nil {
		d.Observability.Observe = nopObserver{}
	}
	routes(e, d)
	return e
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// errorHandler renders every error a handler or Echo itself returns as the
// error envelope (docs/errors.md), Echo's own 404/405 and the proxy's failures
// included: the one place the public listener writes a problem. It logs
// the failures an operator acts on, with their cause (URLs taken out);
// everything else is in the access log's code. A 503 is logged where it
// happens (the store, the ledger), with what failed.
//
// In development (dev), an upstream's answer also carries the upstream's
// own message ("upstreamMessage") with its URLs' paths: the detail is
// cleaned of URLs and secret-looking values, which hides from a developer
// what the upstream refused (a redirect URL not on its allow-list). Neither
// names an upstream host.
func errorHandler(log *slog.Logger, dev bool) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		p := toProblem(err)
		s := state(c)
		s.errCode = p.Code
		if level, ok := failureLevel(p); ok {
			attrs := []slog.Attr{slog.String("requestId", s.requestID), slog.String("code", p.Code), slog.Int("status", p.Status)}
			if s.route != "" {
				attrs = append(attrs, slog.String("route", s.route))
			}
			if s.upstreamStatus != 0 {
				attrs = append(attrs, slog.Int("upstreamStatus", s.upstreamStatus))
			}
			if p.Err != nil {
				attrs = append(attrs, slog.String("cause", problem.CauseText(p.Err)))
			}
			log.LogAttrs(c.Request().Context(), level, "request failed", attrs...)
		}
		if dev {
			p = problem.WithUpstreamMessage(p)
		}
		problem.Write(c.Response(), p, s.requestID)
	}
}

// failureLevel is the level a failure is logged at, and whether it is.
// Errors: what is wrong on our side (a bug, the BFF's upstream credentials
// refused, a payment whose outcome is in doubt). Warnings: an upstream or
// provider that failed or did not answer. Client errors and 503s: not here.
func failureLevel(p *problem.Problem) (slog.Level, bool) {
	switch {
	case p.Code == problem.CodeInternal || p.Code == problem.CodeUpstreamAuthFailed || p.Code == problem.CodePaymentOutcomeUnknown:
		return slog.LevelError, true
	case p.Status >= 500 && p.Status != http.StatusServiceUnavailable:
		return slog.LevelWarn, true
	}
	return 0, false
}
