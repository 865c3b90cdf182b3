package edge

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/dpop"
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/session"
)

// principal is an authenticated caller.
type principal struct {
	id        string
	rec       session.Record
	viaCookie bool
}

// authn resolves the caller's session from the cookie or a session token.
type authn struct {
	sessions       *session.Manager
	cookies        *session.Cookies
	publicOrigin   string
	allowedOrigins []string
	// dpop checks the proofs of device-bound sessions (and binds token
	// logins); nil: none is bound, and the DPoP scheme is refused.
	dpop *binder
}

func sessionRequired(detail string) *problem.Problem {
	return problem.New(problem.CodeSessionRequired, detail)
}

// resolve finds the caller's live session and applies the CSRF rule to
// cookie-authenticated unsafe requests. Without a session it is 401
// SESSION_REQUIRED (never a redirect); a store outage is 503.
//
// A device-bound session (one with a JKT) is accepted only as
// "Authorization: DPoP <sessionToken>" with a valid proof of its key for
// this request (binder.check); sent as Bearer or as the cookie it is
// refused as a bad proof is, and an unbound one sent as DPoP too. An
// unbound session as Bearer or cookie is resolved as it always was.
func (a *authn) resolve(c echo.Context) (principal, error) {
	r := c.Request()
	token, scheme := sessionToken(r)
	cookie, cerr := r.Cookie(a.cookies.Name())
	hasCookie := cerr == nil && cookie.Value != ""
	var p principal
	switch {
	case token != "" && hasCookie:
		return p, problem.New(problem.CodeBadRequest, "send the session cookie or a session token, not both")
	case token != "":
		p.id = token
	case hasCookie:
		id, err := a.cookies.ID(cookie.Value)
		if err != nil {
			return p, sessionRequired("the session cookie is not valid")
		}
		p.id, p.viaCookie = id, true
	default:
		return p, sessionRequired("log in first")
	}
	// The proof and the CSRF rule are checked before the session's idle
	// timeout slides: a request they refuse (a thief with the token and
	// not the key) does not keep the session alive.
	var refused error
	rec, err := a.sessions.LookupFor(r.Context(), p.id, func(rec session.Record) error {
		switch {
		case rec.JKT != "" && scheme == schemeDPoP:
			if err := a.dpop.check(c, p.id, rec.JKT); err != nil {
				refused = err
				return err
			}
		case rec.JKT != "" || scheme == schemeDPoP:
			refused = a.dpop.refuse(c, dpop.UseRequest, dpop.ReasonScheme)
			return refused
		}
		if p.viaCookie {
			if perr := a.checkCSRF(r); perr != nil {
				refused = perr
				return perr
			}
		}
		return nil
	})
	switch {
	case refused != nil:
		return p, refused
	case errors.Is(err, session.ErrNotFound):
		sr := sessionRequired("the session has ended; log in again")
		if scheme == schemeDPoP {
			sr.WWWAuthenticate = a.dpop.challenge("invalid_token")
		}
		return p, sr
	case err != nil:
		return p, problem.Wrap(problem.CodeSessionStoreUnavailable, "sessions cannot be checked right now", err)
	}
	p.rec = rec
	state(c).userHash = userHash(rec.UserID)
	return p, nil
}

// The session token's authorization schemes.
const (
	schemeBearer = "bearer"
	schemeDPoP   = "dpop" // RFC 9449 section 7.1
)

// sessionToken returns the session token of an "Authorization: Bearer" or
// "Authorization: DPoP" header, and which; "" without one.
func sessionToken(r *http.Request) (string, string) {
	h := r.Header.Get("Authorization")
	scheme := ""
	switch {
	case len(h) >= 7 && strings.EqualFold(h[:7], "bearer "):
		h, scheme = h[7:], schemeBearer
	case len(h) >= 5 && strings.EqualFold(h[:5], "dpop "):
		h, scheme = h[5:], schemeDPoP
	default:
		return "", ""
	}
	if t := strings.TrimSpace(h); t != "" {
		return t, scheme
	}
	return "", ""
}

func unsafeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// checkCSRF: a cookie-authenticated unsafe request must carry X-CSRF: 1,
// and its Origin, when present, must be public_url's or an allowed origin.
func (a *authn) checkCSRF(r *http.Request) *problem.Problem {
	if !unsafeMethod(r.Method) {
		return nil
	}
	if r.Header.Get("X-CSRF") != "1" {
		return problem.New(problem.CodeCSRFRejected, "cookie-authenticated requests that change state must send the header X-CSRF: 1")
	}
	if origin := r.Header.Get("Origin"); origin != "" && origin != a.publicOrigin && !slices.Contains(a.allowedOrigins, origin) {
		return problem.New(problem.CodeCSRFRejected, "the request's Origin is not allowed")
	}
	return nil
}

type sessionReply struct {
	UserID       string    `json:"userId"`
	SessionToken string    `json:"sessionToken,omitempty"`
	ExpiresAt    time.Time `json:"expiresAt"`
	// TokenType is the dev login's: DPoP when the session is bound to the
	// key of the login's proof, else Bearer.
	TokenType string `json:"tokenType,omitempty"`
}

// maxUserIDLen bounds a user id accepted by the dev login.
const maxUserIDLen = 256

