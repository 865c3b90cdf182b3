package edge

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/dpop"
	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/session"
)

// TokenInvalidator drops a user's cached upstream token everywhere.
type TokenInvalidator interface {
	Invalidate(ctx context.Context, userID string) error
}

// authDeps is what the session handlers share.
type authDeps struct {
	a        *authn
	sessions *session.Manager
	cookies  *session.Cookies // the session cookie
	tokens   TokenInvalidator
	observe  Observer
	log      *slog.Logger
}

// loginDeps adds the OpenID provider and the login binding cookie.
type loginDeps struct {
	authDeps
	prov *login.Provider
	// holds, when set, takes the approvals of held payments (step-up).
	holds   StepUps
	binding *session.Cookies // short-lived cookie binding the login state to the browser
	// perAddress bounds the logins a client starts (each stores a record).
	perAddress *addressLimits
}

// loginProblem maps the login package's errors.
func loginProblem(err error) *problem.Problem {
	var br *login.BadRequest
	switch {
	case errors.As(err, &br):
		return problem.Wrap(problem.CodeBadRequest, br.Reason, err)
	case errors.Is(err, login.ErrBadRequest):
		return problem.Wrap(problem.CodeBadRequest, "the login request is not acceptable", err)
	case errors.Is(err, login.ErrState):
		return problem.Wrap(problem.CodeLoginFailed, "the login is unknown, expired, already used, or was started in another browser; start again", err)
	case errors.Is(err, login.ErrProvider):
		return problem.Wrap(problem.CodeLoginFailed, "the identity provider did not complete the login; start again", err)
	case errors.Is(err, login.ErrInvalidGrant):
		return problem.Wrap(problem.CodeInvalidGrant, "the code is invalid, already used or expired, or the code verifier does not match", err)
	case errors.Is(err, login.ErrLogoutToken):
		return problem.Wrap(problem.CodeBadRequest, "the logout token is not valid", err)
	}
	return problem.Wrap(problem.CodeSessionStoreUnavailable, "logins cannot be processed right now", err)
}

// nativeClient reads a native app's part of a login or a step-up start
// (client=mobile, redirect_uri, code_challenge, state); nil for a browser's.
func nativeClient(q url.Values, mobileURIs []string) (*login.Mobile, error) {
	switch q.Get("client") {
	case "":
		return nil, nil
	case "mobile":
	default:
		return nil, problem.New(problem.CodeBadRequest, `client must be "mobile" or absent`)
	}
	if err := login.CheckRedirectURI(q.Get("redirect_uri"), mobileURIs); err != nil {
		return nil, loginProblem(err)
	}
	if err := login.CheckCodeChallenge(q.Get("code_challenge"), q.Get("code_challenge_method")); err != nil {
		return nil, loginProblem(err)
	}
	if err := login.CheckAppState(q.Get("state")); err != nil {
		return nil, loginProblem(err)
	}
	return &login.Mobile{RedirectURI: q.Get("redirect_uri"), CodeChallenge: q.Get("code_challenge"), AppState: q.Get("state")}, nil
}

// loginStart is GET /auth/login: the browser flow (?returnTo=/path) or the
// native app flow (?client=mobile&redirect_uri=…&code_challenge=…).
func loginStart(d loginDeps, mobileURIs []string) echo.HandlerFunc {
	return func(c echo.Context) error {
		q := c.QueryParams()
		mobile, err := nativeClient(q, mobileURIs)
		if err != nil {
			return err
		}
		returnTo, err := login.CheckReturnTo(q.Get("returnTo"))
		if err != nil {
			return loginProblem(err)
		}
		if err := d.perAddress.allow(c, limits.KindPendingLogins, d.perAddress.pendingLogins, login.StateTTL,
			"too many logins started from this address and not finished; retry in %d s"); err != nil {
			return err
		}
		authURL, state, err := d.prov.Begin(c.Request().Context(), returnTo, mobile)
		if err != nil {
			return loginProblem(err)
		}
		if err := bindLogin(c, d, state); err != nil {
			return err
		}
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.Redirect(http.StatusFound, authURL)
	}
}

