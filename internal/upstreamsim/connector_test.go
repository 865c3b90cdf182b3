package upstreamsim

import (
	"net/http"
	"testing"
	"time"
)

func TestConnectorTokens(t *testing.T) {
	read := []string{scopeMCPRead}
	tests := []struct {
		name   string
		opts   Options
		setup  func(s *Server)
		scopes []string
		linked bool
		method string
		path   string
		status int
		typ    string
	}{
		{"read route accepted", Options{}, nil, read, true, "GET", "/v2/payments", 200, ""},
		{"transactions readable", Options{}, nil, []string{"openid", scopeMCPRead}, true, "GET", "/v2/data/transactions", 200, ""},
		{"POST refused", Options{}, nil, read, true, "POST", "/v2/payments", 403, typeMCPForbidden},
		{"PATCH refused", Options{}, nil, read, true, "PATCH", "/v2/data/transactions/x", 403, typeMCPForbidden},
		{"DELETE refused", Options{}, nil, read, true, "DELETE", "/v2/merchants/x", 403, typeMCPForbidden},
		{"refresh refused", Options{}, nil, read, true, "POST", "/chat/chat/connections/refresh", 403, typeMCPForbidden},
		{"no scope", Options{}, nil, nil, true, "GET", "/v2/payments", 403, typeMCPForbidden},
		{"not linked", Options{}, nil, read, false, "GET", "/v2/payments", 403, typeMCPNoServiceOrg},
		{"verification down", Options{}, func(s *Server) { s.SetConnectorVerificationDown(true) }, read, true, "GET", "/v2/payments", 503, typeMCPUnavailable},
		{"free plan", Options{Plan: PlanFree}, nil, read, true, "GET", "/v2/payments", 403, typeNotAvailableOnPlan},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			if tt.setup != nil {
				tt.setup(h.sim)
			}
			tok := h.sim.IssueConnectorToken("u", tt.scopes, tt.linked)
			r := h.do(tt.method, tt.path, tok, map[string]any{})
			if tt.typ == "" {
				if r.status != tt.status {
					t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
				}
				return
			}
			wantError(t, r, tt.status, tt.typ, "")
		})
	}
	t.Run("cannot replace clientSecret", func(t *testing.T) {
		h := newHarness(t, Options{})
		tok := h.sim.IssueConnectorToken("u", read, true)
		r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": tok, "userId": "u"})
		wantError(t, r, http.StatusUnauthorized, "", "")
	})
	t.Run("expires and survives secret rotation", func(t *testing.T) {
		h := newHarness(t, Options{TokenTTL: time.Minute})
		tok := h.sim.IssueConnectorToken("u", read, true)
		h.sim.RotateSecret("other")
		if r := h.do("GET", "/v2/payments", tok, nil); r.status != 200 {
			t.Errorf("after rotation: got %d, want 200 (connector tokens are not minted with the secret)", r.status)
		}
		h.sim.Advance(time.Minute)
		wantError(t, h.do("GET", "/v2/payments", tok, nil), http.StatusUnauthorized, "", "")
	})
	t.Run("audience is the MCP resource", func(t *testing.T) {
		h := newHarness(t, Options{})
		_, cl := jwtParts(t, h.sim.IssueConnectorToken("u", read, true))
		if cl["aud"] != DefaultMCPResource || cl["scope"] != scopeMCPRead {
			t.Errorf("got aud %v scope %v, want %s and %s", cl["aud"], cl["scope"], DefaultMCPResource, scopeMCPRead)
		}
	})
}
