package upstreamsim

import (
	"net/http"
	"testing"
	"time"
)

func TestFaultsListAndRemove(t *testing.T) {
	h := newHarness(t, Options{})
	a := h.sim.InjectFault(Fault{Method: "GET", PathPrefix: "/v2/payments", Status: 500, Times: 2})
	b := h.sim.InjectFault(Fault{PathPrefix: "/v2/data", UserID: "bob", Status: 503, Delay: time.Second})
	if a == "" || a == b {
		t.Fatalf("got ids %q and %q, want two distinct ids", a, b)
	}
	tok := h.token("alice")
	h.do("GET", "/v2/payments", tok, nil) // consumes one of a's two times
	got := h.sim.Faults()
	if len(got) != 2 || got[0].ID != a || got[0].Times != 1 || got[1].ID != b || got[1].UserID != "bob" || got[1].Delay != time.Second {
		t.Fatalf("got %+v, want %s with 1 time left, then %s for bob with its delay", got, a, b)
	}
	if !h.sim.RemoveFault(a) {
		t.Fatalf("RemoveFault(%s): got false, want true", a)
	}
	if h.sim.RemoveFault(a) {
		t.Errorf("RemoveFault(%s) twice: got true, want false", a)
	}
	if got := h.sim.Faults(); len(got) != 1 || got[0].ID != b {
		t.Fatalf("after removing %s: got %+v, want only %s", a, got, b)
	}
	if r := h.do("GET", "/v2/payments", tok, nil); r.status != http.StatusOK {
		t.Errorf("after removing its fault: got %d, want 200", r.status)
	}
	h.sim.ClearFaults()
	if c := h.sim.InjectFault(Fault{Status: 500}); c == a || c == b {
		t.Errorf("after ClearFaults: got id %q again, want ids never reused", c)
	}
}

// A fault with a userId applies only to requests acting for that user: a
// Bearer token for them, or a token request naming them.
func TestFaultForOneUser(t *testing.T) {
	h := newHarness(t, Options{})
	alice, bob := h.token("alice"), h.token("bob")
	h.sim.InjectFault(Fault{PathPrefix: "/v2/", UserID: "alice", Status: 503, Times: 1})
	if r := h.do("GET", "/v2/payments", bob, nil); r.status != http.StatusOK {
		t.Errorf("bob: got %d, want 200 (the fault is alice's)", r.status)
	}
	if r := h.do("GET", "/v2/payments", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("no token: got %d, want 401 (the fault is alice's)", r.status)
	}
	if r := h.do("GET", "/v2/payments", alice, nil); r.status != http.StatusServiceUnavailable {
		t.Errorf("alice: got %d, want the fault's 503", r.status)
	}
	if r := h.do("GET", "/v2/payments", alice, nil); r.status != http.StatusOK {
		t.Errorf("alice after times ran out: got %d, want 200", r.status)
	}

	h.sim.InjectFault(Fault{PathPrefix: "/oauth/token", UserID: "alice", Status: 500})
	h.token("bob")
	r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "dev-secret", "userId": "alice"})
	wantError(t, r, http.StatusInternalServerError, typeInternalError, "SERVER_ERROR")
}
