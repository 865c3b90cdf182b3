//go:build integration

package edge

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/login"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
)

// heard is an Observer that records what it hears, one line each.
type heard struct {
	mu   sync.Mutex
	list []string
}

func (e *heard) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, fmt.Sprintf(format, args...))
}

func (e *heard) Served(route, method string, status int, took time.Duration) {
	if took <= 0 {
		status = -1 // not measured
	}
	e.add("served %s %s %d", method, route, status)
}
func (e *heard) Problem(code string) { e.add("problem %s", code) }
func (e *heard) Login(method login.Method, result login.Outcome) {
	e.add("login %s %s", method, result)
}
func (e *heard) Revoked(reason session.Reason, n int) { e.add("revoked %s %d", reason, n) }
func (e *heard) Refused(limit limits.Kind)            { e.add("refused %s", limit) }
func (e *heard) Webhook(result payments.FollowResult) { e.add("webhook %s", result) }

func (e *heard) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.list
	e.list = nil
	return l
}

// budgetOf allows the first n requests of every session.
type budgetOf struct {
	n    int64
	used atomic.Int64
}

func (b *budgetOf) Allow(string) (bool, time.Duration) { return b.used.Add(1) <= b.n, time.Second }

// The observer hears of every request the public listener serves (route
// template, method as sent, status), each error envelope by its code, the
// logins, the revocations and the refusals of both kinds of limit; the
// admin listener tells it of the sessions an operator ends.
func TestObserverHearsOfTheEdgesEvents(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{}`)
	}))
	defer upstream.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, sessions, cookies := liveSessions(ctx, t)
	base, _ := url.Parse(upstream.URL)
	fwd := proxy.New(proxy.Options{
		BaseURL: base, Routes: proxy.NewRoutes([]proxy.Route{{Prefix: "/v2/payments", Methods: []string{"GET"}}}),
		Tokens: fixedToken{}, Timeout: 5 * time.Second, MaxBodyBytes: 1 << 20, Retry: proxy.Retry{MaxAttempts: 1},
	})
	obs := &heard{}
	e := NewPublic(Deps{
		Observability: Observability{Logger: slog.New(slog.DiscardHandler), Observe: obs},
		Sessions:      Sessions{Manager: sessions, Cookies: cookies, Tokens: noTokens{}},
		Clients:       Clients{PublicOrigin: "http://bff.local"},
		Login:         Login{Dev: true},
		Limits:        Limits{Budget: &budgetOf{n: 1}, PerAddress: limits.NewLocal(nil), AuthPerMinute: 3},
		API:           API{Forwarder: fwd},
	})
	var cookie *http.Cookie
	do := func(method, path, body string) int {
		r := httptest.NewRequest(method, "http://bff.local"+path, strings.NewReader(body))
		r.Header.Set("X-CSRF", "1")
		r.Header.Set("Content-Type", "application/json")
		if cookie != nil {
			r.AddCookie(cookie)
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		if cs := w.Result().Cookies(); len(cs) > 0 {
			cookie = cs[0]
		}
		return w.Code
	}
	for _, step := range []struct {
		method, path, body string
		want               []string
	}{
		{"POST", "/auth/dev/login", `{"userId":"alice"}`, []string{"login dev ok", "served POST /auth/dev/login 200"}},
		{"GET", "/api/v2/payments?limit=1", "", []string{"served GET /api/v2/payments 200"}},
		{"GET", "/api/v2/payments", "", []string{"refused requests", "served GET /api/* 429", "problem RATE_LIMITED"}},
		{"BREW", "/api/nope", "", []string{"served BREW /api/* 405", "problem METHOD_NOT_ALLOWED"}},
		{"POST", "/auth/logout", "", []string{"revoked logout 1", "served POST /auth/logout 204"}},
		{"GET", "/auth/session", "", []string{"served GET /auth/session 401", "problem SESSION_REQUIRED"}},
		{"GET", "/auth/session", "", []string{"refused auth", "served GET /auth/session 429", "problem RATE_LIMITED"}},
	} {
		code := do(step.method, step.path, step.body)
		if got := obs.take(); !slices.Equal(got, step.want) {
			t.Errorf("%s %s (%d): got %q, want %q", step.method, step.path, code, got, step.want)
		}
	}

	admin := NewAdmin(AdminDeps{Ready: NewReadiness(), Sessions: sessions, Tokens: noTokens{}, Observe: obs,
		Logger: slog.New(slog.DiscardHandler), Token: "admin-token"})
	for range 2 {
		if _, _, err := sessions.Create(ctx, session.New{UserID: "bob", Method: session.MethodDev}); err != nil {
			t.Fatal(err)
		}
	}
	r := httptest.NewRequest("DELETE", "/users/bob/sessions", nil)
	r.Header.Set("Authorization", "Bearer admin-token")
	admin.ServeHTTP(httptest.NewRecorder(), r)
	if got, want := obs.take(), []string{"revoked admin 2"}; !slices.Equal(got, want) {
		t.Errorf("admin revocation: got %q, want %q", got, want)
	}
}
