package upstreamsim

import (
	"net/http"
	"slices"
	"strings"
)

// consentControl adds the control calls that decide a consent without the
// browser, so a frontend can reach every outcome:
//
//	POST /_sim/payments/{paymentId}/status       {"status": "RJCT"}
//	POST /_sim/connections/{connectionId}/status {"status": "EXPIRED"}
//
// The payment or connection is found by id whatever user owns it. An
// unknown status is 400, an unknown id 404; success is 204. A connection
// made ACTIVE for the first time gets its data, as after a consent.
func (s *Server) consentControl(mux *http.ServeMux) {
	mux.HandleFunc("POST /_sim/payments/{paymentId}/status", func(w http.ResponseWriter, r *http.Request) {
		status, ok := controlStatus(w, r, paymentStatuses)
		if !ok {
			return
		}
		id := r.PathValue("paymentId")
		u, p := s.lockPayment(id)
		if u == nil {
			writeAPIError(w, notFound("Payment %s was not found", id))
			return
		}
		before := p.Status
		setPaymentStatus(p, status, s.clock.now())
		s.paymentChanged(p, before)
		u.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /_sim/connections/{connectionId}/status", func(w http.ResponseWriter, r *http.Request) {
		status, ok := controlStatus(w, r, connectionStatuses)
		if !ok {
			return
		}
		id := r.PathValue("connectionId")
		u, c := s.lockConnection(id)
		if u == nil {
			writeAPIError(w, notFound("Connection %s was not found", id))
			return
		}
		setConnectionStatus(u, c, status, s.clock.now())
		u.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
}

// controlStatus reads {"status": ...} and checks it is one of known. On
// failure it answers 400 and returns false.
func controlStatus(w http.ResponseWriter, r *http.Request, known []string) (string, bool) {
	var in struct {
		Status string `json:"status"`
	}
	if !decodeControl(w, r, &in) {
		return "", false
	}
	if !slices.Contains(known, in.Status) {
		controlError(w, `"status" must be one of [`+strings.Join(known, ", ")+`]`)
		return "", false
	}
	return in.Status, true
}
