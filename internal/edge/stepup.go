package edge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/session"
)

// StepUps is what the edge needs of payments.Service for payments the user
// approves (docs/payments.md, "Payments the user approves"): the held
// payment a step-up reference names, its approval, and its end when the
// user cancels.
type StepUps interface {
	HeldPayment(ctx context.Context, ref string) (payments.Hold, *problem.Problem)
	Approve(ctx context.Context, ref, userID, sessionRef string, a payments.Approval) (payments.Record, *problem.Problem)
	DeclineHold(ctx context.Context, ref, userID, sessionRef string) (payments.Declined, error)
}

// stepUpStart is GET /auth/step-up?payment=<ref>: the approval of a held
// payment starts here. A browser adds returnTo=/path and carries the
// session that made the payment; a native app adds the parameters of its
// login (client=mobile, redirect_uri, code_challenge, state) and proves
// its session when it redeems the code (stepUpToken).
func stepUpStart(d loginDeps, mobileURIs []string) echo.HandlerFunc {
	return func(c echo.Context) error {
		q := c.QueryParams()
		c.Response().Header().Set("Cache-Control", "no-store")
		ref := q.Get("payment")
		if ref == "" {
			return problem.New(problem.CodeBadRequest, "payment is required: open the stepUpUrl of the STEP_UP_REQUIRED answer")
		}
		mobile, err := nativeClient(q, mobileURIs)
		if err != nil {
			return err
		}
		returnTo, err := login.CheckReturnTo(q.Get("returnTo"))
		if err != nil {
			return loginProblem(err)
		}
		hold, p := d.holds.HeldPayment(c.Request().Context(), ref)
		if p != nil {
			return p
		}
		hint := ""
		if mobile == nil {
			// A browser's approval starts from the session that made the
			// payment, and ends in it (the callback checks it again).
			pr, err := d.a.resolve(c)
			if err != nil {
				return err
			}
			if session.Handle(pr.id) != hold.SessionRef {
				return problem.New(problem.CodeNotFound, "no payment of this session waits for an approval under this reference")
			}
			hint = pr.rec.Sub
		}
		if err := d.perAddress.allow(c, limits.KindPendingLogins, d.perAddress.pendingLogins, login.StateTTL,
			"too many logins started from this address and not finished; retry in %d s"); err != nil {
			return err
		}
		authURL, state, err := d.prov.BeginStepUp(c.Request().Context(), login.StepUp{
			Ref: ref, SessionRef: hold.SessionRef, LoginHint: hint, ACRValues: hold.ACRValues, MaxAge: hold.MaxAge, Details: hold.Details,
		}, returnTo, mobile)
		if err != nil {
			return loginProblem(err)
		}
		if err := bindLogin(c, d, state); err != nil {
			return err
		}
		d.observe.Login(login.MethodStepUp, login.OutcomeStarted)
		return c.Redirect(http.StatusFound, authURL)
	}
}

// stepUpCallback ends a step-up at the callback: the provider's answer,
// already verified as a login's (res, err). A browser's approval is
// checked and the payment sent here; a native app's gets a one-time code
// to redeem with its session (stepUpToken).
func stepUpCallback(c echo.Context, d loginDeps, res login.Result, err error, providerRefused bool) error {
	r := c.Request()
	su, holds := res.StepUp, d.holds
	if holds == nil {
		return problem.New(problem.CodeNotFound, "payments are not held for approval here")
	}
	if err != nil {
		d.observe.Login(login.MethodStepUp, login.OutcomeFailed)
		d.log.LogAttrs(r.Context(), slog.LevelWarn, "a payment approval did not complete", slog.String("requestId", requestID(c)), slog.String("reason", err.Error()))
		if !errors.Is(err, login.ErrProvider) || !providerRefused {
			// Not the provider's refusal (an exchange or a token that
			// failed, a nonce that did not match): the hold stays, and
			// the user may approve again. A browser goes back to the app
			// (stepUp=failed: the payment still waits); a native app's
			// browser, which has no app page to go to, gets the error.
			if res.Mobile == nil && res.ReturnTo != "" {
				return c.Redirect(http.StatusFound, withQuery(res.ReturnTo, url.Values{"stepUp": {string(login.OutcomeFailed)}}))
			}
			return loginProblem(err)
		}
		// The provider refused: the user cancelled, or could not reach
		// the class asked for. The payment is declined, never sent, by the
		// session that made it: a browser's here, a native app's when it
		// redeems the code that carries the refusal (whoever else started
		// the approval with the payment's reference cannot decline it).
		if res.Mobile != nil {
			su.Refused = true
			loc, err := d.prov.IssueMobileCode(r.Context(), res)
			if err != nil {
				return loginProblem(err)
			}
			return c.Redirect(http.StatusFound, withQuery(loc, url.Values{"error": {"access_denied"}}))
		}
		outcome := login.OutcomeFailed
		if pr, perr := d.a.resolve(c); perr == nil {
			if _, err := holds.DeclineHold(r.Context(), su.Ref, pr.rec.UserID, session.Handle(pr.id)); err == nil {
				outcome = login.OutcomeDeclined
			}
		}
		return c.Redirect(http.StatusFound, withQuery(res.ReturnTo, url.Values{"stepUp": {string(outcome)}}))
	}
	if res.Mobile != nil {
		loc, err := d.prov.IssueMobileCode(r.Context(), res)
		if err != nil {
			return loginProblem(err)
		}
		d.observe.Login(login.MethodStepUp, login.OutcomeCodeIssued)
		return c.Redirect(http.StatusFound, loc)
	}
	pr, perr := d.a.resolve(c)
	if perr != nil {
		return perr
	}
	rec, p := holds.Approve(r.Context(), su.Ref, pr.rec.UserID, session.Handle(pr.id), approval(c, res))
	outcome := stepUpOutcome(p)
	d.observe.Login(login.MethodStepUp, outcome)
	v := url.Values{"stepUp": {string(outcome)}}
	if p == nil {
		v.Set("payment", rec.Key)
	}
	return c.Redirect(http.StatusFound, withQuery(res.ReturnTo, v))
}

