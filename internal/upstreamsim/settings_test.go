package upstreamsim

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

// Each setting changed at run time changes what the API does, as the
// start-up option does; Reset restores the options.
func TestUpdateSettings(t *testing.T) {
	h := newHarness(t, Options{})
	if got := h.sim.Settings(); got.UnauthorizedShape != Shape401Message || got.ExpiresInUnit != UnitSeconds ||
		got.TokenTTL != time.Hour || got.AccountCap != 5 || !got.BigQueryLock || got.Plan != PlanPro ||
		got.ProductionAccess || got.Credits != 100 || !slices.Equal(got.AllowedRedirectURLs, DefaultRedirectURLs) {
		t.Fatalf("defaults: got %+v", got)
	}
	tok := h.token("alice")
	st, err := h.sim.UpdateSettings(SettingsPatch{
		UnauthorizedShape: ptr(Shape401Typed), ExpiresInUnit: ptr(UnitMilliseconds), TokenTTL: ptr(15 * time.Minute),
		AccountCap: ptr(0), BigQueryLock: ptr(false), AllowedRedirectURLs: []string{"https://shop.example/done"},
		Plan: ptr(PlanStarter), ProductionAccess: ptr(true), Credits: ptr(7),
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.TokenTTL != 15*time.Minute || st.AccountCap != 0 || st.Plan != PlanStarter || !st.ProductionAccess || st.Credits != 7 {
		t.Errorf("UpdateSettings: got %+v", st)
	}

	t.Run("unauthorizedShape", func(t *testing.T) {
		r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "nope", "userId": "alice"})
		wantError(t, r, http.StatusUnauthorized, typeClientError, `{"error":"access_denied","error_description":"Unauthorized"}`)
	})
	t.Run("expiresInUnit and tokenTTL", func(t *testing.T) {
		r := h.do("POST", "/oauth/token", "", map[string]any{"clientId": "dev-client", "clientSecret": "dev-secret", "userId": "alice"})
		if got := r.json(t)["expiresIn"]; got != 900000.0 {
			t.Errorf("got expiresIn %v, want 900000 (15 min in ms)", got)
		}
	})
	t.Run("accountCap", func(t *testing.T) {
		wantError(t, h.do("POST", "/v2/connections", tok, map[string]any{"providerIds": []string{ProviderSandbox}}), 403, typeAccountLimit, "")
	})
	t.Run("bigQueryLock", func(t *testing.T) {
		h.sim.UpdateSettings(SettingsPatch{AccountCap: ptr(5)})
		r := h.do("POST", "/v2/connections", tok, map[string]any{"providerIds": []string{ProviderSandbox}})
		if r.status != http.StatusCreated {
			t.Fatalf("create: got %d %s", r.status, r.body)
		}
		if d := h.do("DELETE", "/v2/connections/"+r.json(t)["id"].(string), tok, nil); d.status != http.StatusNoContent {
			t.Errorf("deleting a new connection without the lock: got %d %s, want 204", d.status, d.body)
		}
	})
	t.Run("allowedRedirectURLs", func(t *testing.T) {
		p := paymentBody("redirect")
		if r := h.do("POST", "/v2/payments", tok, p); r.status != http.StatusBadRequest {
			t.Errorf("old redirect: got %d, want 400", r.status)
		}
		p["redirectUrl"] = "https://shop.example/done"
		if r := h.do("POST", "/v2/payments", tok, p); r.status != http.StatusCreated {
			t.Errorf("new redirect: got %d %s, want 201", r.status, r.body)
		}
	})
	t.Run("reset restores the options", func(t *testing.T) {
		h.sim.Reset()
		if got := h.sim.Settings(); got.TokenTTL != time.Hour || got.AccountCap != 5 || !got.BigQueryLock ||
			got.ExpiresInUnit != UnitSeconds || got.UnauthorizedShape != Shape401Message || got.Credits != 100 ||
			!slices.Contains(got.AllowedRedirectURLs, "https://app.example.com/payment-done") {
			t.Errorf("after Reset: got %+v", got)
		}
	})
}

