package edge

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/webhooks"
)

// StatusWebhooks is what the edge needs of payments.Service to take the
// upstream's payment-status webhooks.
type StatusWebhooks interface {
	StatusPushed(ctx context.Context, deliveryID string, u payments.StatusUpdate) (payments.Delivery, error)
}

var _ StatusWebhooks = (*payments.Service)(nil)

// Webhooks configures the webhook receiver (payments.webhook_path).
type Webhooks struct {
	Path     string
	Verifier *webhooks.Verifier
	Payments StatusWebhooks
	Now      func() time.Time // nil: time.Now
}

// maxWebhookBody bounds a webhook's body: a status change is a few hundred
// bytes.
const maxWebhookBody = 64 << 10

// receiveWebhook is POST {payments.webhook_path}: a Standard Webhooks
// payment-status webhook. Its signature is checked before anything else is
// read; a forged one is 403 FORBIDDEN, a stale or malformed one 400
// BAD_REQUEST, and none changes anything. A verified one is 204, whether
// or not the BFF knows the payment: also a webhook-id taken already (the
// sender's retry after our 2xx was lost), a type the BFF does not read and
// a status it does not know, which change nothing. Senders retry whatever is not 2xx and disable an
// endpoint that keeps failing, so neither may be refused. observe counts
// the webhooks answered here; payments those it stores.
func receiveWebhook(wh Webhooks, observe Observer) echo.HandlerFunc {
	if wh.Now == nil {
		wh.Now = time.Now
	}
	return func(c echo.Context) error {
		r := c.Request()
		body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, maxWebhookBody))
		if err != nil {
			observe.Webhook(WebhookMalformed)
			return problem.New(problem.CodeBadRequest, "the webhook's body is unreadable or over 64 KiB")
		}
		msg, err := wh.Verifier.Verify(r.Header, body, wh.Now())
		switch {
		case errors.Is(err, webhooks.ErrForged):
			observe.Webhook(WebhookForged)
			return problem.New(problem.CodeForbidden, "the webhook's signature does not verify under payments.webhook_secrets")
		case errors.Is(err, webhooks.ErrStale):
			observe.Webhook(WebhookStale)
			return problem.New(problem.CodeBadRequest, "the webhook's timestamp is more than 5 minutes from this server's clock")
		case err != nil:
			observe.Webhook(WebhookMalformed)
			return problem.New(problem.CodeBadRequest, "the webhook lacks a readable webhook-id, webhook-timestamp or webhook-signature")
		}
		st, err := webhooks.ParsePaymentStatus(body)
		switch {
		case errors.Is(err, webhooks.ErrUnknownType), errors.Is(err, webhooks.ErrUnknownStatus):
			observe.Webhook(WebhookIgnored)
			return c.NoContent(http.StatusNoContent)
		case err != nil:
			observe.Webhook(WebhookMalformed)
			return problem.New(problem.CodeBadRequest, "the webhook is not a payment.status_changed event with data.id, data.status and data.updatedAt")
		}
		// A replay is answered as the first delivery was.
		if _, err := wh.Payments.StatusPushed(r.Context(), msg.ID, payments.StatusUpdate{PaymentID: st.PaymentID, Status: st.Status, At: st.UpdatedAt}); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
}
