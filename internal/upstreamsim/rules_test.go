package upstreamsim

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// seededConnections returns the user's connection ids by status.
func seededConnections(t *testing.T, h *harness, tok string) map[string]string {
	t.Helper()
	r := h.do("GET", "/v2/connections", tok, nil)
	out := map[string]string{}
	for _, it := range r.json(t)["items"].([]any) {
		c := it.(map[string]any)
		out[c["status"].(string)] = c["id"].(string)
	}
	return out
}

// TestRulesByCondition has one subtest per rule by condition of the
// upstream (docs/upstream-sim.md, "Payment body"), named after it.
func TestRulesByCondition(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		run  func(t *testing.T, h *harness, tok string)
	}{
		{name: "Request body fails validation: missing paymentInformation", run: func(t *testing.T, h *harness, tok string) {
			r := h.do("POST", "/v2/payments", tok, map[string]any{"providerIds": []string{ProviderSandbox}})
			wantError(t, r, 400, typeValidationError, `["\"paymentInformation\" is required"]`)
		}},
		{name: "Request body fails validation: missing clientSecret", run: func(t *testing.T, h *harness, tok string) {
			r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "userId": "u"})
			wantError(t, r, 400, typeClientError, `["\"clientSecret\" is required"]`)
		}},
		{name: "Neither a Merchant Id nor creditor info supplied", run: func(t *testing.T, h *harness, tok string) {
			r := h.do("POST", "/v2/payments", tok, map[string]any{
				"paymentInformation": map[string]any{"amount": 5, "currency": "EUR"}, "providerIds": []string{ProviderSandbox}})
			wantError(t, r, 400, typeValidationError, "")
			if got := messageList(t, r); len(got) != 1 {
				t.Errorf("got problems %q, want one", got)
			}
		}},
		{name: "Redirect url not on the allowed list", run: func(t *testing.T, h *harness, tok string) {
			b := paymentBody("x")
			b["redirectUrl"] = "https://evil.example.com/payment-done"
			wantError(t, h.do("POST", "/v2/payments", tok, b), 400, typeClientError, "")
		}},
		{name: "Creditor and debtor accounts are the same", run: func(t *testing.T, h *harness, tok string) {
			b := paymentBody("x")
			pi := b["paymentInformation"].(map[string]any)
			pi["debtorAccount"] = map[string]any{"iban": "fr76 3000 6000 0112 3456 7890 189"}
			wantError(t, h.do("POST", "/v2/payments", tok, b), 400, typeClientError, "")
		}},
		{name: "Payment ID not valid", run: func(t *testing.T, h *harness, tok string) {
			for _, id := range []string{"not-a-payment-id", "01KK5DZBTRPS880DX2B758GBP", "81KK5DZBTRPS880DX2B758GBPZ", "01KK5DZBTRPS880DX2B758GBPU"} {
				wantError(t, h.do("GET", "/v2/payments/"+id, tok, nil), 400, typeClientError, "")
				wantError(t, h.do("DELETE", "/v2/payments/"+id, tok, nil), 400, typeClientError, "")
			}
		}},
		{name: "Invalid provider", run: func(t *testing.T, h *harness, tok string) {
			b := paymentBody("x")
			b["providerIds"] = []string{"no-such-bank-sandbox"}
			wantError(t, h.do("POST", "/v2/payments", tok, b), 400, typeClientError, "")
		}},
		{name: "Required provider temporarily down", run: func(t *testing.T, h *harness, tok string) {
			b := paymentBody("x")
			b["providerIds"] = []string{ProviderDown}
			wantError(t, h.do("POST", "/v2/payments", tok, b), 400, typeProviderUnavailable, "")
		}},
		{name: "Production access not enabled and no sandbox provider included", run: func(t *testing.T, h *harness, tok string) {
			b := paymentBody("x")
			b["providerIds"] = []string{"n26-de"}
			wantError(t, h.do("POST", "/v2/payments", tok, b), 400, typeClientError, msgSandboxGate)
			delete(b, "providerIds")
			wantError(t, h.do("POST", "/v2/payments", tok, b), 400, typeClientError, msgSandboxGate)
		}},
		{name: "Token missing, malformed or expired; old secret used after rotation", run: func(t *testing.T, h *harness, tok string) {
			wantError(t, h.do("GET", "/v2/payments", "", nil), 401, "", "")
			wantError(t, h.do("GET", "/v2/payments", "garbage", nil), 401, "", "")
			h.sim.Advance(2 * time.Hour)
			wantError(t, h.do("GET", "/v2/payments", tok, nil), 401, "", "")
			h.sim.RotateSecret("rotated")
			r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "dev-secret", "userId": "u"})
			wantError(t, r, 401, "", "")
		}},
		{name: "On-demand refresh with fewer than 20 credits", opts: Options{Credits: 19}, run: func(t *testing.T, h *harness, tok string) {
			r := h.do("POST", "/chat/chat/connections/refresh", tok, nil)
			if r.status != http.StatusPaymentRequired {
				t.Fatalf("got status %d, want 402", r.status)
			}
			m := r.json(t)
			if m["status"] != "insufficient_credits" || m["cost"] != 20.0 || m["balance"] != 19.0 || m["message"] == nil {
				t.Errorf("got %v, want status insufficient_credits, cost 20, balance 19, a message", m)
			}
			if _, ok := m["type"]; ok {
				t.Errorf("got a type in %v, want none", m)
			}
		}},
		{name: "Free-plan key or free-plan connector", opts: Options{Plan: PlanFree}, run: func(t *testing.T, h *harness, tok string) {
			for _, p := range []string{"/v2/payments", "/v2/connections", "/v2/data/accounts", "/v2/providers", "/v2/merchants"} {
				wantError(t, h.do("GET", p, tok, nil), 403, typeNotAvailableOnPlan, "")
			}
			wantError(t, h.do("POST", "/v2/payments", tok, paymentBody("x")), 403, typeNotAvailableOnPlan, "")
			wantError(t, h.do("POST", "/chat/chat/connections/refresh", tok, nil), 403, typeNotAvailableOnPlan, "")
			conn := h.sim.IssueConnectorToken("u", []string{scopeMCPRead}, true)
			wantError(t, h.do("GET", "/v2/payments", conn, nil), 403, typeNotAvailableOnPlan, "")
		}},
		{name: "Organization over its corporate-account cap", opts: Options{AccountCap: 2}, run: func(t *testing.T, h *harness, tok string) {
			for i := range 2 {
				if r := h.do("POST", "/v2/connections", tok, map[string]any{"providerIds": []string{ProviderSandbox}}); r.status != 201 {
					t.Fatalf("connection %d: got status %d, want 201", i, r.status)
				}
			}
			r := h.do("POST", "/v2/connections", h.token("other-user"), map[string]any{"providerIds": []string{ProviderSandbox}})
			wantError(t, r, 403, typeAccountLimit, "")
		}},
		{name: "Connector token lacks mcp:read", run: func(t *testing.T, h *harness, tok string) {
			conn := h.sim.IssueConnectorToken("u", []string{"mcp:write"}, true)
			wantError(t, h.do("GET", "/v2/payments", conn, nil), 403, typeMCPForbidden, "")
		}},
		{name: "Connector user has no linked account", run: func(t *testing.T, h *harness, tok string) {
			conn := h.sim.IssueConnectorToken("u", []string{scopeMCPRead}, false)
			wantError(t, h.do("GET", "/v2/payments", conn, nil), 403, typeMCPNoServiceOrg, "")
		}},
		{name: "Payment does not exist", run: func(t *testing.T, h *harness, tok string) {
			wantError(t, h.do("GET", "/v2/payments/01ARZ3NDEKTSV4RRFFQ69G5FAV", tok, nil), 404, typeClientError, "")
			wantError(t, h.do("DELETE", "/v2/payments/01ARZ3NDEKTSV4RRFFQ69G5FAV", tok, nil), 404, typeClientError, "")
			r := h.do("POST", "/v2/pay/open-banking-init", tok, map[string]any{"providerId": ProviderSandbox, "paymentId": "01ARZ3NDEKTSV4RRFFQ69G5FAV"})
			wantError(t, r, 404, typeClientError, "")
		}},
		{name: "Merchant does not exist", run: func(t *testing.T, h *harness, tok string) {
			wantError(t, h.do("GET", "/v2/merchants/01ARZ3NDEKTSV4RRFFQ69G5FAV", tok, nil), 404, typeClientError, "")
			r := h.do("POST", "/v2/payments", tok, map[string]any{
				"paymentInformation": map[string]any{"amount": 5, "currency": "EUR", "merchantId": "01ARZ3NDEKTSV4RRFFQ69G5FAV"},
				"providerIds":        []string{ProviderSandbox}})
			wantError(t, r, 404, typeClientError, "")
		}},
		{name: "Provider not allowed for this payment", run: func(t *testing.T, h *harness, tok string) {
			r := h.do("POST", "/v2/payments", tok, paymentBody("x"))
			id := r.json(t)["id"].(string)
			r = h.do("POST", "/v2/pay/open-banking-init", tok, map[string]any{"providerId": "testbank-sandbox", "paymentId": id})
			wantError(t, r, 404, typeClientError, "")
		}},
		{name: "Unknown route", run: func(t *testing.T, h *harness, tok string) {
			for _, c := range []struct{ method, path string }{
				{"GET", "/v2/nothing"}, {"GET", "/v3/payments"}, {"PUT", "/v2/payments"}, {"GET", "/oauth/token"},
				{"POST", "/_sim/reset"}, {"GET", "/"},
			} {
				wantError(t, h.do(c.method, c.path, tok, nil), 404, typeClientError, "")
			}
		}},
		{name: "On-demand refresh when the user has no connection able to fetch", run: func(t *testing.T, h *harness, tok string) {
			conns := seededConnections(t, h, tok)
			if r := h.do("DELETE", "/v2/connections/"+conns["ACTIVE"], tok, nil); r.status != 204 {
				t.Fatalf("delete active connection: got status %d, want 204", r.status)
			}
			r := h.do("POST", "/chat/chat/connections/refresh", tok, nil)
			if r.status != http.StatusConflict {
				t.Fatalf("got status %d, want 409 (%s)", r.status, r.body)
			}
			m := r.json(t)
			if _, ok := m["type"]; ok || m["status"] != "no_refreshable_connections" || m["message"] == nil {
				t.Errorf("got %v, want status no_refreshable_connections, a message, no type", m)
			}
			if got := h.sim.Org().Credits; got != 100 {
				t.Errorf("got %d credits, want 100 (a 409 is not charged)", got)
			}
		}},
		{name: "On-demand refresh while one is already running", run: func(t *testing.T, h *harness, tok string) {
			if m := h.do("POST", "/chat/chat/connections/refresh", tok, nil).json(t); m["status"] != "accepted" {
				t.Fatalf("first refresh: got %v, want accepted", m)
			}
			r := h.do("POST", "/chat/chat/connections/refresh", tok, nil)
			if r.status != 200 || r.json(t)["status"] != "already_running" {
				t.Errorf("got %d %s, want 200 already_running", r.status, r.body)
			}
			if got := h.sim.Org().Credits; got != 80 {
				t.Errorf("got %d credits, want 80 (charged once)", got)
			}
		}},
		{name: "Delete of a Connection that is still locked", run: func(t *testing.T, h *harness, tok string) {
			id := h.do("POST", "/v2/connections", tok, map[string]any{"providerIds": []string{ProviderSandbox}}).json(t)["id"].(string)
			r := h.do("DELETE", "/v2/connections/"+id, tok, nil)
			if r.status != http.StatusLocked || string(r.body) != msgLocked || r.header.Get("Content-Type") != "text/plain; charset=utf-8" {
				t.Errorf("got %d %q (%s), want 423 %q text/plain", r.status, r.body, r.header.Get("Content-Type"), msgLocked)
			}
		}},
		{name: "Unexpected server or provider failure", run: func(t *testing.T, h *harness, tok string) {
			b := paymentBody("x")
			b["providerIds"] = []string{ProviderFailing}
			wantError(t, h.do("POST", "/v2/payments", tok, b), 500, typeInternalError, "PROVIDER_ERROR")
		}},
		{name: "Connector access cannot be verified right now", run: func(t *testing.T, h *harness, tok string) {
			h.sim.SetConnectorVerificationDown(true)
			conn := h.sim.IssueConnectorToken("u", []string{scopeMCPRead}, true)
			wantError(t, h.do("GET", "/v2/payments", conn, nil), 503, typeMCPUnavailable, "")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			tt.run(t, h, h.token("u"))
		})
	}
}

