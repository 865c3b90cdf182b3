package upstreamsim

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"
)

// fixtureStart is the frozen start of the determinism tests.
var fixtureStart = time.Date(2026, 7, 23, 4, 12, 9, 0, time.UTC)

// script runs a fixed sequence of calls, creating a merchant, payments and
// a connection, and returns every reply body but the token's.
func script(t *testing.T, h *harness) []string {
	t.Helper()
	tok := h.token("alice")
	var out []string
	do := func(method, path string, body any) map[string]any {
		r := h.do(method, path, tok, body)
		if r.status >= 300 {
			t.Fatalf("%s %s: got %d %s, want 2xx", method, path, r.status, r.body)
		}
		out = append(out, fmt.Sprintf("%s %s -> %d %s", method, path, r.status, r.body))
		if len(r.body) == 0 || r.body[0] != '{' {
			return nil
		}
		return r.json(t)
	}
	for _, p := range []string{"/v2/connections", "/v2/data/accounts", "/v2/data/transactions?limit=500", "/v2/merchants", "/v2/payments"} {
		do("GET", p, nil)
	}
	mid := do("POST", "/v2/merchants", map[string]any{"name": "חומוס אבו חסן", "iban": "IL620108000000099999999"})["id"].(string)
	body := paymentBody("Order 1")
	body["paymentInformation"] = map[string]any{"amount": 42, "currency": "ILS", "merchantId": mid}
	pid := do("POST", "/v2/payments", body)["id"].(string)
	do("POST", "/v2/pay/open-banking-init", map[string]any{"providerId": ProviderSandbox, "paymentId": pid})
	cid := do("POST", "/v2/connections", map[string]any{"providerIds": []string{"hapoalim"}})["id"].(string)
	h.sim.Advance(2 * time.Minute)
	do("GET", "/v2/payments/"+pid, nil)
	do("GET", "/v2/connections/"+cid, nil)
	do("GET", "/v2/payments", nil)
	do("GET", "/v2/data/accounts?connectionId="+cid, nil)
	return out
}

func TestDeterminism(t *testing.T) {
	seeded := Options{Seed: "demo", Start: fixtureStart, ProductionAccess: true, PublicURL: "http://sim.test"}
	a := script(t, newHarness(t, seeded))
	wallClock := seeded
	wallClock.Now = time.Now // Start overrides the clock: another day changes nothing
	b := script(t, newHarness(t, wallClock))
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("reply %d differs between two servers with the same seed and start:\n%.300s\n%.300s", i, a[i], b[i])
		}
	}
	other := seeded
	other.Seed = "other"
	c := script(t, newHarness(t, other))
	for _, i := range []int{0, 5, 6, 8} { // seeded connections, and the created merchant, payment, connection
		if a[i] == c[i] {
			t.Errorf("reply %d: got the same with another seed, want other ids: %.200s", i, a[i])
		}
	}
}

// TestUnseededIDsDiffer checks that without a seed created ids are random.
func TestUnseededIDsDiffer(t *testing.T) {
	create := func() string {
		h := newHarness(t, Options{})
		return h.do("POST", "/v2/merchants", h.token("u"), map[string]any{"name": "x"}).json(t)["id"].(string)
	}
	if a, b := create(), create(); a == b {
		t.Errorf("got the same created id %s twice without a seed, want random ids", a)
	}
}

func TestFrozenClockTokenExpiry(t *testing.T) {
	h := newHarness(t, Options{Seed: "demo", Start: fixtureStart, Now: time.Now})
	tok := h.token("u")
	if r := h.do("GET", "/v2/payments", tok, nil); r.status != 200 {
		t.Fatalf("fresh token: got %d, want 200", r.status)
	}
	if got := h.sim.Now(); !got.Equal(fixtureStart) {
		t.Errorf("got now %v, want the frozen start %v", got, fixtureStart)
	}
	h.sim.Advance(time.Hour - time.Second)
	if r := h.do("GET", "/v2/payments", tok, nil); r.status != 200 {
		t.Errorf("at 59m59s: got %d, want 200", r.status)
	}
	h.sim.Advance(time.Second)
	wantError(t, h.do("GET", "/v2/payments", tok, nil), 401, "", "")
}

