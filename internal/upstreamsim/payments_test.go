package upstreamsim

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

func TestCreatePaymentValidation(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	tests := []struct {
		name string
		body any
		want []string
	}{
		{"paymentInformation not an object", map[string]any{"paymentInformation": "x"},
			[]string{`"paymentInformation" must be of type object`}},
		{"amount and currency missing", map[string]any{"paymentInformation": map[string]any{"merchantId": "m"}},
			[]string{`"paymentInformation.amount" is required`, `"paymentInformation.currency" is required`}},
		{"amount not positive", map[string]any{"paymentInformation": map[string]any{"amount": -1, "currency": "EUR", "merchantId": "m"}},
			[]string{`"paymentInformation.amount" must be a positive number`}},
		{"amount not a number", map[string]any{"paymentInformation": map[string]any{"amount": "ten", "currency": "EUR", "merchantId": "m"}},
			[]string{`"paymentInformation.amount" must be a number`}},
		{"currency length", map[string]any{"paymentInformation": map[string]any{"amount": "10.00", "currency": "EURO", "merchantId": "m"}},
			[]string{`"paymentInformation.currency" length must be 3 characters long`}},
		{"creditor iban missing", map[string]any{"paymentInformation": map[string]any{"amount": 1, "currency": "EUR", "creditorAccount": map[string]any{}}},
			[]string{`"paymentInformation.creditorAccount.iban" is required`}},
		{"providerIds not an array", map[string]any{"paymentInformation": map[string]any{"amount": 1, "currency": "EUR", "merchantId": "m"}, "providerIds": "x"},
			[]string{`"providerIds" must be an array`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do("POST", "/v2/payments", tok, tt.body)
			wantError(t, r, http.StatusBadRequest, typeValidationError, "")
			if got := messageList(t, r); !slices.Equal(got, tt.want) {
				t.Errorf("got problems %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("malformed JSON", func(t *testing.T) {
		wantError(t, h.do("POST", "/v2/payments", tok, `{"paymentInformation":`), http.StatusBadRequest, typeClientError, "")
	})
}

func TestCreatePaymentAccepted(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		edit func(b map[string]any)
	}{
		{"creditor account and sandbox provider", Options{}, func(map[string]any) {}},
		{"redirect url with a query string", Options{}, func(b map[string]any) {
			b["redirectUrl"] = "http://localhost:8080/payment-done?order=42"
		}},
		{"no providers but includeFakeProviders", Options{}, func(b map[string]any) {
			delete(b, "providerIds")
			b["includeFakeProviders"] = true
		}},
		{"real provider with production access", Options{ProductionAccess: true}, func(b map[string]any) {
			b["providerIds"] = []string{"revolut-lt"}
		}},
		{"amount as a string", Options{}, func(b map[string]any) {
			b["paymentInformation"].(map[string]any)["amount"] = "12.50"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			b := paymentBody("order 1")
			tt.edit(b)
			r := h.do("POST", "/v2/payments", h.token("u"), b)
			if r.status != http.StatusCreated {
				t.Fatalf("got status %d, want 201 (%s)", r.status, r.body)
			}
		})
	}
	t.Run("merchant payment", func(t *testing.T) {
		h := newHarness(t, Options{})
		tok := h.token("u")
		mid := h.do("GET", "/v2/merchants", tok, nil).json(t)["items"].([]any)[0].(map[string]any)["id"].(string)
		r := h.do("POST", "/v2/payments", tok, map[string]any{
			"paymentInformation": map[string]any{"amount": 3, "currency": "EUR", "merchantId": mid},
			"providerIds":        []string{ProviderSandbox}})
		if r.status != http.StatusCreated {
			t.Fatalf("got status %d, want 201 (%s)", r.status, r.body)
		}
		id := r.json(t)["id"].(string)
		items := h.do("GET", "/v2/payments?limit=1", tok, nil).json(t)["items"].([]any)
		if got := items[0].(map[string]any)["id"]; got != id {
			t.Errorf("newest payment: got %v, want %s (default sort is newest first)", got, id)
		}
	})
}

func TestPaymentLifecycle(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	id := h.do("POST", "/v2/payments", tok, paymentBody("order 2")).json(t)["id"].(string)
	status := func() string { return h.do("GET", "/v2/payments/"+id, tok, nil).json(t)["status"].(string) }
	if got := status(); got != statusInit {
		t.Fatalf("after create: got %s, want INIT", got)
	}
	r := h.do("POST", "/v2/pay/open-banking-init", tok, map[string]any{"providerId": ProviderSandbox, "paymentId": id})
	if r.status != http.StatusOK || r.json(t)["authorizationUrl"] == nil {
		t.Fatalf("init: got %d %s, want 200 with authorizationUrl", r.status, r.body)
	}
	if got := status(); got != statusPending {
		t.Fatalf("after init: got %s, want PENDING", got)
	}
	h.sim.Advance(59 * time.Second)
	if got := status(); got != statusPending {
		t.Fatalf("59s after init: got %s, want PENDING", got)
	}
	h.sim.Advance(time.Second)
	if got := status(); got != statusACSC {
		t.Fatalf("60s after init: got %s, want ACSC", got)
	}
	wantError(t, h.do("DELETE", "/v2/payments/"+id, tok, nil), http.StatusBadRequest, typeClientError, "")

	other := h.do("POST", "/v2/payments", tok, paymentBody("order 3")).json(t)["id"].(string)
	r = h.do("DELETE", "/v2/payments/"+other, tok, nil)
	if r.status != http.StatusOK || r.json(t)["status"] != statusCANC {
		t.Errorf("cancel: got %d %s, want 200 status CANC", r.status, r.body)
	}
	if r := h.do("DELETE", "/v2/payments/"+other, tok, nil); r.status != http.StatusOK {
		t.Errorf("cancel twice: got %d, want 200", r.status)
	}
	r = h.do("GET", "/v2/payments?status=CANC", tok, nil)
	for _, it := range r.json(t)["items"].([]any) {
		if it.(map[string]any)["status"] != statusCANC {
			t.Errorf("status filter: got %v, want only CANC", it)
		}
	}
}

func TestOpenBankingInit(t *testing.T) {
	inline := func(provider string) map[string]any {
		b := paymentBody("inline")
		return map[string]any{"providerId": provider, "paymentInformation": b["paymentInformation"]}
	}
	tests := []struct {
		name       string
		opts       Options
		body       map[string]any
		wantStatus int
		wantType   string
	}{
		{"inline payment at sandbox provider", Options{}, inline(ProviderSandbox), 200, ""},
		{"providerId missing", Options{}, map[string]any{"paymentId": "01ARZ3NDEKTSV4RRFFQ69G5FAV"}, 400, typeValidationError},
		{"neither paymentId nor paymentInformation", Options{}, map[string]any{"providerId": ProviderSandbox}, 400, typeValidationError},
		{"payment id not valid", Options{}, map[string]any{"providerId": ProviderSandbox, "paymentId": "nope"}, 400, typeClientError},
		{"invalid provider", Options{}, inline("atlantis-bank"), 400, typeClientError},
		{"sandbox gate", Options{}, inline("n26-de"), 400, typeClientError},
		{"real provider with production access", Options{ProductionAccess: true}, inline("n26-de"), 200, ""},
		{"provider down", Options{}, inline(ProviderDown), 400, typeProviderUnavailable},
		{"provider failing", Options{}, inline(ProviderFailing), 500, typeInternalError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			r := h.do("POST", "/v2/pay/open-banking-init", h.token("u"), tt.body)
			if tt.wantType == "" {
				if r.status != tt.wantStatus {
					t.Fatalf("got %d %s, want %d", r.status, r.body, tt.wantStatus)
				}
				return
			}
			wantError(t, r, tt.wantStatus, tt.wantType, "")
		})
	}
	t.Run("payment without providers allows sandbox only with includeFakeProviders", func(t *testing.T) {
		h := newHarness(t, Options{ProductionAccess: true})
		tok := h.token("u")
		b := paymentBody("x")
		delete(b, "providerIds")
		id := h.do("POST", "/v2/payments", tok, b).json(t)["id"].(string)
		wantError(t, h.do("POST", "/v2/pay/open-banking-init", tok, map[string]any{"providerId": ProviderSandbox, "paymentId": id}),
			http.StatusNotFound, typeClientError, "")
		r := h.do("POST", "/v2/pay/open-banking-init", tok, map[string]any{"providerId": ProviderSandbox, "paymentId": id, "includeFakeProviders": true})
		if r.status != http.StatusOK {
			t.Errorf("with includeFakeProviders: got %d %s, want 200", r.status, r.body)
		}
	})
}