// TestPaymentOutcomesAre2xx checks that RJCT, CANC and ERROR are payment
// statuses in 2xx replies, never HTTP errors.
func TestPaymentOutcomesAre2xx(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	for _, want := range []string{statusRJCT, statusCANC, statusERROR, statusInit} {
		t.Run(want, func(t *testing.T) {
			r := h.do("POST", "/v2/payments", tok, paymentBody("invoice 7 "+want))
			if want == statusInit {
				r = h.do("POST", "/v2/payments", tok, paymentBody("invoice 7"))
			}
			if r.status != http.StatusCreated {
				t.Fatalf("create: got status %d, want 201", r.status)
			}
			m := r.json(t)
			if len(m) != 2 || m["id"] == nil || m["payUrl"] == nil {
				t.Errorf("got create reply %v, want {id, payUrl}", m)
			}
			id := m["id"].(string)
			if got := h.do("GET", "/v2/payments/"+id, tok, nil).json(t)["status"]; got != want {
				t.Errorf("GET: got status %v, want %s", got, want)
			}
			r = h.do("POST", "/v2/pay/open-banking-init", tok, map[string]any{"providerId": ProviderSandbox, "paymentId": id})
			if r.status != http.StatusOK {
				t.Fatalf("init: got HTTP %d, want 200 (%s)", r.status, r.body)
			}
			wantInit := want
			if want == statusInit {
				wantInit = statusPending
			}
			if got := r.json(t)["status"]; got != wantInit {
				t.Errorf("init: got status %v, want %s", got, wantInit)
			}
		})
	}
	t.Run("seeded payments carry every outcome", func(t *testing.T) {
		var got []string
		for _, it := range h.do("GET", "/v2/payments?limit=100", h.token("seeded"), nil).json(t)["items"].([]any) {
			got = append(got, it.(map[string]any)["status"].(string))
		}
		for _, want := range []string{statusRJCT, statusCANC, statusERROR, statusACSC, statusPending} {
			if !slices.Contains(got, want) {
				t.Errorf("got seeded statuses %v, want %s among them", got, want)
			}
		}
	})
}
