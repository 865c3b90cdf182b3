package upstreamsim

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// directBody is body for POST /_sim/payments: a payment body with the user.
func directBody(user string, payment map[string]any) map[string]any {
	out := map[string]any{"userId": user}
	for k, v := range payment {
		out[k] = v
	}
	return out
}

// apiPaymentPosts counts the payment creations the request log holds.
func apiPaymentPosts(s *Server) int {
	n := 0
	for _, rq := range s.Requests() {
		if rq.Method == "POST" && rq.Path == "/v2/payments" {
			n++
		}
	}
	return n
}

// A payment made for a user outside the API: the user holds it and the API
// shows it, but nothing records it as a request to the API.
func TestDirectPaymentControl(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	h.sim.Advance(90 * time.Minute)
	tok := h.token("alice")
	mintsBefore, logBefore := h.sim.TotalMints(), len(h.sim.Requests())
	ownBefore := len(h.sim.PaymentRemittances("alice"))

	r := h.do("POST", "/_sim/payments", "", directBody("alice", paymentBody("Order outside")))
	if r.status != http.StatusCreated {
		t.Fatalf("POST /_sim/payments: got %d %s, want 201", r.status, r.body)
	}
	var got DirectPayment
	if err := json.Unmarshal(r.body, &got); err != nil {
		t.Fatal(err)
	}
	if keys := slices.Sorted(maps.Keys(r.json(t))); !slices.Equal(keys, []string{"createdAt", "id", "payUrl"}) {
		t.Errorf("got keys %v, want [createdAt id payUrl]", keys)
	}
	if !got.CreatedAt.Equal(h.sim.Now()) {
		t.Errorf("got createdAt %v, want the simulator's time %v", got.CreatedAt, h.sim.Now())
	}
	if want := h.url + "/consent/payments/" + got.ID + "?token="; !strings.HasPrefix(got.PayURL, want) {
		t.Errorf("got payUrl %q, want it to start with %q", got.PayURL, want)
	}

	if n := len(h.sim.Requests()); n != logBefore {
		t.Errorf("got %d requests in the log, want %d: a direct payment is no API request", n, logBefore)
	}
	if n := h.sim.TotalMints(); n != mintsBefore {
		t.Errorf("got %d mints, want %d", n, mintsBefore)
	}
	if n := apiPaymentPosts(h.sim); n != 0 {
		t.Errorf("got %d POST /v2/payments in the log, want 0", n)
	}
	if n := len(h.sim.PaymentRemittances("alice")); n != ownBefore+1 {
		t.Errorf("got %d payments held by alice, want %d", n, ownBefore+1)
	}
	if n := len(h.sim.PaymentRemittances("bob")); n != len(New(Options{Now: fixedClock()}).PaymentRemittances("bob")) {
		t.Errorf("bob holds %d payments, want only his seeded ones", n)
	}

	// The user's own API sees it like any other payment, payUrl included.
	p := h.do("GET", "/v2/payments/"+got.ID, tok, nil)
	if p.status != http.StatusOK {
		t.Fatalf("GET the direct payment: got %d %s, want 200", p.status, p.body)
	}
	m := p.json(t)
	if m["status"] != statusInit || m["payUrl"] != got.PayURL || m["createdAt"] != got.CreatedAt.Format(time.RFC3339) {
		t.Errorf("got %s, want status INIT, payUrl %s and createdAt %s", p.body, got.PayURL, got.CreatedAt.Format(time.RFC3339))
	}
	if rem := m["paymentInformation"].(map[string]any)["remittanceInformation"]; rem != "Order outside" {
		t.Errorf("got remittanceInformation %v, want Order outside", rem)
	}
}

