package edge

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
)

// api serves /api/<upstream path> for the caller's session: the calls that
// cost money through payments (which sends them through the proxy), every
// other through the proxy.
func api(a *authn, f *proxy.Forwarder, pay Payments, budget SessionBudget, observe Observer) echo.HandlerFunc {
	// The edge's route labels ("/api" + template), made once, not per request.
	labels := map[string]string{}
	for _, p := range f.Prefixes() {
		labels[p] = "/api" + p
	}
	return func(c echo.Context) error {
		r := c.Request()
		path := strings.TrimPrefix(r.URL.EscapedPath(), "/api")
		p, err := authorized(c, a, budget, observe)
		if err != nil {
			return err
		}
		s := state(c)
		call := proxy.Call{UserID: p.rec.UserID, RequestID: s.requestID, Path: path, ClientIP: c.RealIP()}
		switch r.Method { // only the requests payments may record (a payment, a change of a merchant) carry it; no hash on reads
		case http.MethodPost, http.MethodPut, http.MethodDelete:
			call.SessionRef = session.Handle(p.id)
		}
		var res proxy.Result
		t, bad := f.Target(call, r.Method)
		switch {
		case bad != nil:
			res, err = proxy.Result{Route: t.Route}, bad
		case pay != nil && pay.Handles(t, r.Method):
			res, err = pay.Serve(c.Response(), r, call, t)
			stepUpScheme(err, p.rec)
		default:
			res, err = f.Forward(c.Response(), r, call, t)
		}
		if res.Route != "" {
			s.route = labels[res.Route]
		}
		s.upstreamStatus = res.UpstreamStatus
		if res.Code != "" { // a stored refusal replayed
			s.errCode = res.Code
		}
		return err // rendered by errorHandler, like every other error
	}
}

// stepUpScheme names a device-bound session's own scheme in a
// STEP_UP_REQUIRED challenge (RFC 9470's error is the same in every
// scheme): the app answers it with a DPoP proof, not a Bearer token.
func stepUpScheme(err error, rec session.Record) {
	var p *problem.Problem
	if rec.JKT == "" || !errors.As(err, &p) || p.Code != problem.CodeStepUpRequired {
		return
	}
	if rest, ok := strings.CutPrefix(p.WWWAuthenticate, "Bearer "); ok {
		p.WWWAuthenticate = "DPoP " + rest
	}
}
