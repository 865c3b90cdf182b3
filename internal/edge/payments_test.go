//go:build integration

package edge

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
)

// GET /bff/payments and /bff/payments/{key}: authenticated like /api (a
// GET with the cookie needs no X-CSRF), the key read from the path
// unescaped once, another user's key 404.
func TestPaymentRecordsRoutes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, sessions, cookies := liveSessions(ctx, t)
	led, err := ledger.NewMemory(time.Now, make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"plain-key", "a%41/b?c#d"} // '%', '/', '?' and '#' must be escaped by the client
	for _, k := range keys {
		fp := sha256.Sum256([]byte(k))
		if _, _, err := led.Claim(ctx, ledger.Request{UserID: "alice", Route: "/v2/payments", Key: k, Fingerprint: fp[:]}, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	pay := payments.New(payments.Options{Ledger: led})
	base, _ := url.Parse("http://upstream.invalid")
	fwd := proxy.New(proxy.Options{BaseURL: base, Routes: proxy.NewRoutes(nil), Tokens: fixedToken{}, Timeout: time.Second, MaxBodyBytes: 1 << 10})
	e := NewPublic(Deps{
		Observability: Observability{Logger: slog.New(slog.DiscardHandler)},
		Sessions:      Sessions{Manager: sessions, Cookies: cookies, Tokens: noTokens{}},
		Clients:       Clients{PublicOrigin: "http://bff.local"},
		API:           API{Forwarder: fwd},
		Payments:      PaymentRoutes{Records: pay},
	})
	login := func(user string) *http.Cookie {
		id, _, err := sessions.Create(ctx, session.New{UserID: user, Method: session.MethodDev})
		if err != nil {
			t.Fatal(err)
		}
		ck, _ := cookies.New(id)
		return ck
	}
	alice, bob := login("alice"), login("bob")
	get := func(ck *http.Cookie, target string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "http://bff.local"+target, nil)
		if ck != nil {
			r.AddCookie(ck)
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		return w
	}
	code := func(w *httptest.ResponseRecorder) string {
		var p problem.Problem
		_ = json.Unmarshal(w.Body.Bytes(), &p)
		return p.Code
	}

	for _, k := range keys {
		w := get(alice, "/bff/payments/"+url.PathEscape(k))
		var rec payments.Record
		if err := json.Unmarshal(w.Body.Bytes(), &rec); w.Code != 200 || err != nil || rec.Key != k || rec.State != "in_flight" {
			t.Errorf("alice's %q: got %d %s, want it in flight", k, w.Code, w.Body)
		}
		if w := get(bob, "/bff/payments/"+url.PathEscape(k)); w.Code != 404 || code(w) != problem.CodeRouteNotFound {
			t.Errorf("bob's %q: got %d %s, want 404 ROUTE_NOT_FOUND", k, w.Code, w.Body)
		}
	}
	if w := get(alice, "/bff/payments/aA%2Fb%3Fc%23d"); w.Code != 404 {
		t.Errorf("a key unescaped twice: got %d %s, want 404", w.Code, w.Body)
	}
	w := get(alice, "/bff/payments?limit=1")
	var page payments.Page
	if err := json.Unmarshal(w.Body.Bytes(), &page); w.Code != 200 || err != nil || len(page.Items) != 1 || page.NextCursor == "" {
		t.Fatalf("alice's first page: got %d %s", w.Code, w.Body)
	}
	if w := get(bob, "/bff/payments"); w.Code != 200 || w.Body.String() != "{\"items\":[]}\n" {
		t.Errorf("bob's list: got %d %s, want an empty list", w.Code, w.Body)
	}
	for _, target := range []string{"/bff/payments?limit=0", "/bff/payments?limit=101", "/bff/payments?limit=x", "/bff/payments?cursor=nope"} {
		if w := get(alice, target); w.Code != 400 || code(w) != problem.CodeValidationError {
			t.Errorf("%s: got %d %s, want 400 VALIDATION_ERROR", target, w.Code, w.Body)
		}
	}
	for _, target := range []string{"/bff/payments", "/bff/payments/plain-key"} {
		if w := get(nil, target); w.Code != 401 || code(w) != problem.CodeSessionRequired {
			t.Errorf("%s without a session: got %d %s, want 401 SESSION_REQUIRED", target, w.Code, w.Body)
		}
	}
}