// clientJWKS is GET /auth/jwks.json: the public keys of the BFF's client
// assertions (private_key_jwt), for the provider to fetch as the client's
// jwks_uri. Public by nature; cached briefly so that a rotated-in key is
// seen within minutes.
func clientJWKS(jwks []byte) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "public, max-age=300")
		return c.Blob(http.StatusOK, "application/jwk-set+json", jwks)
	}
}

// loginCallback is GET /auth/callback: the provider's reply.
func loginCallback(d loginDeps) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		q := c.QueryParams()
		c.Response().Header().Set("Cache-Control", "no-store")
		// The state must be the one this browser started (login CSRF).
		if len(q.Get("state")) > maxStateLen {
			d.observe.Login(login.MethodUnknown, login.OutcomeState)
			return loginProblem(login.ErrState)
		}
		binding := d.binding.Named(bindingSuffix(q.Get("state")))
		c.SetCookie(binding.Clear())
		bound := ""
		if ck, err := r.Cookie(binding.Name()); err == nil {
			bound, _ = binding.ID(ck.Value)
		} else if ck, err := r.Cookie(d.binding.Name()); err == nil {
			// A login started before the upgrade to one cookie per login,
			// under the one unsuffixed name. Remove this branch a release
			// later: logins live StateTTL (10 minutes). A login started on
			// an upgraded instance and finished on an old one during a
			// rolling upgrade answers LOGIN_FAILED "start again".
			c.SetCookie(d.binding.Clear())
			bound, _ = d.binding.ID(ck.Value)
		}
		if bound == "" || bound != q.Get("state") {
			d.observe.Login(login.MethodUnknown, login.OutcomeState)
			return loginProblem(login.ErrState)
		}
		res, err := d.prov.Callback(r.Context(), q.Get("state"), q.Get("code"), q.Get("iss"), q.Get("error"))
		if res.StepUp != nil {
			// A refusal counts only from the provider (its iss checked).
			return stepUpCallback(c, d, res, err, q.Get("error") != "" && !errors.Is(err, login.ErrIssuer))
		}
		method := session.MethodOIDC
		if res.Mobile != nil {
			method = session.MethodMobile
		}
		if err != nil {
			d.observe.Login(sessionMethod(method), login.OutcomeFailed)
			d.log.LogAttrs(r.Context(), slog.LevelWarn, "login failed", slog.String("requestId", requestID(c)), slog.String("reason", err.Error()))
			return loginProblem(err)
		}
		if res.Mobile != nil {
			loc, err := d.prov.IssueMobileCode(r.Context(), res)
			if err != nil {
				return loginProblem(err)
			}
			d.observe.Login(sessionMethod(method), login.OutcomeCodeIssued)
			return c.Redirect(http.StatusFound, loc)
		}
		if _, _, err := startSession(c, d.authDeps, session.New{UserID: res.UserID, Method: method, AuthTime: res.AuthTime, Sub: res.Sub, SID: res.SID}, true); err != nil {
			return err
		}
		return c.Redirect(http.StatusFound, res.ReturnTo)
	}
}

// maxPendingLogins bounds the logins one browser has under way at once (a
// tab each); starting one more drops the oldest's binding, whose callback
// then answers LOGIN_FAILED "start again". It keeps the Cookie header of a
// user who keeps clicking "sign in" small. maxBindingDeletions bounds the
// Set-Cookie headers one answer spends on deleting them (a sibling
// subdomain can plant cookies without the __Host- prefix, in development).
const (
	maxPendingLogins    = 4
	maxBindingDeletions = 8
)

// maxStateLen bounds the state a callback hashes; the BFF's own are 43
// characters.
const maxStateLen = 128

// bindingSuffix names a pending login's binding cookie after its state, so
// logins started in several tabs of one browser each keep their own and
// each can finish (one cookie for all would let only the last one finish).
// The state is random; a hash of it keeps the name short and token-safe.
func bindingSuffix(state string) string {
	sum := sha256.Sum256([]byte(state))
	return "_" + base64.RawURLEncoding.EncodeToString(sum[:6])
}

