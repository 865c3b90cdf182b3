//go:build integration

package edge

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
)

func TestLoginMethod(t *testing.T) {
	for _, tt := range []struct {
		login Login
		want  string
	}{
		{Login{Dev: true}, "dev"},
		{Login{OIDC: &login.Provider{}}, "oidc"},
		{Login{}, ""},
	} {
		if got := loginMethod(tt.login); got != tt.want {
			t.Errorf("loginMethod(dev %t, oidc %t): got %q, want %q", tt.login.Dev, tt.login.OIDC != nil, got, tt.want)
		}
	}
}

// GET /auth/methods answers everyone 200 with the sign-in method, and the
// caller's session when there is one; it spends none of the address's
// /auth budget, so a page asking it on every view logs no 4xx and leaves
// the budget to sign-ins.
func TestAuthMethods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, sessions, cookies := liveSessions(ctx, t)
	var logs syncbuf.Buffer
	e := NewPublic(Deps{
		Observability: Observability{Logger: slog.New(slog.NewJSONHandler(&logs, nil))},
		Sessions:      Sessions{Manager: sessions, Cookies: cookies, Tokens: noTokens{}},
		Clients:       Clients{PublicOrigin: "http://bff.local"},
		Login:         Login{Dev: true},
		// One /auth request a minute per address: the second counted one is 429.
		Limits: Limits{PerAddress: limits.NewLocal(time.Now), AuthPerMinute: 1},
		API: API{Forwarder: proxy.New(proxy.Options{BaseURL: &url.URL{Scheme: "http", Host: "127.0.0.1:9"},
			Routes: proxy.NewRoutes(nil), Timeout: time.Second, MaxBodyBytes: 1 << 20})},
	})
	id, _, err := sessions.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	ck, _ := cookies.New(id)
	ended, _, err := sessions.Create(ctx, session.New{UserID: "bob", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	if err := sessions.Delete(ctx, ended); err != nil {
		t.Fatal(err)
	}
	endedCk, _ := cookies.New(ended)

	tests := []struct {
		name string
		set  func(r *http.Request)
		user string // the session's userId; "": session null
	}{
		{"no session", func(*http.Request) {}, ""},
		{"the cookie", func(r *http.Request) { r.AddCookie(ck) }, "alice"},
		{"a session token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+id) }, "alice"},
		{"an ended session's cookie", func(r *http.Request) { r.AddCookie(endedCk) }, ""},
		{"a cookie that does not open", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: ck.Name, Value: "forged"}) }, ""},
	}
	// Each case three times: well over the budget of one.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 3 {
				r := httptest.NewRequest("GET", "/auth/methods", nil)
				tt.set(r)
				w := httptest.NewRecorder()
				e.ServeHTTP(w, r)
				var got struct {
					Login   string
					Session *struct {
						UserID    string
						ExpiresAt time.Time
					}
				}
				if err := json.Unmarshal(w.Body.Bytes(), &got); w.Code != http.StatusOK || err != nil || got.Login != "dev" {
					t.Fatalf("got %d %s, want 200 with login dev", w.Code, w.Body)
				}
				switch {
				case tt.user == "" && got.Session != nil:
					t.Errorf("got session %+v, want null", *got.Session)
				case tt.user != "" && (got.Session == nil || got.Session.UserID != tt.user || got.Session.ExpiresAt.Before(time.Now())):
					t.Errorf("got %s, want the session of %s, ending later", w.Body, tt.user)
				}
				if cc := w.Header().Get("Cache-Control"); cc != "no-store" {
					t.Errorf("Cache-Control: got %q, want no-store", cc)
				}
			}
		})
	}

	// The budget is untouched: the one /auth request it allows still passes.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/auth/session", nil)
	r.AddCookie(ck)
	e.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /auth/session after the methods: got %d %s, want 200 (the budget spent by /auth/methods)", w.Code, w.Body)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l struct {
			Msg, Route string
			Status     int
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" && l.Status >= 400 {
			t.Errorf("an answer of %d logged: %s", l.Status, line)
		}
	}
}