// stepUpToken is POST /auth/step-up/token {code, codeVerifier}: a native
// app redeems the one-time code of its approval, in the session that made
// the payment, and gets the payment's record after its send.
func stepUpToken(d loginDeps) echo.HandlerFunc {
	return func(c echo.Context) error {
		pr, err := d.a.resolve(c)
		if err != nil {
			return err
		}
		var in struct {
			Code         string `json:"code"`
			CodeVerifier string `json:"codeVerifier"`
		}
		if err := json.NewDecoder(io.LimitReader(c.Request().Body, 8192)).Decode(&in); err != nil {
			return problem.Wrap(problem.CodeBadRequest, `the body must be {"code": "...", "codeVerifier": "..."}`, err)
		}
		res, err := d.prov.RedeemMobileCode(c.Request().Context(), in.Code, in.CodeVerifier)
		if err == nil && res.StepUp == nil {
			err = login.ErrInvalidGrant // a login's code is not an approval
		}
		if err != nil {
			d.observe.Login(login.MethodStepUp, login.OutcomeInvalidGrant)
			return loginProblem(err)
		}
		if res.StepUp.Refused {
			// The user cancelled: the payment is declined, in its session.
			declined, err := d.holds.DeclineHold(c.Request().Context(), res.StepUp.Ref, pr.rec.UserID, session.Handle(pr.id))
			if err != nil {
				d.observe.Login(login.MethodStepUp, login.OutcomeFailed)
				return err
			}
			d.observe.Login(login.MethodStepUp, login.OutcomeDeclined)
			// The decline's answer is the refusal a repeat of the payment's
			// key now gets: 403 STEP_UP_DECLINED, written as an answer.
			answer := declined.Answer()
			s := state(c)
			s.errCode = answer.Code
			problem.Write(c.Response(), answer, s.requestID)
			return nil
		}
		rec, p := d.holds.Approve(c.Request().Context(), res.StepUp.Ref, pr.rec.UserID, session.Handle(pr.id), approval(c, res))
		d.observe.Login(login.MethodStepUp, stepUpOutcome(p))
		if p != nil {
			return p
		}
		return c.JSON(http.StatusOK, struct {
			Payment payments.Record `json:"payment"`
		}{rec})
	}
}

// approval is what the provider proved, as payments checks it.
func approval(c echo.Context, res login.Result) payments.Approval {
	return payments.Approval{UserID: res.UserID, ACR: res.StepUp.ACR, AuthTime: res.AuthTime, Details: res.StepUp.Details,
		RequestID: requestID(c), ClientIP: c.RealIP()}
}

// stepUpOutcome names an approval's end for the app (the callback's
// stepUp parameter) and the metrics, by the same words.
func stepUpOutcome(p *problem.Problem) login.Outcome {
	switch {
	case p == nil:
		return login.OutcomeApproved
	case p.Code == problem.CodeStepUpDeclined:
		return login.OutcomeDeclined
	}
	return login.OutcomeFailed
}

// withQuery adds v to a same-origin path (returnTo).
func withQuery(path string, v url.Values) string {
	u, err := url.Parse(path)
	if err != nil {
		return "/"
	}
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// bindLogin binds a started login (or step-up) to this browser: the
// callback finishes only the login whose binding cookie it carries.
func bindLogin(c echo.Context, d loginDeps, state string) error {
	for _, stale := range evictBindings(c.Request(), d.binding, maxPendingLogins-1) {
		c.SetCookie(stale)
	}
	ck, err := d.binding.Named(bindingSuffix(state)).New(state)
	if err != nil {
		return problem.Wrap(problem.CodeInternal, "the login could not be started", err)
	}
	ck.MaxAge = int(login.StateTTL / time.Second)
	c.SetCookie(ck)
	return nil
}