func TestFixturesControl(t *testing.T) {
	want := script(t, newHarness(t, Options{Seed: "demo", Start: fixtureStart, ProductionAccess: true, PublicURL: "http://sim.test"}))
	h := newHarness(t, Options{Control: true, ProductionAccess: true, PublicURL: "http://sim.test"})
	h.token("alice")
	h.sim.Advance(48 * time.Hour)
	r := h.do("POST", "/_sim/fixtures", "", map[string]any{"seed": "demo", "now": "2026-07-23T04:12:09Z"})
	if r.status != 200 {
		t.Fatalf("fixtures: got %d %s, want 200", r.status, r.body)
	}
	if m := r.json(t); m["seed"] != "demo" || m["now"] != "2026-07-23T04:12:09Z" {
		t.Errorf("got %v, want the seed and the frozen time", m)
	}
	got := script(t, h)
	for i := range want {
		if !bytes.Equal([]byte(got[i]), []byte(want[i])) {
			t.Fatalf("reply %d after /_sim/fixtures differs from a server started with the same seed:\n%.300s\n%.300s", i, got[i], want[i])
		}
	}

	tests := []struct {
		name, path string
		body       any
	}{
		{"unknown key", "fixtures", map[string]any{"sead": "demo"}},
		{"bad now", "fixtures", map[string]any{"now": "tomorrow"}},
		{"unknown persona in fixtures", "fixtures", map[string]any{"personas": map[string]string{"bob": "rich"}}},
		{"unknown persona", "personas", map[string]any{"userId": "bob", "persona": "rich"}},
		{"persona without user", "personas", map[string]any{"persona": "new"}},
		{"personas unknown key", "personas", map[string]any{"userId": "bob", "persona": "new", "x": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, h.do("POST", "/_sim/"+tt.path, "", tt.body), http.StatusBadRequest, typeClientError, "")
		})
	}
	t.Run("fixtures assign personas", func(t *testing.T) {
		r := h.do("POST", "/_sim/fixtures", "", map[string]any{"seed": "demo", "personas": map[string]string{"bob": PersonaNew}})
		if r.status != 200 {
			t.Fatalf("got %d %s, want 200", r.status, r.body)
		}
		if got := h.do("GET", "/_sim/personas/bob", "", nil).json(t)["persona"]; got != PersonaNew {
			t.Errorf("got persona %v, want new", got)
		}
		if n := h.do("GET", "/v2/connections", h.token("bob"), nil).json(t)["count"]; n != 0.0 {
			t.Errorf("got %v connections for a new persona, want 0", n)
		}
	})
}

func TestPersonaFromID(t *testing.T) {
	tests := []struct{ id, want string }{
		{"alice", PersonaDefault},
		{"persona-new", PersonaNew},
		{"persona-new-alice", PersonaNew},
		{"persona-newton", PersonaDefault},
		{"persona-busy-7", PersonaBusy},
		{"persona-troubled-x", PersonaTroubled},
		{"persona-free-1", PersonaFree},
		{"persona-", PersonaDefault},
		{"x-persona-new", PersonaDefault},
	}
	for _, tt := range tests {
		if got := personaFromID(tt.id); got != tt.want {
			t.Errorf("personaFromID(%q): got %q, want %q", tt.id, got, tt.want)
		}
	}
}

