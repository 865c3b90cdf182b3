//go:build integration

package e2e

import (
	"net/http"
	"testing"
)

// A change of where money goes is held like a payment (docs/payments.md,
// "Changes of where money goes"): a merchant's account re-pointed through
// the BFF waits for the user's approval at the real provider, which shows
// the new account, and is sent once after it.
func TestStepUpMerchantChangeIsApprovedAtTheProvider(t *testing.T) {
	t.Parallel()
	e, _ := stepUpEnv(t, options{})
	b := webLogin(t, e, "alice")
	items, _ := b.do("GET", "/api/v2/merchants", "").json(t)["items"].([]any)
	if len(items) == 0 {
		t.Fatal("alice has no merchant to change")
	}
	mid, _ := items[0].(map[string]any)["id"].(string)
	ibanNow := func() string {
		r := b.do("GET", "/api/v2/merchants/"+mid, "")
		v, _ := r.json(t)["iban"].(string)
		return v
	}
	const thief = "GB33BUKB20201555555555"
	before := ibanNow()
	change := `{"name":"Landlord GmbH","iban":"` + thief + `"}`
	p := wantProblem(t, b.do("PUT", "/api/v2/merchants/"+mid, change, "Idempotency-Key", "repoint-1", "X-CSRF", "1"), http.StatusUnauthorized, "STEP_UP_REQUIRED")
	stepUp, _ := p["stepUpUrl"].(string)
	if got := ibanNow(); got != before {
		t.Fatalf("a held change reached the upstream: the account is %s", got)
	}
	cb, shown := opDecide(t, b.http, beginStepUp(t, b, stepUp, "&returnTo=/done"), "alice", "123456", "approve")
	if shown["payee"] != "Landlord GmbH" || shown["iban"] != thief {
		t.Fatalf("the provider showed %v, want the new payee and account", shown)
	}
	r := b.follow(t, cb)
	if loc := r.header.Get("Location"); r.status != http.StatusFound || loc != "/done?payment=repoint-1&stepUp=approved" {
		t.Fatalf("callback: got %d %q %s, want 302 to /done?payment=repoint-1&stepUp=approved", r.status, loc, r.body)
	}
	if got := ibanNow(); got != thief {
		t.Fatalf("the approved change was not sent: the account is %s", got)
	}
	if rp := b.do("PUT", "/api/v2/merchants/"+mid, change, "Idempotency-Key", "repoint-1", "X-CSRF", "1"); rp.status != http.StatusOK || rp.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("a repeat of the approved change: got %d %s, want its answer replayed", rp.status, rp.body)
	}
}
