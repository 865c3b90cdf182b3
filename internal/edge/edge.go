// Package edge is the BFF's HTTP edge: Echo routing, middleware (request id,
// recover, access log, metrics, CORS, CSRF) and the auth handlers. The
// session, token, proxy and problem packages below it know nothing of Echo.
package edge

import (
	"context"
	"log/slog"
	"net/netip"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
)

// Deps is what the public edge is built from.
type Deps struct {
	Logger    *slog.Logger
	Metrics   *Metrics
	Sessions  *session.Manager
	Cookies   *session.Cookies
	Forwarder *proxy.Forwarder
	// PublicOrigin is public_url's origin (scheme://host[:port]).
	PublicOrigin string
	// AllowedOrigins are cors.allowed_origins.
	AllowedOrigins []string
	// TrustedProxies are the peers whose X-Forwarded-For and X-Request-Id are believed.
	TrustedProxies []netip.Prefix
	// DevLogin enables POST /auth/dev/login (auth.mode: dev).
	DevLogin bool
	// Login, when set, enables the OpenID Connect endpoints: /auth/login,
	// /auth/callback, /auth/mobile/token and /auth/backchannel-logout.
	Login *login.Provider
	// LoginCookies binds a pending login's state to the browser.
	LoginCookies *session.Cookies
	// MobileRedirectURIs are auth.mobile_redirect_uris.
	MobileRedirectURIs []string
	// Tokens drops a user's upstream token when their last session ends.
	Tokens TokenInvalidator
	// AuthLimit, when set with AuthPerMinute > 0, is the per-address
	// budget of /auth/* requests (limits.auth_per_minute), shared by every
	// instance; Refused counts a refusal in bff_limit_refusals_total.
	AuthLimit     RateLimiter
	AuthPerMinute int
	Refused       func(limit string)
	// Budget, when set, is each session's request budget on /api
	// (limits.requests_per_second, burst), shared by every instance.
	Budget SessionBudget
}

// SessionBudget spends one request of a session's budget, in process
// (limits.Budget).
type SessionBudget interface {
	Allow(key string) (bool, time.Duration)
}

// RateLimiter spends one of perMinute requests a minute of a key
// (limits.Redis, limits.Local).
type RateLimiter interface {
	Allow(ctx context.Context, key string, perMinute int) (limits.Decision, error)
}

// NewPublic returns the public handler: auth endpoints and /api.
func NewPublic(d Deps) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger.SetOutput(discard{})
	e.IPExtractor = ipExtractor(d.TrustedProxies)
	e.HTTPErrorHandler = errorHandler(d.Logger)
	routes(e, d, d.Metrics.http, d.Metrics.auth)
	return e
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// errorHandler renders every error a handler or Echo itself returns as the
// contract's envelope: Echo's own 404/405 included.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		p := toProblem(err)
		if p.Status >= 500 && p.Status != 503 {
			log.LogAttrs(c.Request().Context(), slog.LevelError, "request failed",
				slog.String("requestId", requestID(c)), slog.String("code", p.Code), slog.Any("cause", p.Err))
		}
		problem.Write(c.Response(), p, requestID(c))
	}
}
