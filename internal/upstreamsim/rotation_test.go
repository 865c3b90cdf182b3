package upstreamsim

import (
	"net/http"
	"testing"
	"time"
)

// After a rotation the old secret gets 401 at the token endpoint at once.
// Tokens minted with it get 401 too, unless purging them failed: then they
// work until their lifetime ends.
func TestRotationPurgeFailed(t *testing.T) {
	tests := []struct {
		name          string
		rotate        func(h *harness, secret string)
		tokenSurvives bool
	}{
		{"Go, purged", func(h *harness, s string) { h.sim.RotateSecret(s) }, false},
		{"Go, purge failed", func(h *harness, s string) { h.sim.RotateSecretPurgeFailed(s) }, true},
		{"control, purged", func(h *harness, s string) {
			wantNoContent(h, h.do("POST", "/_sim/rotate-secret", "", map[string]any{"clientSecret": s}))
		}, false},
		{"control, purge failed", func(h *harness, s string) {
			wantNoContent(h, h.do("POST", "/_sim/rotate-secret", "", map[string]any{"clientSecret": s, "purgeFailed": true}))
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, Options{Control: true, TokenTTL: time.Hour})
			old := h.token("alice")
			h.sim.Advance(10 * time.Minute)
			tt.rotate(h, "s2")
			wantError(t, h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "dev-secret", "userId": "alice"}),
				http.StatusUnauthorized, "", "")
			fresh := mintWith(t, h, "s2", "alice")
			wantOK(t, h.do("GET", "/v2/payments", fresh, nil))
			if !tt.tokenSurvives {
				wantError(t, h.do("GET", "/v2/payments", old, nil), http.StatusUnauthorized, "", errRotated.Error())
				return
			}
			wantOK(t, h.do("GET", "/v2/payments", old, nil))
			h.sim.Advance(49*time.Minute + 59*time.Second)
			wantOK(t, h.do("GET", "/v2/payments", old, nil))
			h.sim.Advance(time.Second)
			wantError(t, h.do("GET", "/v2/payments", old, nil), http.StatusUnauthorized, "", errExpired.Error())
		})
	}
}

// The next rotation purges a token that survived a failed purge.
func TestRotationAfterFailedPurge(t *testing.T) {
	h := newHarness(t, Options{})
	old := h.token("alice")
	h.sim.RotateSecretPurgeFailed("s2")
	wantOK(t, h.do("GET", "/v2/payments", old, nil))
	h.sim.RotateSecret("s3")
	wantError(t, h.do("GET", "/v2/payments", old, nil), http.StatusUnauthorized, "", errRotated.Error())
}

func mintWith(t *testing.T, h *harness, secret, user string) string {
	t.Helper()
	r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": secret, "userId": user})
	wantOK(t, r)
	return r.json(t)["accessToken"].(string)
}

func wantOK(t *testing.T, r reply) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("got %d %s, want 200", r.status, r.body)
	}
}

func wantNoContent(h *harness, r reply) {
	h.t.Helper()
	if r.status != http.StatusNoContent {
		h.t.Fatalf("got %d %s, want 204", r.status, r.body)
	}
}
