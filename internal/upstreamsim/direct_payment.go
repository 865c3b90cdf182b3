package upstreamsim

import (
	"fmt"
	"net/http"
	"time"
)

// DirectPayment is a payment made for a user outside the API, as
// CreateDirectPayment and POST /_sim/payments answer it.
type DirectPayment struct {
	ID string `json:"id"`
	// PayURL is the payment's consent page, as POST /v2/payments gives it.
	// From CreateDirectPayment, with no publicURL setting, it is a path on
	// the simulator ("/consent/payments/..."): a Go call has no Host to
	// build it on.
	PayURL    string    `json:"payUrl"`
	CreatedAt time.Time `json:"createdAt"`
}

// PaymentError is a payment CreateDirectPayment refused: the status, error
// type and message that POST /v2/payments answers for the same body.
type PaymentError struct {
	Status        int
	Type, Message string
}

func (e *PaymentError) Error() string {
	return fmt.Sprintf("upstreamsim: payment refused: %d %s: %s", e.Status, e.Type, e.Message)
}

// CreateDirectPayment creates a payment for userID as if the user had made
// it through another channel (the bank's app, another integration), not
// through the API: the BFF under test never sent it. body is a
// POST /v2/payments body (paymentInformation, providerIds or providerId,
// redirectUrl, includeFakeProviders), read as declared JSON and checked by
// the same rules in the same order, so a refusal is a *PaymentError with
// the status, type and message the API would answer. The organization's
// plan is not checked (another channel is not an API key), faults do not
// apply, and the call is not an API request: it is not in Requests and
// not counted as an API creation (Mints and the request log are the
// API's). The payment is the user's like any other: GET /v2/payments
// lists it and PaymentRemittances counts it.
func (s *Server) CreateDirectPayment(userID string, body []byte) (DirectPayment, error) {
	m, e := parseJSONObject(body)
	if e != nil {
		return DirectPayment{}, paymentError(e)
	}
	p, e := s.directPayment(nil, userID, m)
	if e != nil {
		return DirectPayment{}, paymentError(e)
	}
	return p, nil
}

func paymentError(e *apiError) *PaymentError {
	return &PaymentError{Status: e.Status, Type: e.Type, Message: e.Message}
}

// directPayment validates the payment fields of m and creates the payment
// for userID at the simulator's time; r is the control request (nil from
// Go), whose Host payUrl is built on.
func (s *Server) directPayment(r *http.Request, userID string, m map[string]any) (DirectPayment, *apiError) {
	if userID == "" {
		return DirectPayment{}, newError(http.StatusBadRequest, typeClientError, "%s", isRequired("userId"))
	}
	req, e := parsePaymentFields(m)
	if e != nil {
		return DirectPayment{}, e
	}
	p, e := s.makePayment(userID, req, s.clock.exact())
	if e != nil {
		return DirectPayment{}, e
	}
	return DirectPayment{ID: p.ID, PayURL: s.consentURL(r, consentPayments, userID, p.ID), CreatedAt: p.CreatedAt}, nil
}

// directPaymentControl adds POST /_sim/payments to mux: CreateDirectPayment
// with the user named in the body. The keys are the control API's (any
// other is refused, naming it) but their values are checked as
// POST /v2/payments checks them, with its error shapes; 201 {id, payUrl,
// createdAt}. Content-Type is not checked, as nowhere in the control API.
func (s *Server) directPaymentControl(mux *http.ServeMux) {
	mux.HandleFunc("POST /_sim/payments", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			UserID string `json:"userId"`
			paymentKeys
		}
		if !decodeControl(w, r, &in) {
			return
		}
		p, e := s.directPayment(r, in.UserID, in.object())
		if e != nil {
			writeAPIError(w, e)
			return
		}
		writeJSON(w, http.StatusCreated, p)
	})
}

// paymentKeys are the keys of a POST /v2/payments body, as the control
// calls that take one read them: any JSON value, so that the values are
// checked by the API's rules with the API's errors (parsePaymentFields),
// not by the control API's decoder.
type paymentKeys struct {
	PaymentInformation   any `json:"paymentInformation"`
	ProviderIDs          any `json:"providerIds"`
	ProviderID           any `json:"providerId"`
	RedirectURL          any `json:"redirectUrl"`
	IncludeFakeProviders any `json:"includeFakeProviders"`
}

// object is the body k was read from, less its absent and null keys (the
// checker reads both as missing).
func (k paymentKeys) object() map[string]any {
	m := map[string]any{}
	for key, v := range map[string]any{
		"paymentInformation": k.PaymentInformation, "providerIds": k.ProviderIDs, "providerId": k.ProviderID,
		"redirectUrl": k.RedirectURL, "includeFakeProviders": k.IncludeFakeProviders,
	} {
		if v != nil {
			m[key] = v
		}
	}
	return m
}
