package edge

import (
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/proxy"
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
		res := f.Forward(c.Response(), r, proxy.Call{UserID: p.rec.UserID, RequestID: s.requestID, Path: path, ClientIP: c.RealIP()})
		if res.Route != "" {
			s.route = labels[res.Route]
		}
		s.upstreamStatus = res.UpstreamStatus
		return nil
	}
}
