package edge

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/problem"
)

// reqState is the per-request record the access log reads at the end. It
// wraps the response writer (one allocation per request for both jobs);
// errorHandler notes the code it sent (errCode).
type reqState struct {
	http.ResponseWriter
	requestID      string
	route          string // route template for labels
	userHash       string
	errCode        string
	upstreamStatus int
}

// Unwrap lets http.ResponseController reach the server's writer.
func (s *reqState) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush implements http.Flusher.
func (s *reqState) Flush() { _ = http.NewResponseController(s.ResponseWriter).Flush() }

// state is the request's record, installed by requestIDMiddleware; a
// detached one for requests that never passed it.
func state(c echo.Context) *reqState {
	if s, ok := c.Response().Writer.(*reqState); ok {
		return s
	}
	s := &reqState{ResponseWriter: c.Response().Writer}
	c.Response().Writer = s
	return s
}

func requestID(c echo.Context) string { return state(c).requestID }

// validRequestID accepts what a well-behaved proxy sends: 1 to 128 of
// [A-Za-z0-9._-].
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// requestIDs are this process's random 64-bit prefix and a counter: unique
// across instances and restarts without a crypto/rand call per request.
var (
	requestIDPrefix = func() string {
		var b [8]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	}()
	requestIDSeq atomic.Uint64
)

func newRequestID() string {
	var b [32]byte
	var n [8]byte
	copy(b[:16], requestIDPrefix)
	binary.BigEndian.PutUint64(n[:], requestIDSeq.Add(1))
	hex.Encode(b[16:], n[:])
	return string(b[:])
}

func trusted(prefixes []netip.Prefix, remoteAddr string) bool {
	if len(prefixes) == 0 {
		return false
	}
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// requestIDMiddleware accepts a well-formed X-Request-Id from a trusted
// proxy, else makes one, and echoes it on the response.
func requestIDMiddleware(proxies []netip.Prefix) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			id := r.Header.Get("X-Request-Id")
			if !validRequestID(id) || !trusted(proxies, r.RemoteAddr) {
				id = newRequestID()
			}
			s := state(c)
			s.requestID = id
			c.Response().Header().Set("X-Request-Id", id)
			return next(c)
		}
	}
}

// recoverMiddleware turns a panic into a logged 500 envelope.
func recoverMiddleware(log *slog.Logger) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler { // the stream was aborted on purpose
					panic(v)
				}
				log.LogAttrs(c.Request().Context(), slog.LevelError, "panic",
					slog.String("requestId", requestID(c)), slog.String("panic", fmt.Sprint(v)),
					slog.String("stack", string(debug.Stack())))
				err = problem.Wrap(problem.CodeInternal, "an internal error occurred", fmt.Errorf("panic: %v", v))
			}()
			return next(c)
		}
	}
}

// accessLog writes one line per request and tells observe of it (and of
// its error envelope). It never logs a header, a cookie or a token; the
// user id is hashed.
func accessLog(log *slog.Logger, observe Observer) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			s := state(c)
			route := routeOf(c)
			status := c.Response().Status
			took := time.Since(start)
			observe.Served(route, c.Request().Method, status, took)
			attrs := []slog.Attr{
				slog.String("requestId", s.requestID),
				slog.String("method", c.Request().Method),
				slog.String("route", route),
				slog.Int("status", status),
				slog.Float64("durationMs", float64(took.Microseconds())/1000),
				slog.String("remoteIp", c.RealIP()),
			}
			if s.userHash != "" {
				attrs = append(attrs, slog.String("user", s.userHash))
			}
			if s.errCode != "" {
				attrs = append(attrs, slog.String("code", s.errCode))
				observe.Problem(s.errCode)
			}
			if s.upstreamStatus != 0 {
				attrs = append(attrs, slog.Int("upstreamStatus", s.upstreamStatus))
			}
			log.LogAttrs(c.Request().Context(), slog.LevelInfo, "request", attrs...)
			return nil
		}
	}
}

// routeOf is the request's route template for logs, metrics and spans:
// the upstream route the proxy matched, else Echo's, else "unmatched".
func routeOf(c echo.Context) string {
	if r := state(c).route; r != "" {
		return r
	}
	if r := c.Path(); r != "" {
		return r
	}
	return "unmatched"
}

// userHash is a short, stable pseudonym of a user id for logs.
func userHash(userID string) string {
	sum := sha256.Sum256([]byte("bff-log:" + userID))
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// noStore marks every answer under /api, /auth and /bff, the BFF's own and the
// upstream's, as not cacheable and not to be sniffed: they hold financial
// data and session state. (The proxy sets the same on upstream replies,
// whose headers would otherwise replace these.)
func noStore() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p := c.Request().URL.Path
			if strings.HasPrefix(p, "/api") || strings.HasPrefix(p, "/auth") || strings.HasPrefix(p, "/bff") {
				h := c.Response().Header()
				h["Cache-Control"] = noStoreValue // shared, never appended to: no allocation per request
				h["X-Content-Type-Options"] = nosniffValue
			}
			return next(c)
		}
	}
}

