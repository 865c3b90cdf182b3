package edge

import (
	"log/slog"

	"github.com/labstack/echo/v4"
)

// routes lists every public route in one place.
func routes(e *echo.Echo, d Deps) {
	e.Use(requestIDMiddleware(d.TrustedProxies), traceMiddleware(d.TraceparentFrom, d.TrustClientTraceparent), recoverMiddleware(d.Logger), accessLog(d.Logger, d.Observe), noStore(), preflight(d.AllowedOrigins))
	if len(d.AllowedOrigins) > 0 {
		e.Use(corsMiddleware(d.AllowedOrigins))
	}
	perAddress := &addressLimits{limiter: d.AuthLimit, auth: d.AuthPerMinute, backchannel: d.BackchannelPerMinute,
		pendingLogins: d.PendingLoginsPerAddress, v6Bits: d.IPv6Prefix, observe: d.Observe, log: d.Logger}
	if d.AuthLimit != nil {
		e.Use(authLimit(perAddress))
	}
	a := &authn{sessions: d.Sessions, cookies: d.Cookies, publicOrigin: d.PublicOrigin, allowedOrigins: d.AllowedOrigins}
	ad := authDeps{a: a, sessions: d.Sessions, cookies: d.Cookies, tokens: d.Tokens, observe: d.Observe, log: d.Logger}

	if d.DevLogin {
		e.POST("/auth/dev/login", devLogin(ad))
	}
	logoutURL := ""
	if d.Login != nil {
		ld := loginDeps{authDeps: ad, prov: d.Login, binding: d.LoginCookies, perAddress: perAddress}
		e.GET("/auth/login", loginStart(ld, d.MobileRedirectURIs))
		e.GET("/auth/callback", loginCallback(ld))
		e.POST("/auth/mobile/token", mobileToken(ld))
		e.POST("/auth/backchannel-logout", backchannelLogout(ld))
		logoutURL = d.Login.LogoutURL()
	}
	e.GET("/auth/session", sessionInfo(ad))
	e.GET("/auth/sessions", listSessions(ad))
	e.DELETE("/auth/sessions/:id", revokeSession(ad))
	e.DELETE("/auth/sessions", logoutEverywhere(ad))
	e.POST("/auth/logout", logout(ad, logoutURL))
	forward := api(a, d.Forwarder, d.Payments, d.Budget, d.Observe)
	e.Any("/api/*", forward)
	e.Any("/api", forward)
	if d.PaymentRecords != nil {
		e.GET("/bff/payments", listPayments(a, d.PaymentRecords, d.Budget, d.Observe))
		e.GET("/bff/payments/:key", getPayment(a, d.PaymentRecords, d.Budget, d.Observe))
	}
	if d.Streams != nil {
		d.Streams.pusher = newPusher(*d.Streams, d.Sessions)
		d.Streams.v6Bits = d.IPv6Prefix
		d.Streams.full = newSparseLog(d.Logger, slog.LevelWarn, "event streams refused: this instance holds as many as limits.streams_per_instance allows (docs/operations.md, Event streams)", fullLogEvery)
		e.GET("/bff/events", streamEvents(a, *d.Streams, d.Budget, d.Observe))
	}
	if d.Webhooks != nil {
		e.POST(d.Webhooks.Path, receiveWebhook(*d.Webhooks))
	}

	if d.Static != nil {
		app := d.Static.handler(d.Logger)
		e.GET("/*", app)
		e.HEAD("/*", app)
	}
}