// devLogin creates a session for any user id (auth.mode: dev only). With
// a DPoP proof (and session.mobile_dpop not off) the session is bound to
// its key, as a native app's, and no cookie is set: a bound session is
// never accepted as the cookie. Without one it is a browser's session,
// cookie and token alike.
func devLogin(d authDeps) echo.HandlerFunc {
	return func(c echo.Context) error {
		var in struct {
			UserID string `json:"userId"`
		}
		dec := json.NewDecoder(io.LimitReader(c.Request().Body, 4096))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			p := problem.Wrap(problem.CodeValidationError, `the body must be {"userId": "..."}`, err)
			p.Fields = []problem.Field{{Field: "userId", Message: "userId is required"}}
			return p
		}
		if msg := checkUserID(in.UserID); msg != "" {
			p := problem.New(problem.CodeValidationError, msg)
			p.Fields = []problem.Field{{Field: "userId", Message: msg}}
			return p
		}
		jkt, err := d.a.dpop.bind(c, false)
		if err != nil {
			return err
		}
		id, rec, err := startSession(c, d, session.New{UserID: in.UserID, Method: session.MethodDev, JKT: jkt}, jkt == "")
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, sessionReply{UserID: rec.UserID, SessionToken: id, ExpiresAt: d.sessions.ExpiresAt(rec).UTC(), TokenType: tokenType(jkt)})
	}
}

// startSession is every login's last step: the session a browser still
// carries ends (a new login never reuses an id: no fixation), a new one is
// created, counted, and, for a browser, set as the cookie.
func startSession(c echo.Context, d authDeps, n session.New, browser bool) (string, session.Record, error) {
	if browser {
		endOldSession(c, d.sessions, d.cookies)
	}
	id, rec, err := d.sessions.Create(c.Request().Context(), n)
	if err != nil {
		return "", rec, problem.Wrap(problem.CodeSessionStoreUnavailable, "sessions cannot be created right now", err)
	}
	if browser {
		ck, err := d.cookies.New(id)
		if err != nil {
			return "", rec, problem.Wrap(problem.CodeInternal, "the session cookie could not be made", err)
		}
		c.SetCookie(ck)
	}
	state(c).userHash = userHash(rec.UserID)
	d.observe.Login(sessionMethod(n.Method), login.OutcomeOK)
	return id, rec, nil
}

func checkUserID(id string) string {
	switch {
	case id == "":
		return "userId is required"
	case len(id) > maxUserIDLen:
		return "userId is longer than 256 bytes"
	case !utf8.ValidString(id):
		return "userId is not valid UTF-8"
	case strings.IndexFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0:
		return "userId holds a control character"
	}
	return ""
}

// sessionInfo answers who the caller is; never a token.
func sessionInfo(d authDeps) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := d.a.resolve(c)
		if err != nil {
			return err
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.JSON(http.StatusOK, sessionReply{UserID: p.rec.UserID, ExpiresAt: d.sessions.ExpiresAt(p.rec).UTC()})
	}
}

// methodsReply is GET /auth/methods' answer.
type methodsReply struct {
	Login   string        `json:"login"`
	Session *sessionReply `json:"session"`
}

// authMethods is GET /auth/methods: how this BFF signs users in (login:
// "dev" or "oidc") and the caller's session, null without one, so a page
// learns both in one request that answers 200 to a visitor who is not
// signed in and spends no /auth budget (authLimit). It needs no session and
// changes nothing but a live session's idle timeout, as any use does.
func authMethods(d authDeps, login string) echo.HandlerFunc {
	return func(c echo.Context) error {
		reply := methodsReply{Login: login}
		p, err := d.a.resolve(c)
		var perr *problem.Problem
		switch {
		case err == nil:
			reply.Session = &sessionReply{UserID: p.rec.UserID, ExpiresAt: d.sessions.ExpiresAt(p.rec).UTC()}
		case errors.As(err, &perr) && (perr.Code == problem.CodeSessionRequired || perr.Code == problem.CodeDPoPProofInvalid):
			// No session, an unreadable cookie or an ended session: signed
			// out; and so is a device-bound session without a valid proof
			// (the refusal is counted and logged all the same).
		default:
			return err
		}
		return c.JSON(http.StatusOK, reply)
	}
}

// logoutEverywhere is DELETE /auth/sessions: it ends every session of the
// caller's user, on every device and instance, and drops the user's cached
// upstream token; 204.
func logoutEverywhere(d authDeps) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := d.a.resolve(c)
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		ended, err := d.sessions.RevokeUser(ctx, p.rec.UserID)
		if err != nil {
			return problem.Wrap(problem.CodeSessionStoreUnavailable, "the sessions could not be ended right now", err)
		}
		d.observe.Revoked(session.ReasonUser, len(ended))
		_ = d.tokens.Invalidate(ctx, p.rec.UserID)
		c.SetCookie(d.cookies.Clear())
		return c.NoContent(http.StatusNoContent)
	}
}

// logout ends this session on every instance and clears the cookie. When
// it was the user's last session, their cached upstream token goes too.
// After an OpenID login, X-Logout-Url names the provider's RP-initiated
// logout.
func logout(d authDeps, logoutURL string) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := d.a.resolve(c)
		if err != nil {
			return err
		}
		ctx := c.Request().Context()
		if err := d.sessions.Delete(ctx, p.id); err != nil {
			return problem.Wrap(problem.CodeSessionStoreUnavailable, "the session could not be ended right now", err)
		}
		d.observe.Revoked(session.ReasonLogout, 1)
		dropTokensOfGoneUsers(ctx, d.sessions, d.tokens, []session.Info{{Record: p.rec}})
		c.SetCookie(d.cookies.Clear())
		if logoutURL != "" && p.rec.Method != session.MethodDev {
			c.Response().Header().Set("X-Logout-Url", logoutURL)
		}
		return c.NoContent(http.StatusNoContent)
	}
}
