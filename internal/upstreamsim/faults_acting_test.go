package upstreamsim

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// send posts body to path with tok on a connection of its own (no
// keep-alive, so nothing is retried on a dropped one) and returns the
// reply, or the error of a connection closed without one.
func (h *harness) send(path, tok string, body any) (reply, error) {
	h.t.Helper()
	var rd io.Reader = http.NoBody
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest("POST", h.url+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	res, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return reply{status: res.StatusCode, header: res.Header, body: b}, err
}

// TestFaultActsThenAnswers injects the faults through the control API as a
// test of the BFF would, and checks for each whether the upstream acted (a
// payment made; a refresh charged and started) and what the client got: a
// reply, or a connection dropped without one.
//
// Acting then answering 401 is the case a client must not "fix" by
// minting a new token and resending: the payment exists already. Hanging
// up before acting is the case where resending is safe.
func TestFaultActsThenAnswers(t *testing.T) {
	const (
		payments = "/v2/payments"
		refresh  = "/chat/chat/connections/refresh"
	)
	tests := []struct {
		name      string
		fault     string // the body of POST /_sim/faults
		path      string
		wantActed bool
		wantCode  int    // 0: the connection is closed without a reply
		wantBody  string // the exact reply body, when wantCode is set
	}{
		{name: "payment: acts, then 401",
			fault: `{"method":"POST","pathPrefix":"/v2/payments","afterActing":true,"status":401}`,
			path:  payments, wantActed: true, wantCode: 401, wantBody: `{"message":"Unauthorized"}`},
		{name: "payment: acts, then hangs up",
			fault: `{"method":"POST","pathPrefix":"/v2/payments","afterActing":true,"hangUp":true}`,
			path:  payments, wantActed: true},
		{name: "payment: acts, then 500",
			fault: `{"method":"POST","pathPrefix":"/v2/payments","afterActing":true,"status":500}`,
			path:  payments, wantActed: true, wantCode: 500, wantBody: `{"type":"INTERNAL_ERROR","message":"SERVER_ERROR"}`},
		{name: "payment: hangs up before acting",
			fault: `{"method":"POST","pathPrefix":"/v2/payments","hangUp":true}`,
			path:  payments, wantActed: false},
		{name: "payment: 401 before acting",
			fault: `{"method":"POST","pathPrefix":"/v2/payments","status":401}`,
			path:  payments, wantActed: false, wantCode: 401, wantBody: `{"message":"Unauthorized"}`},
		{name: "refresh: acts, then 401",
			fault: `{"method":"POST","pathPrefix":"/chat/chat/connections/refresh","afterActing":true,"status":401}`,
			path:  refresh, wantActed: true, wantCode: 401, wantBody: `{"message":"Unauthorized"}`},
		{name: "refresh: acts, then hangs up",
			fault: `{"method":"POST","pathPrefix":"/chat/chat/connections/refresh","afterActing":true,"hangUp":true}`,
			path:  refresh, wantActed: true},
		{name: "refresh: hangs up before acting",
			fault: `{"method":"POST","pathPrefix":"/chat/chat/connections/refresh","hangUp":true}`,
			path:  refresh, wantActed: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{Control: true})
			tok := h.token("alice")
			held, credits := len(h.sim.PaymentRemittances("alice")), h.sim.Org().Credits
			if r := h.do("POST", "/_sim/faults", "", tt.fault); r.status != http.StatusCreated {
				t.Fatalf("POST /_sim/faults: got %d %s, want 201", r.status, r.body)
			}

			var body any
			if tt.path == payments {
				body = paymentBody("Order 23")
			}
			r, err := h.send(tt.path, tok, body)
			switch {
			case tt.wantCode == 0 && err == nil:
				t.Fatalf("got %d %s, want the connection closed without a reply", r.status, r.body)
			case tt.wantCode != 0 && err != nil:
				t.Fatalf("got %v, want %d", err, tt.wantCode)
			case tt.wantCode != 0:
				if r.status != tt.wantCode || string(r.body) != tt.wantBody {
					t.Errorf("got %d %s, want %d %s", r.status, r.body, tt.wantCode, tt.wantBody)
				}
				if got, want := r.header.Get("Date"), h.sim.Now().Format(http.TimeFormat); got != want {
					t.Errorf("got Date %q, want the simulator's %q", got, want)
				}
			}
			if n := countPath(h.sim, tt.path); n != 1 {
				t.Errorf("got %d requests to %s in the log, want 1: the upstream received it", n, tt.path)
			}

			// What the upstream did, seen once the fault is gone.
			if r := h.do("DELETE", "/_sim/faults", "", nil); r.status != http.StatusNoContent {
				t.Fatalf("DELETE /_sim/faults: got %d, want 204", r.status)
			}
			switch tt.path {
			case payments:
				want := held
				if tt.wantActed {
					want++
				}
				if got := len(h.sim.PaymentRemittances("alice")); got != want {
					t.Errorf("got %d payments held by alice, want %d", got, want)
				}
			case refresh:
				wantCredits, wantNext := credits, "accepted"
				if tt.wantActed {
					wantCredits, wantNext = credits-refreshCost, "already_running"
				}
				if got := h.sim.Org().Credits; got != wantCredits {
					t.Errorf("got %d credits, want %d", got, wantCredits)
				}
				if next := h.do("POST", refresh, tok, nil); next.json(t)["status"] != wantNext {
					t.Errorf("the next refresh: got %s, want %s", next.body, wantNext)
				}
			}
		})
	}
}

// countPath counts the requests to path the log holds.
func countPath(s *Server, path string) int {
	n := 0
	for _, rq := range s.Requests() {
		if rq.Path == path {
			n++
		}
	}
	return n
}
