package edge

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
)

// api forwards /api/<upstream path> for the caller's session.
func api(a *authn, f *proxy.Forwarder) echo.HandlerFunc {
	// The edge's route labels ("/api" + template), made once, not per request.
	labels := map[string]string{}
	for _, p := range f.Prefixes() {
		labels[p] = "/api" + p
	}
	return func(c echo.Context) error {
		r := c.Request()
		path := strings.TrimPrefix(r.URL.EscapedPath(), "/api")
		p, err := a.resolve(c)
		if err != nil {
			return err
		}
		s := state(c)
		call := proxy.Call{UserID: p.rec.UserID, RequestID: s.requestID, Path: path, ClientIP: c.RealIP()}
		if r.Method == http.MethodPost { // only money-moving requests record it; no hash on reads
			call.SessionRef = session.Handle(p.id)
		}
		res := f.Forward(c.Response(), r, call)
		if res.Route != "" {
			s.route = labels[res.Route]
		}
		s.upstreamStatus = res.UpstreamStatus
		return nil
	}
}
