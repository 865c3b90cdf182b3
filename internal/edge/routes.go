package edge

import (
	"github.com/labstack/echo/v4"
)

// routes lists every public route in one place. It builds each handler
// from its dependencies; it starts nothing (the event streams' pusher is
// run by cmd/bff).
func routes(e *echo.Echo, d Deps) {
	log, observe := d.Observability.Logger, d.Observability.Observe
	cl, lim := d.Clients, d.Limits
	e.Use(requestIDMiddleware(cl.TrustedProxies), traceMiddleware(cl.TraceparentFrom, cl.TrustClientTraceparent), recoverMiddleware(log), accessLog(log, observe), noStore(), preflight(cl.AllowedOrigins))
	if len(cl.AllowedOrigins) > 0 {
		e.Use(corsMiddleware(cl.AllowedOrigins))
	}
	perAddress := &addressLimits{limiter: lim.PerAddress, auth: lim.AuthPerMinute, backchannel: lim.BackchannelPerMinute,
		pendingLogins: lim.PendingLoginsPerAddress, v6Bits: lim.IPv6Prefix, observe: observe, log: log}
	if lim.PerAddress != nil {
		e.Use(authLimit(perAddress))
	}
	a := &authn{sessions: d.Sessions.Manager, cookies: d.Sessions.Cookies, publicOrigin: cl.PublicOrigin, allowedOrigins: cl.AllowedOrigins,
		dpop: newBinder(d.DPoP, cl.PublicOrigin, perAddress, log)}
	ad := authDeps{a: a, sessions: d.Sessions.Manager, cookies: d.Sessions.Cookies, tokens: d.Sessions.Tokens, observe: observe, log: log}

	if d.Login.Dev {
		e.POST("/auth/dev/login", devLogin(ad))
	}
	logoutURL := ""
	if d.Login.OIDC != nil {
		ld := loginDeps{authDeps: ad, prov: d.Login.OIDC, binding: d.Login.Cookies, perAddress: perAddress, holds: d.Payments.StepUps}
		e.GET("/auth/login", loginStart(ld, d.Login.MobileRedirectURIs))
		if ld.holds != nil {
			e.GET("/auth/step-up", stepUpStart(ld, d.Login.MobileRedirectURIs))
			e.POST("/auth/step-up/token", stepUpToken(ld))
		}
		e.GET("/auth/callback", loginCallback(ld))
		e.POST("/auth/mobile/token", mobileToken(ld))
		e.POST("/auth/backchannel-logout", backchannelLogout(ld))
		if jwks := d.Login.OIDC.ClientJWKS(); jwks != nil {
			e.GET("/auth/jwks.json", clientJWKS(jwks))
		}
		logoutURL = d.Login.OIDC.LogoutURL()
	}
	if method := loginMethod(d.Login); method != "" {
		e.GET("/auth/methods", authMethods(ad, method))
	}
	e.GET("/auth/session", sessionInfo(ad))
	e.GET("/auth/sessions", listSessions(ad))
	e.DELETE("/auth/sessions/:id", revokeSession(ad))
	e.DELETE("/auth/sessions", logoutEverywhere(ad))
	e.POST("/auth/logout", logout(ad, logoutURL))
	forward := api(a, d.API.Forwarder, d.API.Payments, lim.Budget, observe)
	e.Any("/api/*", forward)
	e.Any("/api", forward)
	if d.Payments.Records != nil {
		e.GET("/bff/payments", listPayments(a, d.Payments.Records, lim.Budget, observe))
		e.GET("/bff/payments/:key", getPayment(a, d.Payments.Records, lim.Budget, observe))
		if jwks := d.Payments.Records.ReceiptJWKS(); jwks != nil {
			e.GET("/bff/payments/:key/receipt", getReceipt(a, d.Payments.Records, lim.Budget, observe))
			e.GET("/bff/receipts/jwks.json", receiptJWKS(jwks))
		}
	}
	if d.Payments.Streams != nil {
		e.GET("/bff/events", streamEvents(a, d.Payments.Streams, lim.IPv6Prefix, lim.Budget, observe, log))
	}
	if d.Webhooks != nil {
		e.POST(d.Webhooks.Path, receiveWebhook(*d.Webhooks, observe))
	}

	if d.Static != nil {
		app := d.Static.handler(log)
		e.GET("/*", app)
		e.HEAD("/*", app)
	}
}

// loginMethod is how l signs users in, as GET /auth/methods names it: "dev",
// "oidc", or "" for an edge with no login (tests).
func loginMethod(l Login) string {
	switch {
	case l.Dev:
		return "dev"
	case l.OIDC != nil:
		return "oidc"
	}
	return ""
}