// addressLimits are the per-client-address budgets, one each across every
// instance (GCRA in Redis), keyed by clientKey.
type addressLimits struct {
	limiter RateLimiter
	// auth is /auth/* (but the back-channel logout) per minute; 0: off.
	auth int
	// backchannel is the refused POST /auth/backchannel-logout requests
	// per minute, apart from auth: users' traffic must not throttle the
	// provider, and only refusals count, so forged tokens sent from the
	// provider's own addresses (a hosted provider's other tenants) cannot
	// spend the budget of its genuine logouts.
	backchannel int
	// pendingLogins is GET /auth/login per login.StateTTL: each stores a
	// record for that long, so this bounds a client's stored records.
	pendingLogins int
	v6Bits        int
	observe       Observer
	log           *slog.Logger
}

// allow spends one of n per period of the client's budget named kind; a
// refusal is 429 RATE_LIMITED with Retry-After. A store that does not
// answer lets the request through: the handler then fails closed on its
// own store.
func (l *addressLimits) allow(c echo.Context, kind limits.Kind, n int, per time.Duration, detail string) error {
	if l == nil || l.limiter == nil || n <= 0 {
		return nil
	}
	r := c.Request()
	d, err := l.limiter.AllowPer(r.Context(), string(kind)+":"+clientKey(c.RealIP(), l.v6Bits), n, per)
	if err != nil {
		l.log.Warn("a per-address budget could not be checked; letting the request through", slog.String("limit", string(kind)), slog.String("error", err.Error()))
		return nil
	}
	if d.Allowed {
		return nil
	}
	l.observe.Refused(kind)
	return problem.Later(problem.CodeRateLimited, d.RetryAfter, detail)
}

// authLimit spends the client's /auth/* budget, or its back-channel logout
// budget on that path; GET /auth/methods spends none.
func authLimit(l *addressLimits) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p := c.Request().URL.Path
			var err error
			switch {
			case p == "/auth/backchannel-logout":
				// Counted by the handler, refusals only.
			case p == "/auth/methods" && c.Request().Method == http.MethodGet:
				// Not counted: every page view asks it (docs/endpoints.md).
			case strings.HasPrefix(p, "/auth/"):
				err = l.allow(c, limits.KindAuth, l.auth, time.Minute, "too many login and session requests from this address; retry in %d s")
			}
			if err != nil {
				return err
			}
			return next(c)
		}
	}
}

var (
	noStoreValue = []string{"no-store"}
	nosniffValue = []string{"nosniff"}
)

// preflight answers every CORS preflight (OPTIONS with Origin and
// Access-Control-Request-Method) before any session check, so it is never
// 401: a listed origin gets the Access-Control-Allow-* headers, any other
// origin none (the browser then refuses the real request itself).
func preflight(origins []string) echo.MiddlewareFunc {
	allowed := make(map[string]bool, len(origins))
	for _, o := range origins {
		allowed[o] = true
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Method != http.MethodOptions || r.Header.Get("Origin") == "" || r.Header.Get("Access-Control-Request-Method") == "" {
				return next(c)
			}
			h := c.Response().Header()
			h.Add("Vary", "Origin")
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			if origin := r.Header.Get("Origin"); allowed[origin] {
				h.Set("Access-Control-Allow-Origin", origin)
				h.Set("Access-Control-Allow-Credentials", "true")
				h.Set("Access-Control-Allow-Methods", strings.Join(corsMethods, ", "))
				h.Set("Access-Control-Allow-Headers", strings.Join(corsHeaders, ", "))
				h.Set("Access-Control-Max-Age", "600")
			}
			return c.NoContent(http.StatusNoContent)
		}
	}
}

var (
	corsMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	corsHeaders = []string{"Content-Type", "X-CSRF", "Authorization", "Idempotency-Key", "X-Request-Id", "DPoP"}
)

// corsMiddleware answers cross-origin requests from the listed origins only,
// with credentials; other origins get no CORS headers at all.
func corsMiddleware(origins []string) echo.MiddlewareFunc {
	return middleware.CORSWithConfig(middleware.CORSConfig{
		AllowOrigins:     origins,
		AllowMethods:     corsMethods,
		AllowHeaders:     corsHeaders,
		ExposeHeaders:    []string{"X-Request-Id", "Retry-After", "Idempotent-Replayed", "WWW-Authenticate"},
		AllowCredentials: true,
		MaxAge:           600,
	})
}

// ipExtractor believes X-Forwarded-For only from trusted proxies.
func ipExtractor(proxies []netip.Prefix) echo.IPExtractor {
	if len(proxies) == 0 {
		return echo.ExtractIPDirect()
	}
	opts := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range proxies {
		_, n, err := net.ParseCIDR(p.String())
		if err == nil {
			opts = append(opts, echo.TrustIPRange(n))
		}
	}
	return echo.ExtractIPFromXFFHeader(opts...)
}

// toProblem turns whatever a handler or Echo returned into a Problem.
func toProblem(err error) *problem.Problem {
	var p *problem.Problem
	if errors.As(err, &p) {
		return p
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return problem.Wrap(problem.CodeRouteNotFound, "no route matches this path", err)
		case http.StatusMethodNotAllowed:
			return problem.Wrap(problem.CodeMethodNotAllowed, "this method is not allowed here", err)
		case http.StatusRequestEntityTooLarge:
			return problem.Wrap(problem.CodeBodyTooLarge, "the request body is too large", err)
		case http.StatusBadRequest, http.StatusUnsupportedMediaType:
			return problem.Wrap(problem.CodeBadRequest, "the request could not be read", err)
		}
	}
	return problem.Wrap(problem.CodeInternal, "an internal error occurred", err)
}
