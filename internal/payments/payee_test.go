package payments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
)

// merchant creates or changes a merchant of the attack's user at the
// upstream directly (another channel than this BFF, or a BFF without
// step-up): POST or PUT /v2/merchants, unheld.
func (a *attack) merchant(t *testing.T, method, path, name, iban string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": name, "iban": iban})
	r := httptest.NewRequest(method, "http://bff.local/api"+path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	unheld := payments.New(payments.Options{Upstream: a.fwd, Timeout: 2 * time.Second, MoneyRoutes: []string{"/v2/payments", "/v2/pay"}, Ledger: a.led})
	serve(t, a.fwd, unheld, w, r, proxy.Call{UserID: attackUser, RequestID: "merchant", Path: path})
	if w.Code != http.StatusCreated && w.Code != http.StatusOK {
		t.Fatalf("%s %s: got %d %s", method, path, w.Code, w.Body)
	}
	var m struct{ ID string }
	_ = json.Unmarshal(w.Body.Bytes(), &m)
	return m.ID
}

func (a *attack) approval(t *testing.T, ref string) payments.Approval {
	t.Helper()
	hold, p := a.svc.HeldPayment(context.Background(), ref)
	if p != nil {
		t.Fatalf("HeldPayment: %v", p)
	}
	return payments.Approval{UserID: attackUser, ACR: "urn:bff:acr:mfa", AuthTime: time.Now(), Details: hold.Details, RequestID: "req-approve"}
}

// 6. The approval binds the payee where the money goes, not a merchant id:
// a merchant payment's approval shows the merchant's own account, and a
// thief who re-points the merchant's account after the user was shown it
// cannot have the user's approval send the money there.
func TestStepUpApprovalBindsTheMerchantsAccount(t *testing.T) {
	const rent, thief = "DE89370400440532013000", "GB33BUKB20201555555555"
	a := stepUpAttack(t)
	mid := a.merchant(t, http.MethodPost, "/v2/merchants", "Landlord GmbH", rent)
	body := `{"paymentInformation":{"amount":"1500.00","currency":"EUR","merchantId":"` + mid + `","remittanceInformation":"rent"},"providerIds":["demobank-sandbox"]}`
	ref := heldRef(t, a.post(t, "/v2/payments", body, "RENT"))

	shown := a.approval(t, ref)
	if !strings.Contains(string(shown.Details), `"creditorAccount":{"iban":"`+rent+`"}`) || !strings.Contains(string(shown.Details), `"creditorName":"Landlord GmbH"`) {
		t.Fatalf("the approval shows %s: want the merchant's name and account", shown.Details)
	}
	// The thief renames and re-points the merchant while the user approves.
	a.merchant(t, http.MethodPut, "/v2/merchants/"+mid, "Landlord Holdings", thief)
	_, p := a.svc.Approve(context.Background(), ref, attackUser, "h", shown)
	if p == nil || p.Code != problem.CodeStepUpRequired {
		t.Fatalf("an approval of the old account after the merchant changed: got %v, want STEP_UP_REQUIRED (held again)", p)
	}
	if n := a.payments(); n != 0 {
		t.Fatalf("the upstream made %d payments after the merchant's account changed, want none", n)
	}
	// Held again: the next approval shows the account the money would go
	// to now, and only an approval of that one sends it.
	again := a.approval(t, ref)
	if !strings.Contains(string(again.Details), thief) {
		t.Fatalf("the new approval shows %s: want the merchant's new account", again.Details)
	}
	if _, p := a.svc.Approve(context.Background(), ref, attackUser, "h", again); p != nil {
		t.Fatalf("the approval of the account shown: %v", p)
	}
	if n := a.payments(); n != 1 {
		t.Fatalf("the upstream made %d payments, want 1", n)
	}
}

// With step-up on, a change of where money goes is held like a payment: a
// thief's re-pointing of a merchant (PUT), a new merchant (POST) and a
// deletion (DELETE) are each held for the user's approval, bound to the
// change itself, and sent once only after it; without an Idempotency-Key
// they are refused.
func TestStepUpHoldsAChangeOfWhereMoneyGoes(t *testing.T) {
	const rent, thief = "DE89370400440532013000", "GB33BUKB20201555555555"
	a := stepUpAttack(t)
	mid := a.merchant(t, http.MethodPost, "/v2/merchants", "Landlord GmbH", rent)
	change := func(method, path, body, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://bff.local/api"+path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		serve(t, a.fwd, a.svc, w, r, proxy.Call{UserID: attackUser, RequestID: "req-" + key, Path: path, SessionRef: "h"})
		return w
	}
	ibanAt := func() string {
		r := httptest.NewRequest(http.MethodGet, "http://bff.local/api/v2/merchants/"+mid, nil)
		w := httptest.NewRecorder()
		serve(t, a.fwd, a.svc, w, r, proxy.Call{UserID: attackUser, RequestID: "read", Path: "/v2/merchants/" + mid})
		var m struct{ IBAN string }
		_ = json.Unmarshal(w.Body.Bytes(), &m)
		return m.IBAN
	}
	repoint := `{"name":"Landlord GmbH","iban":"` + thief + `"}`
	if w := change(http.MethodPut, "/v2/merchants/"+mid, repoint, ""); w.Code != http.StatusBadRequest || decodeProblem(t, w).Code != problem.CodeIdempotencyKeyRequired {
		t.Fatalf("a change without a key: got %d %s, want 400 IDEMPOTENCY_KEY_REQUIRED", w.Code, w.Body)
	}
	if w := change(http.MethodPut, "/v2/merchants/"+mid, `{"name":"x","iban":"`+thief+`","bic":"X"}`, "bad"); w.Code != http.StatusBadRequest || decodeProblem(t, w).Code != problem.CodeValidationError {
		t.Fatalf("an unknown member: got %d %s, want 400 VALIDATION_ERROR", w.Code, w.Body)
	}
	ref := heldRef(t, change(http.MethodPut, "/v2/merchants/"+mid, repoint, "REPOINT"))
	if got := ibanAt(); got != rent {
		t.Fatalf("a held change reached the upstream: the merchant's account is %s", got)
	}
	heldRef(t, change(http.MethodPut, "/v2/merchants/"+mid, repoint, "REPOINT")) // a repeat: the same hold

	shown := a.approval(t, ref)
	want := `[{"type":"payee_change","action":"update","merchantId":"` + mid + `","name":"Landlord GmbH","creditorAccount":{"iban":"` + thief + `"}}]`
	if string(shown.Details) != want {
		t.Fatalf("the approval shows\n %s\nwant\n %s", shown.Details, want)
	}
	// An approval of another change releases nothing, and ends the hold.
	other := shown
	other.Details = json.RawMessage(strings.Replace(string(shown.Details), thief, rent, 1))
	if _, p := a.svc.Approve(context.Background(), ref, attackUser, "h", other); p == nil || p.Code != problem.CodeStepUpDeclined {
		t.Fatalf("an approval of another change: got %v, want STEP_UP_DECLINED", p)
	}
	if got := ibanAt(); got != rent {
		t.Fatalf("a declined change reached the upstream: the merchant's account is %s", got)
	}
	// A new key, approved as shown: sent once.
	ref = heldRef(t, change(http.MethodPut, "/v2/merchants/"+mid, repoint, "REPOINT-2"))
	if _, p := a.svc.Approve(context.Background(), ref, attackUser, "h", a.approval(t, ref)); p != nil {
		t.Fatalf("the approval of the change shown: %v", p)
	}
	if got := ibanAt(); got != thief {
		t.Fatalf("an approved change was not sent: the merchant's account is %s", got)
	}
	if rec, err := a.svc.Record(context.Background(), attackUser, "REPOINT-2"); err != nil || rec.State != "done" || rec.PaymentID != "" {
		t.Fatalf("the approved change's record: got %+v, %v; want done, with no payment id (a merchant's id is no payment)", rec, err)
	}
	if w := change(http.MethodPut, "/v2/merchants/"+mid, repoint, "REPOINT-2"); w.Code != http.StatusOK || w.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a repeat of the approved change: got %d %s, want its 200 replayed", w.Code, w.Body)
	}
	// A new merchant and a deletion are held too.
	heldRef(t, change(http.MethodPost, "/v2/merchants", `{"name":"Mallory Ltd","iban":"`+thief+`"}`, "NEW"))
	heldRef(t, change(http.MethodDelete, "/v2/merchants/"+mid, "", "DEL"))
	if got := ibanAt(); got != thief {
		t.Fatalf("a held deletion reached the upstream")
	}
}