// evictBindings returns deletions for the binding cookies r carries beyond
// keep, so a new one can be added within maxPendingLogins: unreadable or
// expired ones first, then the oldest by issue time (the Cookie header's
// order is not one to rely on), at most maxBindingDeletions.
func evictBindings(r *http.Request, binding *session.Cookies, keep int) []*http.Cookie {
	type pending struct {
		codec  *session.Cookies
		issued time.Time // zero: unreadable
	}
	var all []pending
	for _, ck := range r.Cookies() {
		suffix, ok := strings.CutPrefix(ck.Name, binding.Name())
		if !ok || !strings.HasPrefix(suffix, "_") {
			continue
		}
		codec := binding.Named(suffix)
		issued, _ := codec.Issued(ck.Value)
		all = append(all, pending{codec, issued})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].issued.Before(all[j].issued) })
	var out []*http.Cookie
	for i := 0; i < len(all)-keep && len(out) < maxBindingDeletions; i++ {
		out = append(out, all[i].codec.Clear())
	}
	return out
}

// endOldSession ends the session a browser still carries when it logs in
// again: the new login gets a new id (no fixation) and the old one is gone.
func endOldSession(c echo.Context, sessions *session.Manager, cookies *session.Cookies) {
	if old, err := c.Request().Cookie(cookies.Name()); err == nil {
		if id, err := cookies.ID(old.Value); err == nil {
			_ = sessions.Delete(c.Request().Context(), id)
		}
	}
}

// mobileToken is POST /auth/mobile/token {code, codeVerifier}: the
// session of a native app, bound to its key when the request carries a
// DPoP proof (required with session.mobile_dpop: required), and answered
// with tokenType DPoP or Bearer.
func mobileToken(d loginDeps) echo.HandlerFunc {
	return func(c echo.Context) error {
		var in struct {
			Code         string `json:"code"`
			CodeVerifier string `json:"codeVerifier"`
		}
		if err := json.NewDecoder(io.LimitReader(c.Request().Body, 8192)).Decode(&in); err != nil {
			return problem.Wrap(problem.CodeBadRequest, `the body must be {"code": "...", "codeVerifier": "..."}`, err)
		}
		// The proof first: a refused one leaves the code to a retry with a
		// good proof (it is single use, and the verifier guards it).
		jkt, err := d.a.dpop.bind(c, true)
		if err != nil {
			return err
		}
		res, err := d.prov.RedeemMobileCode(c.Request().Context(), in.Code, in.CodeVerifier)
		if err == nil && res.StepUp != nil {
			err = login.ErrInvalidGrant // an approval's code is not a login
		}
		if err != nil {
			d.observe.Login(login.MethodMobile, login.OutcomeInvalidGrant)
			return loginProblem(err)
		}
		id, rec, err := startSession(c, d.authDeps, session.New{UserID: res.UserID, Method: session.MethodMobile, AuthTime: res.AuthTime, Sub: res.Sub, SID: res.SID, JKT: jkt}, false)
		if err != nil {
			return err
		}
		d.a.dpop.observe.NativeSession(dpop.BindingOf(jkt))
		return c.JSON(http.StatusOK, struct {
			SessionToken string `json:"sessionToken"`
			ExpiresIn    int64  `json:"expiresIn"`
			TokenType    string `json:"tokenType"`
		}{id, int64(d.sessions.ExpiresAt(rec).Sub(rec.CreatedAt) / time.Second), tokenType(jkt)})
	}
}

// backchannelMaxBody bounds a back-channel logout request: a logout token
// is a signed JWT of a few hundred bytes; 16 KiB leaves room for large keys.
const backchannelMaxBody = 16 << 10

