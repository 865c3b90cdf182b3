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

// merchantOf creates a merchant of the attack's user at the simulator, as
// the app (or a thief holding the user's session) would through the BFF's
// forwarding: POST or PUT /v2/merchants, unheld.
func (a *attack) merchant(t *testing.T, method, path, name, iban string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"name": name, "iban": iban})
	r := httptest.NewRequest(method, "http://bff.local/api"+path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	serve(t, a.fwd, a.svc, w, r, proxy.Call{UserID: attackUser, RequestID: "merchant", Path: path})
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
	// The thief re-points the merchant while the user approves.
	a.merchant(t, http.MethodPut, "/v2/merchants/"+mid, "Landlord GmbH", thief)
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
