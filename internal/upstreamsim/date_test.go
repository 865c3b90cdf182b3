package upstreamsim

import (
	"net/http"
	"testing"
	"time"
)

// Every reply's Date header is the simulator's clock, not the host's: a
// client that measures the upstream's clock through Date sees the clock
// that stamps createdAt, moved by Advance. Faults' replies carry it too.
func TestDateHeaderFollowsTheSimulatorClock(t *testing.T) {
	tests := []struct {
		name         string
		fault        *Fault
		method, path string
		pathFor      func(h *harness, tok string) string // instead of path: one made for the request
		auth         bool
		body         any
		wantStatus   int
	}{
		{name: "API reply", method: "GET", path: "/v2/payments", auth: true, wantStatus: 200},
		{name: "created payment", method: "POST", path: "/v2/payments", auth: true, body: paymentBody("dated"), wantStatus: 201},
		{name: "token reply", method: "POST", path: "/oauth/token", body: map[string]any{"clientId": "dev-client", "clientSecret": "dev-secret", "userId": "u"}, wantStatus: 200},
		{name: "401 of the API", method: "GET", path: "/v2/payments", wantStatus: 401},
		{name: "unknown route", method: "GET", path: "/v2/nowhere", auth: true, wantStatus: 404},
		{name: "204 without a body", method: "DELETE", pathFor: newMerchant, auth: true, wantStatus: 204},
		{name: "fault status", fault: &Fault{PathPrefix: "/v2/payments", Status: 503}, method: "GET", path: "/v2/payments", auth: true, wantStatus: 503},
		{name: "fault empty body", fault: &Fault{PathPrefix: "/v2/payments", Status: 403, EmptyBody: true}, method: "GET", path: "/v2/payments", auth: true, wantStatus: 403},
		{name: "fault status after acting", fault: &Fault{Method: "POST", PathPrefix: "/v2/payments", Status: 401, AfterActing: true},
			method: "POST", path: "/v2/payments", auth: true, body: paymentBody("dated"), wantStatus: 401},
		{name: "real reply passed on after acting", fault: &Fault{Method: "POST", PathPrefix: "/v2/payments", AfterActing: true},
			method: "POST", path: "/v2/payments", auth: true, body: paymentBody("dated"), wantStatus: 201},
		{name: "consent page", method: "GET", path: "/consent/payments/nope?token=x", wantStatus: 404},
		{name: "control API", method: "GET", path: "/_sim/clock", wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{Control: true})
			tok := ""
			if tt.auth {
				tok = h.token("u")
			}
			if tt.fault != nil {
				h.sim.InjectFault(*tt.fault)
			}
			for _, step := range []time.Duration{0, 36*time.Hour + 7*time.Second} {
				now := h.sim.Advance(step)
				if tt.auth {
					tok = h.token("u") // a fresh token for the moved clock
				}
				path := tt.path
				if tt.pathFor != nil {
					path = tt.pathFor(h, tok)
				}
				r := h.do(tt.method, path, tok, tt.body)
				if r.status != tt.wantStatus {
					t.Fatalf("got %d %s, want %d", r.status, r.body, tt.wantStatus)
				}
				if got, want := r.header.Get("Date"), now.Format(http.TimeFormat); got != want {
					t.Errorf("after advancing %v: got Date %q, want %q", step, got, want)
				}
			}
		})
	}
}

// newMerchant creates a merchant for tok's user and returns its path.
func newMerchant(h *harness, tok string) string {
	h.t.Helper()
	r := h.do("POST", "/v2/merchants", tok, map[string]any{"name": "Dated", "iban": "DE89370400440532013000"})
	if r.status != http.StatusCreated {
		h.t.Fatalf("create merchant: got %d %s, want 201", r.status, r.body)
	}
	return "/v2/merchants/" + r.json(h.t)["id"].(string)
}

// The Date of a creation's reply is the createdAt of what it created: one
// clock.
func TestDateHeaderMatchesCreatedAt(t *testing.T) {
	h := newHarness(t, Options{})
	h.sim.Advance(5*time.Hour + 3*time.Second)
	tok := h.token("u")
	r := h.do("POST", "/v2/merchants", tok, map[string]any{"name": "Dated", "iban": "DE89370400440532013000"})
	if r.status != http.StatusCreated {
		t.Fatalf("create merchant: got %d %s, want 201", r.status, r.body)
	}
	date, err := http.ParseTime(r.header.Get("Date"))
	if err != nil {
		t.Fatalf("Date %q: %v", r.header.Get("Date"), err)
	}
	created, err := time.Parse(time.RFC3339, r.json(t)["createdAt"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if !date.Equal(created) {
		t.Errorf("got Date %v, want the createdAt %v", date, created)
	}
}
