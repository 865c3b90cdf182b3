package proxy_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/proxy"
)

// The credit guard: at most one on-demand refresh per user per interval;
// a sooner one is 429 REFRESH_TOO_SOON with the seconds left and never
// reaches the upstream; one the upstream refused does not count.
func TestRefreshCreditGuard(t *testing.T) {
	var calls atomic.Int64
	var answer atomic.Int64
	answer.Store(200)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch answer.Load() {
		case 402:
			w.WriteHeader(http.StatusPaymentRequired)
			_, _ = w.Write([]byte(`{"status":"insufficient_credits","cost":20,"message":"not enough credits"}`))
		default:
			_, _ = w.Write([]byte(`{"status":"accepted"}`))
		}
	}))
	t.Cleanup(upstream.Close)
	base, _ := url.Parse(upstream.URL)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fwd := proxy.New(proxy.Options{
		BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: &fakeTokens{},
		Timeout: 5 * time.Second, MaxBodyBytes: 1024, Retry: proxy.Retry{MaxAttempts: 1, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Refresh: limits.NewLocal(func() time.Time { return now }), RefreshEvery: 15 * time.Minute,
	})
	refresh := func(user string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "http://bff.local/api"+proxy.RefreshPath, nil)
		w := httptest.NewRecorder()
		forward(fwd, w, r, proxy.Call{UserID: user, RequestID: "req-123", Path: proxy.RefreshPath})
		return w
	}
	if w := refresh("alice"); w.Code != 200 {
		t.Fatalf("first refresh: got %d %s", w.Code, w.Body)
	}
	now = now.Add(5 * time.Minute)
	w := refresh("alice")
	p := decodeProblem(t, w)
	if w.Code != 429 || p.Code != "REFRESH_TOO_SOON" || p.Action != "retry_later" || !p.Retryable {
		t.Fatalf("second refresh 5 min later: got %d %+v, want 429 REFRESH_TOO_SOON", w.Code, p)
	}
	if ra, _ := strconv.Atoi(w.Header().Get("Retry-After")); ra != 600 {
		t.Fatalf("got Retry-After %q, want 600 (10 min left)", w.Header().Get("Retry-After"))
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("the upstream saw %d refreshes, want 1", n)
	}
	if w := refresh("bob"); w.Code != 200 {
		t.Fatalf("another user: got %d, want 200 (the budget is per user)", w.Code)
	}
	now = now.Add(10 * time.Minute)
	answer.Store(402)
	if w := refresh("alice"); w.Code != 402 {
		t.Fatalf("after the interval: got %d, want the upstream's 402", w.Code)
	}
	answer.Store(200)
	if w := refresh("alice"); w.Code != 200 {
		t.Fatalf("after a refused refresh: got %d %s, want 200 (a refused refresh does not count)", w.Code, w.Body)
	}
}
