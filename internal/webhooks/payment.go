package webhooks

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// TypePaymentStatusChanged is the type of the webhook the simulator posts
// when a payment's status changes.
const TypePaymentStatusChanged = "payment.status_changed"

// Errors ParsePaymentStatus returns, wrapped; decide with errors.Is.
var (
	// ErrUnknownType is a well-formed payload of a type this package does
	// not read. A receiver may acknowledge it and move on: senders add
	// types.
	ErrUnknownType = errors.New("webhooks: unknown webhook type")
	// ErrUnknownStatus is a well-formed payment.status_changed with a
	// status not in the upstream's list: a status the upstream added. A
	// receiver acknowledges it and keeps what it has; refused, the sender
	// would retry it until it disabled the endpoint.
	ErrUnknownStatus = errors.New("webhooks: unknown payment status")
	// ErrPayload is a payload that is not the one its type promises.
	ErrPayload = errors.New("webhooks: malformed webhook payload")
)

// paymentStatuses are the upstream's payment statuses
// (docs/upstream-sim.md; PART only in sandbox).
var paymentStatuses = []string{
	"ACCC", "ACSC", "ACSP", "ACTC", "ACWC", "ACFC", "RCVD", "RJCT", "PATC",
	"PENDING", "ERROR", "CANC", "INIT", "PART",
}

// PaymentStatus is the news a payment.status_changed webhook carries: the
// payment's status as of UpdatedAt. Webhooks may arrive out of order across
// retries, so a receiver keeps the one with the latest UpdatedAt.
type PaymentStatus struct {
	PaymentID, Status string
	UpdatedAt         time.Time
}

// ParsePaymentStatus reads a verified payload in the Standard Webhooks shape
// {"type","timestamp","data"}:
//
//	{"type":"payment.status_changed","timestamp":"2026-03-10T12:01:00Z",
//	 "data":{"id":"01KY...","status":"ACSC","updatedAt":"2026-03-10T12:01:00Z"}}
//
// Another type is ErrUnknownType; a status not in the upstream's list is
// ErrUnknownStatus; a missing id, status or updatedAt, or an updatedAt that
// is not RFC 3339, is ErrPayload. Keys it does not know are ignored: senders add them.
func ParsePaymentStatus(body []byte) (PaymentStatus, error) {
	var in struct {
		Type string `json:"type"`
		Data *struct {
			ID        string `json:"id"`
			Status    string `json:"status"`
			UpdatedAt string `json:"updatedAt"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return PaymentStatus{}, fmt.Errorf("%w: not the JSON object of a webhook", ErrPayload)
	}
	switch {
	case in.Type == "":
		return PaymentStatus{}, fmt.Errorf("%w: no type", ErrPayload)
	case in.Type != TypePaymentStatusChanged:
		return PaymentStatus{}, fmt.Errorf("%w %q", ErrUnknownType, in.Type)
	case in.Data == nil || in.Data.ID == "" || in.Data.Status == "" || in.Data.UpdatedAt == "":
		return PaymentStatus{}, fmt.Errorf("%w: want data.id, data.status and data.updatedAt", ErrPayload)
	case !slices.Contains(paymentStatuses, in.Data.Status):
		return PaymentStatus{}, fmt.Errorf("%w %q", ErrUnknownStatus, in.Data.Status)
	}
	at, err := time.Parse(time.RFC3339Nano, in.Data.UpdatedAt)
	if err != nil {
		return PaymentStatus{}, fmt.Errorf("%w: data.updatedAt is not an RFC 3339 time", ErrPayload)
	}
	return PaymentStatus{PaymentID: in.Data.ID, Status: in.Data.Status, UpdatedAt: at}, nil
}
