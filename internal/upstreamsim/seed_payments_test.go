package upstreamsim

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"
)

// pageIDs walks GET /v2/payments with query and returns the ids in the
// order they came, failing on an id seen twice.
func pageIDs(t *testing.T, h *harness, tok string, query url.Values) ([]string, int) {
	t.Helper()
	items, count := walk(t, h, tok, "/v2/payments", query)
	ids := make([]string, 0, len(items))
	seen := map[string]bool{}
	for _, it := range items {
		id := it["id"].(string)
		if seen[id] {
			t.Fatalf("%v: payment %s came twice", query, id)
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids, count
}

// A user with more payments than a page: every page size and both orders
// return each payment exactly once, in id order, with the count of all.
func TestSeedPaymentsPaging(t *testing.T) {
	h := newHarness(t, Options{})
	if err := h.sim.SeedPayments("persona-new-pager", 250, nil); err != nil {
		t.Fatal(err)
	}
	tok := h.token("persona-new-pager")
	var want []string
	for id := range h.sim.PaymentOrigins("persona-new-pager") {
		want = append(want, id)
	}
	slices.Sort(want)
	if len(want) != 250 {
		t.Fatalf("got %d payments, want 250", len(want))
	}
	for _, limit := range []string{"", "1", "7", "50", "100", "249", "250", "500"} {
		for _, sort := range []string{"", "1", "-1"} {
			q := url.Values{}
			if limit != "" {
				q.Set("limit", limit)
			}
			if sort != "" {
				q.Set("sort", sort)
			}
			t.Run("limit="+limit+",sort="+sort, func(t *testing.T) {
				ids, count := pageIDs(t, h, tok, q)
				wantOrder := slices.Clone(want)
				if sort != "1" {
					slices.Reverse(wantOrder)
				}
				if count != 250 || !slices.Equal(ids, wantOrder) {
					t.Errorf("got %d ids (count %d), want the 250 in %s order", len(ids), count, map[bool]string{true: "ascending", false: "descending"}[sort == "1"])
				}
			})
		}
	}
}

// Payments made while a client pages do not make it see one twice or miss
// one that existed when it began; ascending, it reaches the new ones too.
func TestPagingWhilePaymentsArrive(t *testing.T) {
	h := newHarness(t, Options{})
	const user = "persona-new-busy-pager"
	if err := h.sim.SeedPayments(user, 120, nil); err != nil {
		t.Fatal(err)
	}
	tok := h.token(user)
	for _, sort := range []string{"-1", "1"} {
		t.Run("sort="+sort, func(t *testing.T) {
			before := h.sim.PaymentOrigins(user)
			q := url.Values{"limit": {"25"}, "sort": {sort}}
			seen := map[string]bool{}
			made := 0
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatal("more than 100 pages")
				}
				m := h.do("GET", "/v2/payments?"+q.Encode(), tok, nil).json(t)
				for _, it := range m["items"].([]any) {
					id := it.(map[string]any)["id"].(string)
					if seen[id] {
						t.Fatalf("payment %s came twice", id)
					}
					seen[id] = true
				}
				h.createPayment(tok, paymentBody("Order while paging"))
				made++
				next, ok := m["nextPage"].(string)
				if !ok {
					break
				}
				q.Set("nextPage", next)
			}
			for id := range before {
				if !seen[id] {
					t.Errorf("payment %s, there when paging began, was never listed", id)
				}
			}
			if wantNew := map[string]int{"-1": 0, "1": made - 1}[sort]; len(seen)-len(before) != wantNew {
				t.Errorf("got %d payments made while paging listed, want %d", len(seen)-len(before), wantNew)
			}
		})
	}
}