// backchannelLogout is POST /auth/backchannel-logout (OpenID Connect
// Back-Channel Logout 1.0): the provider ends sessions by sid or sub.
func backchannelLogout(d loginDeps) echo.HandlerFunc {
	refusedLog := newSparseLog(d.log, slog.LevelWarn, "back-channel logout refused", 10*time.Second)
	return func(c echo.Context) error {
		r := c.Request()
		// Unauthenticated input: a form of one field, read whole into at most
		// backchannelMaxBody bytes, never multipart (which spills to /tmp).
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
			return problem.New(problem.CodeBadRequest, "send the logout_token as application/x-www-form-urlencoded")
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, backchannelMaxBody+1))
		if err != nil {
			return problem.Wrap(problem.CodeBadRequest, "the request body could not be read", err)
		}
		if len(body) > backchannelMaxBody {
			return problem.Newf(problem.CodeBodyTooLarge, "a logout request is at most %d bytes", backchannelMaxBody)
		}
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return problem.Wrap(problem.CodeBadRequest, "the form could not be read", err)
		}
		sub, sid, err := d.prov.VerifyLogoutToken(r.Context(), form.Get("logout_token"))
		if err != nil {
			refusedLog.write(c.Request().Context(), slog.String("reason", err.Error()))
			if over := d.perAddress.allow(c, limits.KindBackchannel, d.perAddress.backchannel, time.Minute,
				"too many refused logout requests from this address; retry in %d s"); over != nil {
				return over
			}
			return loginProblem(err)
		}
		ended, err := d.sessions.RevokeProvider(c.Request().Context(), sub, sid)
		if err != nil {
			return problem.Wrap(problem.CodeSessionStoreUnavailable, "sessions cannot be ended right now", err)
		}
		d.observe.Revoked(session.ReasonBackchannel, len(ended))
		dropTokensOfGoneUsers(c.Request().Context(), d.sessions, d.tokens, ended)
		return c.NoContent(http.StatusOK)
	}
}

// dropTokensOfGoneUsers drops the cached upstream token of each user who
// has no session left.
func dropTokensOfGoneUsers(ctx context.Context, sessions *session.Manager, tokens TokenInvalidator, ended []session.Info) {
	seen := map[string]bool{}
	for _, in := range ended {
		if seen[in.UserID] {
			continue
		}
		seen[in.UserID] = true
		if left, err := sessions.List(ctx, in.UserID); err == nil && len(left) == 0 {
			_ = tokens.Invalidate(ctx, in.UserID)
		}
	}
}

// sessionView is one entry of GET /auth/sessions; never a token.
type sessionView struct {
	ID         string    `json:"id"`
	Current    bool      `json:"current"`
	Method     string    `json:"method"`
	CreatedAt  time.Time `json:"createdAt"`
	LastSeenAt time.Time `json:"lastSeenAt"`
	AuthTime   time.Time `json:"authTime"`
	ExpiresAt  time.Time `json:"expiresAt"`
}

// listSessions is GET /auth/sessions: the caller's sessions.
func listSessions(d authDeps) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := d.a.resolve(c)
		if err != nil {
			return err
		}
		list, err := d.sessions.List(c.Request().Context(), p.rec.UserID)
		if err != nil {
			return problem.Wrap(problem.CodeSessionStoreUnavailable, "sessions cannot be listed right now", err)
		}
		cur := session.Handle(p.id)
		out := make([]sessionView, 0, len(list))
		for _, in := range list {
			out = append(out, sessionView{
				ID: in.Handle, Current: in.Handle == cur, Method: in.Method, CreatedAt: in.CreatedAt.UTC(),
				LastSeenAt: in.LastSeen.UTC(), AuthTime: in.AuthTime.UTC(), ExpiresAt: d.sessions.ExpiresAt(in.Record).UTC(),
			})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
		c.Response().Header().Set("Cache-Control", "no-store")
		return c.JSON(http.StatusOK, struct {
			Sessions []sessionView `json:"sessions"`
		}{out})
	}
}

// revokeSession is DELETE /auth/sessions/:id: end one of the caller's own
// sessions (another device's, or this one).
func revokeSession(d authDeps) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := d.a.resolve(c)
		if err != nil {
			return err
		}
		handle := c.Param("id")
		ok, err := d.sessions.DeleteForUser(c.Request().Context(), p.rec.UserID, handle)
		if err != nil {
			return problem.Wrap(problem.CodeSessionStoreUnavailable, "the session could not be ended right now", err)
		}
		if !ok {
			return problem.New(problem.CodeNotFound, "you have no session with this id")
		}
		d.observe.Revoked(session.ReasonUser, 1)
		dropTokensOfGoneUsers(c.Request().Context(), d.sessions, d.tokens, []session.Info{{Record: p.rec}})
		if handle == session.Handle(p.id) && p.viaCookie {
			c.SetCookie(d.cookies.Clear())
		}
		return c.NoContent(http.StatusNoContent)
	}
}
