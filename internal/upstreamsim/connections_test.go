package upstreamsim

import (
	"net/http"
	"testing"
	"time"
)

func TestConnectionDeleteLock(t *testing.T) {
	tests := []struct {
		name    string
		opts    Options
		advance time.Duration
		want    int
	}{
		{"new connection is locked", Options{}, 0, http.StatusLocked},
		{"still locked at 89m59s", Options{TokenTTL: 24 * time.Hour}, 90*time.Minute - time.Second, http.StatusLocked},
		{"released at 90m", Options{TokenTTL: 24 * time.Hour}, 90 * time.Minute, http.StatusNoContent},
		{"no lock without BigQuery", Options{BigQueryLock: Bool(false)}, 0, http.StatusNoContent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.opts)
			tok := h.token("u")
			r := h.do("POST", "/v2/connections", tok, map[string]any{"providerIds": []string{ProviderSandbox}})
			if r.status != http.StatusCreated || r.json(t)["connectUrl"] == nil {
				t.Fatalf("create: got %d %s, want 201 with connectUrl", r.status, r.body)
			}
			id := r.json(t)["id"].(string)
			h.sim.Advance(tt.advance)
			r = h.do("DELETE", "/v2/connections/"+id, tok, nil)
			if r.status != tt.want {
				t.Fatalf("delete: got %d %q, want %d", r.status, r.body, tt.want)
			}
			if tt.want == http.StatusLocked {
				if string(r.body) != msgLocked || r.header.Get("Content-Type") != "text/plain; charset=utf-8" {
					t.Errorf("got %q (%s), want %q as text/plain", r.body, r.header.Get("Content-Type"), msgLocked)
				}
				return
			}
			if len(r.body) != 0 {
				t.Errorf("got body %q on 204, want none", r.body)
			}
			wantError(t, h.do("GET", "/v2/connections/"+id, tok, nil), http.StatusNotFound, typeClientError, "")
		})
	}
}

func TestConnections(t *testing.T) {
	h := newHarness(t, Options{AccountCap: 1, TokenTTL: 24 * time.Hour})
	tok := h.token("u")
	seeded := seededConnections(t, h, tok)
	if seeded["ACTIVE"] == "" || seeded["EXPIRED"] == "" {
		t.Fatalf("got seeded connections %v, want one ACTIVE and one EXPIRED", seeded)
	}
	got := h.do("GET", "/v2/connections/"+seeded["ACTIVE"], tok, nil).json(t)
	if got["userId"] != "u" || got["mode"] == nil || got["providerIds"] == nil {
		t.Errorf("got connection %v, want userId, mode, providerIds", got)
	}

	tests := []struct {
		name   string
		body   any
		status int
		typ    string
	}{
		{"providerIds missing", map[string]any{}, 400, typeValidationError},
		{"unknown provider", map[string]any{"providerIds": []string{"atlantis"}}, 400, typeClientError},
		{"redirect not allowed", map[string]any{"providerIds": []string{ProviderSandbox}, "redirectUrl": "https://x.test/"}, 400, typeClientError},
		{"provider down", map[string]any{"providerIds": []string{ProviderDown}}, 400, typeProviderUnavailable},
		{"provider failing", map[string]any{"providerIds": []string{ProviderFailing}}, 500, typeInternalError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, h.do("POST", "/v2/connections", tok, tt.body), tt.status, tt.typ, "")
		})
	}

	t.Run("cap counts live API connections", func(t *testing.T) {
		r := h.do("POST", "/v2/connections", tok, map[string]any{"providerId": "n26-de"})
		if r.status != http.StatusCreated {
			t.Fatalf("first: got %d, want 201", r.status)
		}
		id := r.json(t)["id"].(string)
		wantError(t, h.do("POST", "/v2/connections", tok, map[string]any{"providerIds": []string{ProviderSandbox}}), 403, typeAccountLimit, "")
		h.sim.Advance(lockAge)
		if r := h.do("DELETE", "/v2/connections/"+id, tok, nil); r.status != http.StatusNoContent {
			t.Fatalf("delete: got %d, want 204", r.status)
		}
		if r := h.do("POST", "/v2/connections", tok, map[string]any{"providerIds": []string{ProviderSandbox}}); r.status != http.StatusCreated {
			t.Errorf("after delete: got %d, want 201", r.status)
		}
	})
	t.Run("seeded connection deletable at once with its accounts", func(t *testing.T) {
		if r := h.do("DELETE", "/v2/connections/"+seeded["EXPIRED"], tok, nil); r.status != http.StatusNoContent {
			t.Fatalf("got %d, want 204", r.status)
		}
		r := h.do("GET", "/v2/data/transactions?limit=1&connectionId="+seeded["EXPIRED"], tok, nil).json(t)
		if r["count"] != 0.0 {
			t.Errorf("got %v transactions of the deleted connection, want 0", r["count"])
		}
	})
	t.Run("unknown connection", func(t *testing.T) {
		wantError(t, h.do("DELETE", "/v2/connections/nope", tok, nil), 404, typeClientError, "")
	})
}

func TestMerchantsCRUD(t *testing.T) {
	h := newHarness(t, Options{})
	tok := h.token("u")
	if n := h.do("GET", "/v2/merchants", tok, nil).json(t)["count"]; n != 2.0 {
		t.Fatalf("got %v seeded merchants, want 2", n)
	}
	wantError(t, h.do("POST", "/v2/merchants", tok, map[string]any{"iban": "x"}), 400, typeValidationError, `["\"name\" is required"]`)
	r := h.do("POST", "/v2/merchants", tok, map[string]any{"name": "Shop", "iban": "ES9121000418450200051332"})
	if r.status != http.StatusCreated {
		t.Fatalf("create: got %d, want 201", r.status)
	}
	id := r.json(t)["id"].(string)
	r = h.do("PUT", "/v2/merchants/"+id, tok, map[string]any{"name": "Shop 2"})
	if r.status != 200 || r.json(t)["name"] != "Shop 2" {
		t.Errorf("update: got %d %s, want 200 name Shop 2", r.status, r.body)
	}
	if got := h.do("GET", "/v2/merchants/"+id, tok, nil).json(t)["name"]; got != "Shop 2" {
		t.Errorf("get: got name %v, want Shop 2", got)
	}
	if r := h.do("DELETE", "/v2/merchants/"+id, tok, nil); r.status != http.StatusNoContent {
		t.Errorf("delete: got %d, want 204", r.status)
	}
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		wantError(t, h.do(m, "/v2/merchants/"+id, tok, map[string]any{"name": "x"}), 404, typeClientError, "")
	}
}
