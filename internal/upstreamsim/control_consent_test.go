package upstreamsim

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestConsentControl(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	tok := h.token("u")
	pay, payLink := h.createPayment(tok, paymentBody("x"))
	conn, connLink := h.createConnection(tok, map[string]any{"providerIds": []string{ProviderSandbox}})
	ctl := func(path string, body any) reply { t.Helper(); return h.do("POST", "/_sim/"+path, "", body) }

	for _, st := range paymentStatuses {
		if r := ctl("payments/"+pay+"/status", map[string]any{"status": st}); r.status != http.StatusNoContent {
			t.Fatalf("payment %s: got %d %s, want 204", st, r.status, r.body)
		}
		h.wantStatus(tok, "/v2/payments/"+pay, st)
	}
	ctl("payments/"+pay+"/status", map[string]any{"status": statusRJCT})
	h.decide(payLink, "approve") // decided: the page changes nothing
	h.wantStatus(tok, "/v2/payments/"+pay, statusRJCT)
	ctl("payments/"+pay+"/status", map[string]any{"status": statusPending})
	h.sim.Advance(2 * settleAfter) // set by control, PENDING stays PENDING
	h.wantStatus(tok, "/v2/payments/"+pay, statusPending)

	ctl("connections/"+conn+"/status", map[string]any{"status": "EXPIRED"})
	h.wantStatus(tok, "/v2/connections/"+conn, "EXPIRED")
	h.decide(connLink, "approve")
	h.wantStatus(tok, "/v2/connections/"+conn, "EXPIRED")
	ctl("connections/"+conn+"/status", map[string]any{"status": connActive})
	if got := h.wantStatus(tok, "/v2/connections/"+conn, connActive); got["lastFetchedAt"] == nil || connectionData(t, h, tok, conn) == 0 {
		t.Errorf("made ACTIVE by control: got %v, want fresh data", got)
	}

	tests := []struct {
		name, path string
		body       any
		status     int
	}{
		{"unknown payment status", "payments/" + pay + "/status", map[string]any{"status": "DONE"}, 400},
		{"payment status missing", "payments/" + pay + "/status", map[string]any{}, 400},
		{"malformed body", "payments/" + pay + "/status", `{"status":`, 400},
		{"unknown payment", "payments/01ARZ3NDEKTSV4RRFFQ69G5FAV/status", map[string]any{"status": "ACSC"}, 404},
		{"unknown connection status", "connections/" + conn + "/status", map[string]any{"status": "ACSC"}, 400},
		{"unknown connection", "connections/nope/status", map[string]any{"status": "EXPIRED"}, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, ctl(tt.path, tt.body), tt.status, typeClientError, "")
		})
	}
	h.wantStatus(tok, "/v2/payments/"+pay, statusPending)

	if err := h.sim.SetPaymentStatus("u", pay, "ACCC"); err != nil {
		t.Fatal(err)
	}
	h.wantStatus(tok, "/v2/payments/"+pay, "ACCC")
	if err := h.sim.SetPaymentStatus("u", pay, "DONE"); err == nil {
		t.Error("SetPaymentStatus DONE: got nil, want an error")
	}
	if err := h.sim.SetPaymentStatus("u", "nope", statusACSC); err == nil {
		t.Error("SetPaymentStatus on an unknown payment: got nil, want an error")
	}
}

// A connection whose consent ran out, made ACTIVE by the control API (a
// reconnect without the browser), reads ACTIVE and can be refreshed: it
// gets a new consent from now. An unknown status is refused by both
// connection-status calls and by the Go method.
func TestControlReactivatesExpiredConnection(t *testing.T) {
	for _, path := range []string{"connections/{id}/status", "connection-status"} {
		t.Run(path, func(t *testing.T) {
			h := newHarness(t, Options{Control: true})
			tok := h.token("u")
			conns := seededConnections(t, h, tok)
			if err := h.sim.SetConnectionStatus("u", conns[connActive], connRevoked); err != nil { // so only the expired one can refresh
				t.Fatal(err)
			}
			expired := conns["EXPIRED"]
			body := map[string]any{"status": connActive}
			url := "/_sim/connections/" + expired + "/status"
			if path == "connection-status" {
				body = map[string]any{"userId": "u", "connectionId": expired, "status": connActive}
				url = "/_sim/connection-status"
			}
			wantNoContent(h, h.do("POST", url, "", body))
			got := h.wantStatus(tok, "/v2/connections/"+expired, connActive)
			if want := h.sim.Now().Add(consentDuration).Format(time.DateOnly); got["expiryDate"] != want || got["error"] != nil {
				t.Errorf("got %v, want a new consent until %s and no error", got, want)
			}
			if r := h.do("POST", "/chat/chat/connections/refresh", tok, nil); r.status != http.StatusOK {
				t.Errorf("refresh: got %d %s, want 200", r.status, r.body)
			}
			body["status"] = "DONE"
			wantError(t, h.do("POST", url, "", body), http.StatusBadRequest, typeClientError, "")
		})
	}
	if err := New(Options{}).SetConnectionStatus("u", "x", "DONE"); err == nil || !strings.Contains(err.Error(), "unknown connection status") {
		t.Errorf("SetConnectionStatus DONE: got %v, want an unknown-status error", err)
	}
}