// The direct payment applies POST /v2/payments's rules and answers its
// errors: the same body gets the same status and body from both.
func TestDirectPaymentRefusesAsTheAPI(t *testing.T) {
	with := func(edit func(pi, body map[string]any)) map[string]any {
		body := paymentBody("Order 1")
		edit(body["paymentInformation"].(map[string]any), body)
		return body
	}
	tests := []struct {
		name     string
		body     map[string]any
		wantCode int
		wantType string
	}{
		{"paymentInformation missing", with(func(_, b map[string]any) { delete(b, "paymentInformation") }), 400, typeValidationError},
		{"amount not a number", with(func(pi, _ map[string]any) { pi["amount"] = "lots" }), 400, typeValidationError},
		{"providerIds not an array", with(func(_, b map[string]any) { b["providerIds"] = "demobank-sandbox" }), 400, typeValidationError},
		{"neither merchant nor creditor", with(func(pi, _ map[string]any) { delete(pi, "creditorAccount") }), 400, typeValidationError},
		{"redirect url not allowed", with(func(_, b map[string]any) { b["redirectUrl"] = "https://evil.example/x" }), 400, typeClientError},
		{"unknown provider", with(func(_, b map[string]any) { b["providerIds"] = []string{"no-such-bank"} }), 400, typeClientError},
		{"sandbox gate", with(func(_, b map[string]any) { b["providerIds"] = []string{"hapoalim"} }), 400, typeClientError},
		{"unknown merchant", with(func(pi, _ map[string]any) {
			delete(pi, "creditorAccount")
			pi["merchantId"] = "01KY12900GPN7T3N1FPMPK309R"
		}), 404, typeClientError},
		{"creditor is debtor", with(func(pi, _ map[string]any) { pi["debtorAccount"] = pi["creditorAccount"] }), 400, typeClientError},
		{"provider down", with(func(_, b map[string]any) { b["providerIds"] = []string{ProviderDown} }), 400, typeProviderUnavailable},
		{"provider failing", with(func(_, b map[string]any) { b["providerIds"] = []string{ProviderFailing} }), 500, typeInternalError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{Control: true})
			tok := h.token("alice")
			held := len(h.sim.PaymentRemittances("alice"))
			api := h.do("POST", "/v2/payments", tok, tt.body)
			direct := h.do("POST", "/_sim/payments", "", directBody("alice", tt.body))
			wantError(t, direct, tt.wantCode, tt.wantType, "")
			if direct.status != api.status || string(direct.body) != string(api.body) {
				t.Errorf("got %d %s, want what POST /v2/payments answers: %d %s", direct.status, direct.body, api.status, api.body)
			}
			body, _ := json.Marshal(tt.body)
			_, err := h.sim.CreateDirectPayment("alice", body)
			var pe *PaymentError
			if !errors.As(err, &pe) {
				t.Fatalf("CreateDirectPayment: got error %v, want a *PaymentError", err)
			}
			if pe.Status != api.status || pe.Type != api.json(t)["type"] || pe.Message != api.json(t)["message"] {
				t.Errorf("CreateDirectPayment: got %d %s %q, want %d %s", pe.Status, pe.Type, pe.Message, api.status, api.body)
			}
			if n := len(h.sim.PaymentRemittances("alice")); n != held {
				t.Errorf("got %d payments held, want %d: a refused payment is not made", n, held)
			}
		})
	}
}

// The control call's own refusals: the user is required and a key that is
// no payment field is refused, naming it.
func TestDirectPaymentControlRefusals(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	tests := []struct {
		name, wantMessage string
		body              map[string]any
	}{
		{"no user", `"userId" is required`, paymentBody("x")},
		{"user not a string", `"userId" must be a JSON string, not number`, map[string]any{"userId": 7}},
		{"unknown key", `unknown key "idempotencyKey": POST /_sim/payments takes includeFakeProviders, paymentInformation, providerId, providerIds, redirectUrl, userId`,
			directBody("alice", map[string]any{"idempotencyKey": "k"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, h.do("POST", "/_sim/payments", "", tt.body), http.StatusBadRequest, typeClientError, tt.wantMessage)
		})
	}
}

// Another channel is not an API key: the Free plan does not stop it, and
// neither do faults.
func TestDirectPaymentIgnoresPlanAndFaults(t *testing.T) {
	h := newHarness(t, Options{Control: true, Plan: PlanFree})
	h.sim.InjectFault(Fault{Status: 500})
	r := h.do("POST", "/_sim/payments", "", directBody("alice", paymentBody("Order free")))
	if r.status != http.StatusCreated {
		t.Fatalf("got %d %s, want 201", r.status, r.body)
	}
	if got := h.sim.PaymentRemittances("alice"); !slices.Contains(got, "Order free") {
		t.Errorf("got alice's payments %v, want Order free among them", got)
	}
}

func TestCreateDirectPayment(t *testing.T) {
	tests := []struct {
		name, publicURL, wantPrefix string
	}{
		{"no public url: a path", "", "/consent/payments/"},
		{"public url", "http://localhost:8081", "http://localhost:8081/consent/payments/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{PublicURL: tt.publicURL})
			h.sim.Advance(time.Hour)
			body, _ := json.Marshal(paymentBody("Order go"))
			p, err := h.sim.CreateDirectPayment("alice", body)
			if err != nil {
				t.Fatalf("got %v, want the payment made", err)
			}
			if want := tt.wantPrefix + p.ID + "?token="; !strings.HasPrefix(p.PayURL, want) {
				t.Errorf("got payUrl %q, want it to start with %q", p.PayURL, want)
			}
			if !p.CreatedAt.Equal(testEpoch.Add(time.Hour)) {
				t.Errorf("got createdAt %v, want %v", p.CreatedAt, testEpoch.Add(time.Hour))
			}
			if n := len(h.sim.Requests()); n != 0 {
				t.Errorf("got %d requests in the log, want 0", n)
			}
			// The consent page of payUrl works: the user can pay it there.
			link := p.PayURL
			if tt.publicURL != "" {
				link = strings.TrimPrefix(link, tt.publicURL)
			}
			if r := h.do("GET", link, "", nil); r.status != http.StatusOK {
				t.Errorf("GET payUrl: got %d %s, want 200", r.status, r.body)
			}
		})
	}
	_, err := New(Options{}).CreateDirectPayment("", []byte(`{}`))
	var pe *PaymentError
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || pe.Message != `"userId" is required` {
		t.Errorf("no user: got %v, want a 400 PaymentError naming userId", err)
	}
	_, err = New(Options{}).CreateDirectPayment("alice", []byte(`[1]`))
	if !errors.As(err, &pe) || pe.Status != http.StatusBadRequest || pe.Type != typeClientError {
		t.Errorf("not an object: got %v, want a 400 CLIENT_ERROR PaymentError", err)
	}
}