// A bad value is refused by name and changes nothing, not even the valid
// keys beside it.
func TestUpdateSettingsRefuses(t *testing.T) {
	tests := []struct {
		key   string
		patch SettingsPatch
	}{
		{"unauthorizedShape", SettingsPatch{UnauthorizedShape: ptr("html")}},
		{"expiresInUnit", SettingsPatch{ExpiresInUnit: ptr("minutes")}},
		{"tokenTTL", SettingsPatch{TokenTTL: ptr(time.Duration(0))}},
		{"accountCap", SettingsPatch{AccountCap: ptr(-1)}},
		{"plan", SettingsPatch{Plan: ptr("gold")}},
		{"credits", SettingsPatch{Credits: ptr(-5)}},
		{"allowedRedirectURLs", SettingsPatch{AllowedRedirectURLs: []string{"/relative"}}},
		{"allowedRedirectURLs", SettingsPatch{AllowedRedirectURLs: []string{"https://a.example/x?y=1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			sim := New(Options{})
			before := sim.Settings()
			if tt.patch.AccountCap == nil {
				tt.patch.AccountCap = ptr(9) // valid, and must not be applied either
			}
			_, err := sim.UpdateSettings(tt.patch)
			var se *SettingError
			if !errors.As(err, &se) || se.Key != tt.key {
				t.Fatalf("got %v, want a SettingError for %q", err, tt.key)
			}
			if after := sim.Settings(); after.AccountCap != before.AccountCap {
				t.Errorf("a refused patch changed accountCap to %d", after.AccountCap)
			}
		})
	}
}

// A user with credits of its own gets 402 on its refresh while the others
// refresh on the organization's balance.
func TestUserCredits(t *testing.T) {
	h := newHarness(t, Options{Credits: 100})
	alice, bob := h.token("alice"), h.token("bob")
	refresh := func(tok string) reply { return h.do("POST", "/chat/chat/connections/refresh", tok, nil) }

	h.sim.SetUserCredits("alice", 10)
	r := refresh(alice)
	if m := r.json(t); r.status != http.StatusPaymentRequired || m["balance"] != 10.0 || m["cost"] != 20.0 {
		t.Fatalf("alice with 10 credits: got %d %s, want 402 with balance 10", r.status, r.body)
	}
	if r := refresh(bob); r.status != http.StatusOK || r.json(t)["status"] != "accepted" {
		t.Fatalf("bob: got %d %s, want 200 accepted", r.status, r.body)
	}
	if o := h.sim.Org(); o.Credits != 80 || o.UserCredits["alice"] != 10 {
		t.Errorf("got %+v, want the organization charged 20 and alice's 10 untouched", o)
	}

	h.sim.Advance(refreshDuration)
	h.sim.SetUserCredits("alice", 25)
	if r := refresh(alice); r.status != http.StatusOK {
		t.Fatalf("alice with 25 credits: got %d %s, want 200", r.status, r.body)
	}
	if o := h.sim.Org(); o.Credits != 80 || o.UserCredits["alice"] != 5 {
		t.Errorf("got %+v, want alice charged 20 of her own and the organization untouched", o)
	}

	h.sim.Advance(refreshDuration)
	if !h.sim.ClearUserCredits("alice") || h.sim.ClearUserCredits("alice") {
		t.Error("ClearUserCredits: want true once, then false")
	}
	if r := refresh(alice); r.status != http.StatusOK || h.sim.Org().Credits != 60 {
		t.Errorf("alice back on the organization's balance: got %d and %d credits, want 200 and 60", r.status, h.sim.Org().Credits)
	}
	h.sim.SetUserCredits("bob", 0)
	h.sim.Reset()
	if o := h.sim.Org(); o.UserCredits != nil {
		t.Errorf("after Reset: got per-user credits %v, want none", o.UserCredits)
	}
}

// The -public-url flag can change at run time too: the consent links of
// later replies use it, "" goes back to the request's own address, a bad
// URL is refused, and Reset restores the option.
func TestUpdateSettingsPublicURL(t *testing.T) {
	h := newHarness(t, Options{Control: true})
	tok := h.token("u")
	id, link := h.createPayment(tok, paymentBody("x"))
	if !strings.HasPrefix(link, h.url+"/consent/") {
		t.Fatalf("got payUrl %s, want it on %s", link, h.url)
	}
	r := h.do("PATCH", "/_sim/settings", "", map[string]any{"publicURL": "https://sim.example.test/"})
	if got := r.json(t)["publicURL"]; r.status != http.StatusOK || got != "https://sim.example.test" {
		t.Fatalf("PATCH publicURL: got %d %s, want 200 with publicURL https://sim.example.test", r.status, r.body)
	}
	if got := h.do("GET", "/v2/payments/"+id, tok, nil).json(t)["payUrl"].(string); !strings.HasPrefix(got, "https://sim.example.test/consent/payments/"+id+"?token=") {
		t.Errorf("after PATCH: got payUrl %s, want it under https://sim.example.test", got)
	}
	wantError(t, h.do("PATCH", "/_sim/settings", "", map[string]any{"publicURL": "localhost:8081"}), http.StatusBadRequest, typeClientError, "")
	h.sim.UpdateSettings(SettingsPatch{PublicURL: ptr("")})
	if got := h.do("GET", "/v2/payments/"+id, tok, nil).json(t)["payUrl"]; got != link {
		t.Errorf(`after publicURL "": got payUrl %v, want %s`, got, link)
	}
	h.sim.UpdateSettings(SettingsPatch{PublicURL: ptr("http://other.test:9")})
	h.sim.Reset()
	if got := h.sim.Settings().PublicURL; got != "" {
		t.Errorf("after Reset: got publicURL %q, want the option's \"\"", got)
	}
}