func TestPersonas(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	count := func(tok, path string) float64 {
		t.Helper()
		return h.do("GET", path, tok, nil).json(t)["count"].(float64)
	}
	t.Run("new", func(t *testing.T) {
		tok := h.token("persona-new-1")
		for _, p := range []string{"/v2/connections", "/v2/data/accounts", "/v2/data/transactions", "/v2/payments", "/v2/merchants"} {
			if n := count(tok, p); n != 0 {
				t.Errorf("%s: got %v, want 0", p, n)
			}
		}
		r := h.do("POST", "/chat/chat/connections/refresh", tok, nil)
		if r.status != http.StatusConflict {
			t.Errorf("refresh: got %d, want 409", r.status)
		}
	})
	t.Run("busy", func(t *testing.T) {
		tok := h.token("persona-busy-1")
		if n := count(tok, "/v2/data/accounts"); n != 9 {
			t.Errorf("got %v accounts, want 9", n)
		}
		conns := items(t, h.do("GET", "/v2/connections", tok, nil))
		var sum float64
		for _, c := range conns {
			sum += c["transactions"].(float64)
			if c["status"] != "ACTIVE" {
				t.Errorf("got status %v, want ACTIVE", c["status"])
			}
		}
		if len(conns) != 4 || sum != 10000 {
			t.Errorf("got %d connections counting %v transactions, want 4 and 10000", len(conns), sum)
		}
		all, n := walk(t, h, tok, "/v2/data/transactions", url.Values{"limit": {"500"}})
		seen := map[string]bool{}
		for _, tx := range all {
			seen[tx["id"].(string)] = true
		}
		if n != 10000 || len(seen) != 10000 {
			t.Errorf("got count %d and %d distinct transactions, want 10000", n, len(seen))
		}
	})
	t.Run("troubled", func(t *testing.T) {
		tok := h.token("persona-troubled-1")
		byStatus := map[string]map[string]any{}
		for _, c := range items(t, h.do("GET", "/v2/connections", tok, nil)) {
			byStatus[c["status"].(string)] = c
		}
		if len(byStatus) != 3 || byStatus["EXPIRED"] == nil || byStatus["FETCHING_ERROR"] == nil || byStatus["PENDING"] == nil {
			t.Fatalf("got statuses %v, want EXPIRED, FETCHING_ERROR and PENDING", byStatus)
		}
		if e, _ := byStatus["FETCHING_ERROR"]["error"].(map[string]any); e["code"] != "PROVIDER_TIMEOUT" {
			t.Errorf("FETCHING_ERROR: got error %v, want PROVIDER_TIMEOUT", e)
		}
		if p := byStatus["PENDING"]; p["lastFetchedAt"] != nil || p["lastFetchedDataDate"] != nil || p["error"] != nil || p["accounts"] != 0.0 {
			t.Errorf("PENDING: got %v, want never fetched, no error, no account", p)
		}
		r := h.do("POST", "/chat/chat/connections/refresh", tok, nil)
		if r.status != http.StatusConflict {
			t.Errorf("refresh: got %d, want 409 no_refreshable_connections", r.status)
		}
	})
	t.Run("free", func(t *testing.T) {
		tok := h.token("persona-free-1") // the token exchange works on Free
		for _, p := range []string{"/v2/payments", "/v2/connections", "/v2/data/accounts", "/v2/providers"} {
			wantError(t, h.do("GET", p, tok, nil), http.StatusForbidden, typeNotAvailableOnPlan, "")
		}
		wantError(t, h.do("POST", "/v2/payments", tok, paymentBody("x")), http.StatusForbidden, typeNotAvailableOnPlan, "")
		conn := h.sim.IssueConnectorToken("persona-free-1", []string{scopeMCPRead}, true)
		wantError(t, h.do("GET", "/v2/payments", conn, nil), http.StatusForbidden, typeNotAvailableOnPlan, "")
		if r := h.do("GET", "/v2/payments", h.token("paying-user"), nil); r.status != 200 {
			t.Errorf("another user on the paid organization: got %d, want 200", r.status)
		}
	})
	t.Run("assigned by control", func(t *testing.T) {
		tok := h.token("carol")
		if n := count(tok, "/v2/connections"); n != 2 {
			t.Fatalf("default persona: got %v connections, want 2", n)
		}
		if r := h.do("POST", "/_sim/personas", "", map[string]any{"userId": "carol", "persona": PersonaTroubled}); r.status != 204 {
			t.Fatalf("assign: got %d %s, want 204", r.status, r.body)
		}
		if n := count(tok, "/v2/connections"); n != 3 {
			t.Errorf("troubled persona with the same token: got %v connections, want 3", n)
		}
		if err := h.sim.SetPersona("carol", PersonaFree); err != nil {
			t.Fatal(err)
		}
		wantError(t, h.do("GET", "/v2/payments", tok, nil), http.StatusForbidden, typeNotAvailableOnPlan, "")
		if err := h.sim.SetPersona("carol", "rich"); err == nil {
			t.Error("SetPersona rich: got nil error, want one")
		}
		h.sim.Reset()
		if got := h.sim.Persona("carol"); got != PersonaDefault {
			t.Errorf("after Reset: got persona %q, want default", got)
		}
	})
}

// TestCreatedIDsKeepCreationOrder creates merchants in one frozen instant:
// their ids must still sort in creation order, seeded or not.
func TestCreatedIDsKeepCreationOrder(t *testing.T) {
	for _, seed := range []string{"", "demo"} {
		t.Run("seed "+seed, func(t *testing.T) {
			h := newHarness(t, Options{Seed: seed, Start: fixtureStart})
			tok := h.token("u")
			var created []string
			for i := range 20 {
				created = append(created, h.do("POST", "/v2/merchants", tok, map[string]any{"name": fmt.Sprint("m", i)}).json(t)["id"].(string))
			}
			var listed []string
			for _, m := range items(t, h.do("GET", "/v2/merchants?sort=1&limit=100", tok, nil))[2:] {
				listed = append(listed, m["id"].(string))
			}
			if fmt.Sprint(listed) != fmt.Sprint(created) {
				t.Errorf("got ascending list %v, want creation order %v", listed, created)
			}
		})
	}
}

func TestNextULID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"01KVRWDN000000000000000000", "01KVRWDN000000000000000001"},
		{"01KVRWDN00000000000000000Z", "01KVRWDN000000000000000010"},
		{"01KVRWDN00ZZZZZZZZZZZZZZZZ", "01KVRWDN000000000000000000"},
	}
	for _, tt := range tests {
		if got := nextULID(tt.in); got != tt.want {
			t.Errorf("nextULID(%s): got %s, want %s", tt.in, got, tt.want)
		}
	}
}
