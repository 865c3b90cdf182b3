package edge

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/session"
)

// PaymentRecords is what the edge needs of payments.Service to serve the
// caller's money-moving requests as a resource (GET /bff/payments).
type PaymentRecords interface {
	Records(ctx context.Context, userID, cursor string, limit int) (payments.Page, error)
	Record(ctx context.Context, userID, key string) (payments.Record, error)
	// Receipt is the signed receipt of one (a compact JWS), ReceiptJWKS
	// the receipts' public keys (nil: no receipts).
	Receipt(ctx context.Context, userID, key string) (string, error)
	ReceiptJWKS() []byte
}

var _ PaymentRecords = (*payments.Service)(nil)

// paymentsPrefix is where GET /bff/payments/{idempotencyKey} takes its key.
const paymentsPrefix = "/bff/payments/"

// authorized resolves the caller (cookie or session token; an unsafe
// method with the cookie needs X-CSRF) and spends one of the session's
// request budget: /api and /bff alike. The budget is keyed by the session
// id in this process only; what is shared through Redis is a hash of it.
func authorized(c echo.Context, a *authn, budget SessionBudget, observe Observer) (principal, error) {
	p, err := a.resolve(c)
	if err != nil {
		return p, err
	}
	if budget != nil {
		if ok, wait := budget.Allow(p.id); !ok {
			observe.Refused(limits.KindRequests)
			return p, problem.Later(problem.CodeRateLimited, wait, "this session is over its request budget; retry in %d s")
		}
	}
	return p, nil
}

// listPayments is GET /bff/payments: the caller's money-moving requests,
// newest first, ?limit= (1 to 100, default 20) at a time from ?cursor=.
func listPayments(a *authn, pay PaymentRecords, budget SessionBudget, observe Observer) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := authorized(c, a, budget, observe)
		if err != nil {
			return err
		}
		q := c.Request().URL.Query()
		limit := 0
		if v, ok := q["limit"]; ok {
			n, err := strconv.Atoi(v[0])
			if err != nil || n < 1 || len(v) > 1 {
				n = -1 // refused by Records, with the field named
			}
			limit = n
		}
		page, err := pay.Records(c.Request().Context(), p.rec.UserID, q.Get("cursor"), limit)
		if err != nil {
			return err
		}
		handle := session.Handle(p.id)
		for i := range page.Items {
			page.Items[i] = page.Items[i].ForSession(handle)
		}
		return c.JSON(http.StatusOK, page)
	}
}

// paymentKey is the Idempotency-Key in GET /bff/payments/{key}[suffix],
// from the escaped path, unescaped once: Echo's parameter is the raw
// path's only when Go kept one (RawPath), so a key with a '%' would
// otherwise be read twice unescaped.
func paymentKey(c echo.Context, suffix string) (string, error) {
	p, ok := strings.CutSuffix(strings.TrimPrefix(c.Request().URL.EscapedPath(), paymentsPrefix), suffix)
	key, err := url.PathUnescape(p)
	if !ok || err != nil {
		return "", problem.New(problem.CodeRouteNotFound, "no payment request of yours has this Idempotency-Key")
	}
	return key, nil
}

// getReceipt is GET /bff/payments/{idempotencyKey}/receipt: the signed
// receipt of one of the caller's money-moving requests, as a compact JWS
// (application/jose), offered as a download.
func getReceipt(a *authn, pay PaymentRecords, budget SessionBudget, observe Observer) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := authorized(c, a, budget, observe)
		if err != nil {
			return err
		}
		key, err := paymentKey(c, "/receipt")
		if err != nil {
			return err
		}
		jws, err := pay.Receipt(c.Request().Context(), p.rec.UserID, key)
		if err != nil {
			return err
		}
		h := c.Response().Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Disposition", `attachment; filename="payment-receipt.jws"`)
		return c.Blob(http.StatusOK, "application/jose", []byte(jws))
	}
}

// receiptJWKS is GET /bff/receipts/jwks.json: the public keys receipts
// are signed with, every one still published (a rotation keeps old
// receipts verifiable). Public; cached briefly.
func receiptJWKS(jwks []byte) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set("Cache-Control", "public, max-age=300")
		return c.Blob(http.StatusOK, "application/jwk-set+json", jwks)
	}
}

// getPayment is GET /bff/payments/{idempotencyKey}: one of the caller's
// money-moving requests; another user's key is 404 like an unused one.
func getPayment(a *authn, pay PaymentRecords, budget SessionBudget, observe Observer) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := authorized(c, a, budget, observe)
		if err != nil {
			return err
		}
		key, err := paymentKey(c, "")
		if err != nil {
			return err
		}
		rec, err := pay.Record(c.Request().Context(), p.rec.UserID, key)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, rec.ForSession(session.Handle(p.id)))
	}
}