// Seeded payments are history: the newest a minute before now, one second
// apart, sorting by createdAt as by id, before a payment made afterwards,
// listed at once under a list lag; their origin is
// "", the template's trigger gives their status, and a seeded simulator
// seeds the same ids every run.
func TestSeedPaymentsAreHistory(t *testing.T) {
	h := newHarness(t, Options{ListLag: 30 * time.Second})
	tmpl := []byte(`{"paymentInformation":{"amount":"3.5","currency":"ILS","remittanceInformation":"bulk RJCT",` +
		`"creditorAccount":{"iban":"IL620108000000099999999"}},"includeFakeProviders":true}`)
	if err := h.sim.SeedPayments("bob", 5, tmpl); err != nil {
		t.Fatal(err)
	}
	tok := h.token("bob")
	id, _ := h.createPayment(tok, paymentBody("Order after seeding"))
	h.sim.Advance(30 * time.Second) // the payment made now is listed
	items, _ := walk(t, h, tok, "/v2/payments", url.Values{"sort": {"1"}})
	var seeded []map[string]any
	for _, it := range items {
		if it["paymentInformation"].(map[string]any)["remittanceInformation"] == "bulk RJCT" {
			seeded = append(seeded, it)
		}
	}
	if len(seeded) != 5 || items[len(items)-1]["id"] != id {
		t.Fatalf("got %d seeded payments and the last listed %v, want 5 and %s", len(seeded), items[len(items)-1]["id"], id)
	}
	for i, p := range seeded {
		at, _ := time.Parse(time.RFC3339, p["createdAt"].(string))
		if want := testEpoch.Add(-time.Minute - time.Duration(4-i)*time.Second); !at.Equal(want) || p["status"] != statusRJCT {
			t.Errorf("seeded payment %d: got createdAt %s and status %v, want %s and RJCT", i, at, p["status"], want)
		}
		if origin := h.sim.PaymentOrigins("bob")[p["id"].(string)]; origin != "" {
			t.Errorf("seeded payment %d: got origin %q, want \"\"", i, origin)
		}
	}
	if n := countPath(h.sim, "/v2/payments"); n != 2 { // the creation and the list
		t.Errorf("got %d requests logged, want seeding not to be one", n)
	}

	seededIDs := func() []string {
		sim := New(Options{Seed: "demo", Start: testEpoch})
		defer sim.Close()
		if err := sim.SeedPayments("carol", 30, nil); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for id := range sim.PaymentOrigins("carol") {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		return ids
	}
	if a, b := seededIDs(), seededIDs(); !slices.Equal(a, b) {
		t.Error("with a seed and a start, two runs seeded different ids")
	}
}

// A refused seeding adds nothing, and says why as the API would.
func TestSeedPaymentsRefusals(t *testing.T) {
	sim := New(Options{Now: fixedClock()})
	defer sim.Close()
	held := len(sim.PaymentRemittances("dave"))
	tests := []struct {
		name     string
		user     string
		n        int
		template string
		status   int
		typ      string
	}{
		{"no user", "", 3, "", 400, typeClientError},
		{"zero", "dave", 0, "", 400, typeClientError},
		{"too many", "dave", MaxSeedPayments + 1, "", 400, typeClientError},
		{"not JSON", "dave", 3, "{", 400, typeClientError},
		{"no paymentInformation", "dave", 3, `{"providerIds":["demobank-sandbox"]}`, 400, typeValidationError},
		{"sandbox gate", "dave", 3, `{"paymentInformation":{"amount":1,"currency":"EUR","creditorAccount":{"iban":"FR7630006000011234567890189"}},"providerIds":["hapoalim"]}`, 400, typeClientError},
		{"unknown merchant", "dave", 3, `{"paymentInformation":{"amount":1,"currency":"EUR","merchantId":"01KY12900GPN7T3N1FPMPK309R"},"includeFakeProviders":true}`, 404, typeClientError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := sim.SeedPayments(tt.user, tt.n, []byte(tt.template))
			var pe *PaymentError
			if !errors.As(err, &pe) || pe.Status != tt.status || pe.Type != tt.typ {
				t.Fatalf("got %v, want a *PaymentError %d %s", err, tt.status, tt.typ)
			}
			if got := len(sim.PaymentRemittances("dave")); got != held {
				t.Errorf("got %d payments, want the %d held before", got, held)
			}
		})
	}
}

// POST /_sim/payments/seed is SeedPayments: the user and count in the
// body, the other keys the template (none: the default).
func TestSeedPaymentsControl(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	if r := h.do("POST", "/_sim/payments/seed", "", map[string]any{"userId": "persona-new-erin", "count": 120}); r.status != http.StatusNoContent {
		t.Fatalf("seed with the default template: got %d %s, want 204", r.status, r.body)
	}
	body := directBody("persona-new-erin", paymentBody("Order template"))
	body["count"] = 30
	if r := h.do("POST", "/_sim/payments/seed", "", body); r.status != http.StatusNoContent {
		t.Fatalf("seed with a template: got %d %s, want 204", r.status, r.body)
	}
	got := map[string]int{}
	for _, rem := range h.sim.PaymentRemittances("persona-new-erin") {
		got[rem]++
	}
	if len(got) != 2 || got["Seeded payment"] != 120 || got["Order template"] != 30 {
		t.Errorf("got remittances %v, want 120 default and 30 from the template", got)
	}

	for _, tt := range []struct {
		body   map[string]any
		status int
		typ    string
	}{
		{map[string]any{"userId": "persona-new-erin"}, 400, typeClientError},
		{map[string]any{"userId": "persona-new-erin", "count": 0}, 400, typeClientError},
		{map[string]any{"userId": "persona-new-erin", "count": "3"}, 400, typeClientError},
		{map[string]any{"userId": "persona-new-erin", "count": MaxSeedPayments + 1}, 400, typeClientError},
		{map[string]any{"count": 3}, 400, typeClientError},
		{map[string]any{"userId": "persona-new-erin", "count": 3, "providerIds": []string{ProviderSandbox}}, 400, typeValidationError},
		{map[string]any{"userId": "persona-new-erin", "count": 3, "template": map[string]any{}}, 400, typeClientError},
	} {
		t.Run(strconv.Quote(string(mustJSON(t, tt.body))), func(t *testing.T) {
			wantError(t, h.do("POST", "/_sim/payments/seed", "", tt.body), tt.status, tt.typ, "")
			if n := len(h.sim.PaymentRemittances("persona-new-erin")); n != 150 {
				t.Errorf("got %d payments, want the 150 seeded before", n)
			}
		})
	}
}
