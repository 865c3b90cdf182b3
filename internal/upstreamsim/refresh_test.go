package upstreamsim

import (
	"net/http"
	"testing"
	"time"
)

func TestRefresh(t *testing.T) {
	h := newHarness(t, Options{Credits: 45})
	tok := h.token("u")
	refresh := func() (int, map[string]any) {
		r := h.do("POST", "/chat/chat/connections/refresh", tok, nil)
		return r.status, r.json(t)
	}
	steps := []struct {
		name        string
		advance     time.Duration
		wantHTTP    int
		wantStatus  string
		wantCredits int
	}{
		{"first refresh accepted and charged", 0, 200, "accepted", 25},
		{"while running: already_running, not charged", 30 * time.Second, 200, "already_running", 25},
		{"still running at 59s", 29 * time.Second, 200, "already_running", 25},
		{"after it ends: accepted again", time.Second, 200, "accepted", 5},
		{"running refresh wins over low credits", 0, 200, "already_running", 5},
		{"too few credits: 402", time.Minute, 402, "insufficient_credits", 5},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			h.sim.Advance(st.advance)
			code, m := refresh()
			if code != st.wantHTTP || m["status"] != st.wantStatus {
				t.Fatalf("got %d %v, want %d %s", code, m, st.wantHTTP, st.wantStatus)
			}
			if _, ok := m["type"]; ok {
				t.Errorf("got a type in %v, want none", m)
			}
			if got := h.sim.Org().Credits; got != st.wantCredits {
				t.Errorf("got %d credits, want %d", got, st.wantCredits)
			}
		})
	}
	t.Run("402 body", func(t *testing.T) {
		_, m := refresh()
		if m["cost"] != 20.0 || m["balance"] != 5.0 || m["message"] == "" {
			t.Errorf("got %v, want cost 20, balance 5 and a message", m)
		}
	})
}

func TestRefreshNoRefreshableConnections(t *testing.T) {
	for _, status := range []string{"REVOKED", "EXPIRED", "FETCHING_ERROR"} {
		t.Run(status, func(t *testing.T) {
			h := newHarness(t, Options{})
			tok := h.token("u")
			active := seededConnections(t, h, tok)["ACTIVE"]
			if err := h.sim.SetConnectionStatus("u", active, status); err != nil {
				t.Fatal(err)
			}
			r := h.do("POST", "/chat/chat/connections/refresh", tok, nil)
			if r.status != http.StatusConflict || r.json(t)["status"] != "no_refreshable_connections" {
				t.Fatalf("got %d %s, want 409 no_refreshable_connections", r.status, r.body)
			}
			_, link := h.createConnection(tok, map[string]any{"providerIds": []string{ProviderSandbox}})
			if r := h.do("POST", "/chat/chat/connections/refresh", tok, nil); r.status != http.StatusConflict {
				t.Fatalf("before the consent: got %d %s, want 409", r.status, r.body)
			}
			h.decide(link, "approve") // reconnecting: the end-user consents at the bank
			if r := h.do("POST", "/chat/chat/connections/refresh", tok, nil); r.status != 200 {
				t.Errorf("after reconnecting: got %d %s, want 200", r.status, r.body)
			}
		})
	}
	t.Run("seeded active connection expires with time", func(t *testing.T) {
		h := newHarness(t, Options{TokenTTL: 365 * 24 * time.Hour})
		tok := h.token("u")
		seededConnections(t, h, tok) // seed now, then let the consent run out
		h.sim.Advance(61 * 24 * time.Hour)
		if r := h.do("POST", "/chat/chat/connections/refresh", tok, nil); r.status != http.StatusConflict {
			t.Errorf("got %d, want 409 once the consent expired", r.status)
		}
	})
	if err := New(Options{}).SetConnectionStatus("u", "nope", "ACTIVE"); err == nil {
		t.Error("SetConnectionStatus on an unknown connection: got nil, want an error")
	}
}
