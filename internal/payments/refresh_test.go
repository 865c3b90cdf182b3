package payments_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/proxy"
)

// refreshFixture is an upstream refresh whose answer a test chooses, the
// credit guard on an injected clock, and the BFF's refresh in front.
type refreshFixture struct {
	calls  atomic.Int64
	answer atomic.Value // "200", "already_running", "402", "409", "401", "slow"
	now    time.Time
	mu     sync.Mutex
	fwd    *proxy.Forwarder
	svc    *payments.Service
	events *events
}

func newRefreshFixture(t *testing.T) *refreshFixture {
	f := &refreshFixture{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), events: &events{}}
	f.answer.Store("200")
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		switch f.answer.Load().(string) {
		case "already_running":
			writeJSON(w, http.StatusOK, `{"status":"already_running"}`)
		case "402":
			writeJSON(w, http.StatusPaymentRequired, `{"status":"insufficient_credits","cost":20,"message":"not enough credits"}`)
		case "409":
			writeJSON(w, http.StatusConflict, `{"status":"no_refreshable_connections","message":"no connection"}`)
		case "401":
			writeJSON(w, http.StatusUnauthorized, `{"message":"Unauthorized"}`)
		case "slow":
			time.Sleep(150 * time.Millisecond) // a fake latency: the client is gone by then
			writeJSON(w, http.StatusOK, `{"status":"accepted"}`)
		default:
			writeJSON(w, http.StatusOK, `{"status":"accepted"}`)
		}
	}))
	t.Cleanup(upstream.Close)
	base, _ := url.Parse(upstream.URL)
	f.fwd = proxy.New(proxy.Options{
		BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: &fakeTokens{},
		Timeout: 5 * time.Second, MaxBodyBytes: 1024, Retry: proxy.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
	})
	clock := func() time.Time {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.now
	}
	f.svc = payments.New(payments.Options{Upstream: f.fwd, Timeout: 5 * time.Second,
		Refresh: limits.NewLocal(clock), RefreshEvery: 15 * time.Minute, Observe: f.events})
	return f
}

func (f *refreshFixture) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *refreshFixture) refresh(t *testing.T, ctx context.Context, user, path string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://bff.local/api"+path, nil)
	w := httptest.NewRecorder()
	serve(t, f.fwd, f.svc, w, r, proxy.Call{UserID: user, RequestID: "req-123", Path: path})
	return w
}

// The credit guard: at most one on-demand refresh per user per interval;
// a sooner one is 429 REFRESH_TOO_SOON with the seconds left and never
// reaches the upstream; one the upstream did not start does not count.
func TestRefreshCreditGuard(t *testing.T) {
	ctx := context.Background()
	f := newRefreshFixture(t)
	if w := f.refresh(t, ctx, "alice", payments.RefreshPath); w.Code != 200 {
		t.Fatalf("first refresh: got %d %s", w.Code, w.Body)
	}
	f.advance(5 * time.Minute)
	w := f.refresh(t, ctx, "alice", payments.RefreshPath)
	p := decodeProblem(t, w)
	if w.Code != 429 || p.Code != "REFRESH_TOO_SOON" || p.Action != "retry_later" || !p.Retryable {
		t.Fatalf("second refresh 5 min later: got %d %+v, want 429 REFRESH_TOO_SOON", w.Code, p)
	}
	if ra, _ := strconv.Atoi(w.Header().Get("Retry-After")); ra != 600 {
		t.Fatalf("got Retry-After %q, want 600 (10 min left)", w.Header().Get("Retry-After"))
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("the upstream saw %d refreshes, want 1", n)
	}
	if w := f.refresh(t, ctx, "bob", payments.RefreshPath); w.Code != 200 {
		t.Fatalf("another user: got %d, want 200 (the budget is per user)", w.Code)
	}
}

// Every path under the refresh route is the refresh: an upstream that
// routes a trailing slash or an extra segment to it would charge each.
func TestRefreshGuardHoldsForEveryPathUnderTheRoute(t *testing.T) {
	ctx := context.Background()
	f := newRefreshFixture(t)
	if w := f.refresh(t, ctx, "alice", payments.RefreshPath); w.Code != 200 {
		t.Fatalf("first refresh: got %d %s", w.Code, w.Body)
	}
	for _, path := range []string{payments.RefreshPath + "/", payments.RefreshPath + "/x", payments.RefreshPath + "/x/y"} {
		if w := f.refresh(t, ctx, "alice", path); w.Code != 429 || decodeProblem(t, w).Code != "REFRESH_TOO_SOON" {
			t.Fatalf("%s: got %d %s, want 429 REFRESH_TOO_SOON", path, w.Code, w.Body)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("the upstream saw %d refreshes, want 1", n)
	}
}

// A refresh the upstream said it did not start does not use the allowance.
func TestRefreshNotStartedKeepsTheAllowance(t *testing.T) {
	ctx := context.Background()
	for _, answer := range []string{"already_running", "402", "409"} {
		t.Run(answer, func(t *testing.T) {
			f := newRefreshFixture(t)
			f.answer.Store(answer)
			if w := f.refresh(t, ctx, "alice", payments.RefreshPath); w.Code == 429 {
				t.Fatalf("got %d %s, want the upstream's answer", w.Code, w.Body)
			}
			f.answer.Store("200")
			if w := f.refresh(t, ctx, "alice", payments.RefreshPath); w.Code != 200 {
				t.Fatalf("the next click: got %d %s, want 200 (the allowance was not spent)", w.Code, w.Body)
			}
			if n := f.calls.Load(); n != 2 {
				t.Fatalf("the upstream saw %d refreshes, want 2", n)
			}
		})
	}
}

// A client that hangs up does not free the hold: the call is detached
// from its connection and the upstream took it.
func TestAbortedRefreshesSendOneRefresh(t *testing.T) {
	f := newRefreshFixture(t)
	f.answer.Store("slow")
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		f.refresh(t, ctx, "alice", payments.RefreshPath)
		cancel()
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("the upstream saw %d refreshes for 10 aborted clicks, want 1", n)
	}
}

// The refresh is sent once: an upstream 401 after it took the call is not
// followed by a second refresh, and the hold stays.
func TestRefreshAfter401IsNotResent(t *testing.T) {
	ctx := context.Background()
	f := newRefreshFixture(t)
	f.answer.Store("401")
	w := f.refresh(t, ctx, "alice", payments.RefreshPath)
	if p := decodeProblem(t, w); w.Code != 502 || p.Code != "UPSTREAM_AUTH_FAILED" {
		t.Fatalf("got %d %+v, want 502 UPSTREAM_AUTH_FAILED", w.Code, p)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("the upstream saw %d refreshes, want 1", n)
	}
	f.answer.Store("200")
	if w := f.refresh(t, ctx, "alice", payments.RefreshPath); w.Code != 429 {
		t.Fatalf("after a refresh that may have started: got %d, want 429", w.Code)
	}
}
