//go:build integration

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
)

// Every forwarded route api/openapi.yaml describes is called at least once
// through the BFF, for a user with data, so the document's reply shapes
// are held to the simulator's answers (the check is the client's; see
// openapi_test.go). The other tests reach the rest.
func TestDocumentedRoutesAnswerAsDescribed(t *testing.T) {
	t.Parallel()
	e := start(t, options{})
	c := e.app("")
	c.token = c.login("openapi-routes")

	want := func(r reply, status int, what string) reply {
		t.Helper()
		if r.status != status {
			t.Fatalf("%s: got %d %s, want %d", what, r.status, r.body, status)
		}
		return r
	}
	id := func(r reply, key string) string {
		t.Helper()
		v, _ := r.json(t)[key].(string)
		if v == "" {
			t.Fatalf("no %q in %s", key, r.body)
		}
		return v
	}

	// Catalogue and data reads.
	want(c.do("GET", "/api/v2/providers?includeFakeProviders=true", ""), 200, "providers")
	want(c.do("GET", "/api/v2/bank-branches", ""), 200, "bank branches")
	want(c.do("GET", "/api/v2/data/transaction-categories", ""), 200, "categories")
	accounts := want(c.do("GET", "/api/v2/data/accounts?limit=5", ""), 200, "accounts")
	var page struct{ Items []struct{ ID string } }
	if err := json.Unmarshal(accounts.body, &page); err != nil || len(page.Items) == 0 {
		t.Fatalf("accounts: %v %s, want at least one", err, accounts.body)
	}
	want(c.do("GET", "/api/v2/data/accounts/"+url.PathEscape(page.Items[0].ID), ""), 200, "one account")
	want(c.do("GET", "/api/v2/data/accounts/01KVRWDN00G3MYR9S9JBXJ7000", ""), 200, "an unknown account ({})")

	// Connections.
	conns := want(c.do("GET", "/api/v2/connections?limit=10&sort=-1", ""), 200, "connections")
	if err := json.Unmarshal(conns.body, &page); err != nil || len(page.Items) == 0 {
		t.Fatalf("connections: %v %s, want at least one", err, conns.body)
	}
	want(c.do("GET", "/api/v2/connections/"+page.Items[0].ID, ""), 200, "one connection")
	created := want(c.do("POST", "/api/v2/connections", `{"providerIds":["demobank-sandbox"]}`), 201, "new connection")
	connID := id(created, "id")
	want(c.do("DELETE", "/api/v2/connections/"+connID, ""), 423, "deleting a new connection")

	// Merchants.
	want(c.do("GET", "/api/v2/merchants?limit=2", ""), 200, "merchants")
	m := want(c.do("POST", "/api/v2/merchants", `{"name":"Café Openapi","iban":"IL620108000000099999999","website":"https://cafe.example"}`), 201, "new merchant")
	mID := id(m, "id")
	want(c.do("GET", "/api/v2/merchants/"+mID, ""), 200, "one merchant")
	want(c.do("PUT", "/api/v2/merchants/"+mID, `{"name":"Café OpenAPI"}`), 200, "updated merchant")
	want(c.do("DELETE", "/api/v2/merchants/"+mID, ""), 204, "deleted merchant")
	want(c.do("GET", "/api/v2/merchants/"+mID, ""), 404, "a deleted merchant")

	// Payments: create, start with a provider, look up, cancel.
	p := want(c.do("POST", "/api/v2/payments", fmt.Sprintf(validPayment, "openapi 1"), "Idempotency-Key", "openapi-routes-1"), 201, "new payment")
	payID := id(p, "id")
	want(c.do("POST", "/api/v2/pay/open-banking-init", fmt.Sprintf(`{"providerId":"demobank-sandbox","paymentId":%q}`, payID), "Idempotency-Key", "openapi-routes-2"), 200, "open-banking-init")
	want(c.do("GET", "/api/v2/payments/"+payID, ""), 200, "one payment")
	want(c.do("DELETE", "/api/v2/payments/"+payID, ""), 200, "cancelled payment")
	want(c.do("GET", "/api/v2/payments?status=CANC&limit=1", ""), 200, "cancelled payments")
}
