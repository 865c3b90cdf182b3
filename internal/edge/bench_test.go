//go:build integration

package edge

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/fintech-bff/bff/internal/events"
	"github.com/fintech-bff/bff/internal/kv"
	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/limits"
	"github.com/fintech-bff/bff/internal/metrics"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/poll"
	"github.com/fintech-bff/bff/internal/testing/redistest"
	"github.com/fintech-bff/bff/internal/tokens"
)

// BenchmarkSteadyStateRequest is the whole public path of a cookie GET
// with a live session and a cached token, against a real Redis (local
// layers live) and a real upstream server: cookie decode, session check,
// CSRF, route, token, header hygiene, proxying, metrics, access log.
func BenchmarkSteadyStateRequest(b *testing.B) { benchmarkSteadyState(b, nil) }

func benchmarkSteadyState(b *testing.B, budget *limits.Budget) {
	benchmarkSteadyStateWith(b, budget, 0)
}

// BenchmarkSteadyStateRequestWithBudget is the same with the per-session
// request budget on (a rate it never reaches: the cost of the check, and
// no exchange with Redis for a session within its share).
func BenchmarkSteadyStateRequestWithBudget(b *testing.B) {
	benchmarkSteadyState(b, limits.NewBudget(1e9, 1e9, nil, nil))
}

// benchmarkSteadyStateWith runs the steady-state GET with streams idle
// event streams open on the same edge (BenchmarkIdleStreams), or with
// -streams plain idle sockets.
func benchmarkSteadyStateWith(b *testing.B, budget *limits.Budget, streams int) {
	reply := strings.Repeat("x", 1000)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	}))
	defer upstream.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, sessions, cookies := liveSessions(ctx, b)
	cache, fwd := liveForwarder(ctx, b, store, upstream.URL)
	d := Deps{
		Observability: Observability{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Observe: metrics.New(prometheus.NewRegistry()).Edge},
		Sessions:      Sessions{Manager: sessions, Cookies: cookies, Tokens: cache},
		Clients:       Clients{PublicOrigin: "http://bff.local"},
		API:           API{Forwarder: fwd},
	}
	if budget != nil {
		d.Limits.Budget = budget
	}
	if streams < 0 {
		stop := holdSockets(b, -streams)
		defer func() {
			b.StopTimer() // the teardown is not the requests' time
			stop()
		}()
	}
	if streams > 0 {
		led, err := ledger.NewMemory(nil, make([]byte, 32), nil)
		if err != nil {
			b.Fatal(err)
		}
		pay := payments.New(payments.Options{Ledger: led})
		hub := events.NewHub(events.Limits{})
		pusher := events.NewPusher(hub, pay, sessions, 0)
		pushed := make(chan struct{})
		go func() {
			defer close(pushed)
			pusher.Run(ctx)
		}()
		defer func() { cancel(); <-pushed }()
		d.Payments.Streams = pusher
		e := NewPublic(d)
		srv := httptest.NewServer(e)
		defer srv.Close()
		sid, _, err := sessions.Create(ctx, session.New{UserID: "stream-holder", Method: session.MethodDev})
		if err != nil {
			b.Fatal(err)
		}
		stop := holdStreams(b, srv.Listener.Addr().String(), sid, streams)
		defer func() {
			// Closed before the next run begins, and off the clock: their
			// teardown is neither this run's time nor the next run's.
			b.StopTimer()
			stop()
			poll.Within(10*time.Second, func() bool { return hub.Count() == 0 })
		}()
		waitStreams(b, hub, streams)
	}
	e := NewPublic(d)
	id, _, err := sessions.Create(ctx, session.New{UserID: "bench-user", Method: session.MethodDev})
	if err != nil {
		b.Fatal(err)
	}
	ck, _ := cookies.New(id)
	req := httptest.NewRequest("GET", "http://bff.local/api/v2/payments?limit=10", nil)
	req.AddCookie(ck)
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req) // warm: token minted and cached
	if w.Code != 200 {
		b.Fatalf("got %d %s", w.Code, w.Body)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("got %d", w.Code)
		}
	}
}

// liveSessions is a session manager on the test Redis, running until ctx
// ends and live, with its store and cookies.
func liveSessions(ctx context.Context, tb testing.TB) (*kv.Redis, *session.Manager, *session.Cookies) {
	tb.Helper()
	rc, prefix := redistest.Client(tb)
	return liveSessionsOn(ctx, tb, rc, prefix)
}

// liveSessionsOn is liveSessions on a given Redis client (one a benchmark
// counts the commands of).
func liveSessionsOn(ctx context.Context, tb testing.TB, rc redis.UniversalClient, prefix string) (*kv.Redis, *session.Manager, *session.Cookies) {
	tb.Helper()
	store := kv.NewRedis(rc, prefix)
	sessions := session.NewManager(store, session.Options{IdleTimeout: time.Hour, AbsoluteTimeout: 2 * time.Hour, LocalBytes: 1 << 20})
	go sessions.Run(ctx)
	poll.Until(tb, 10*time.Second, "the session manager live", sessions.Live)
	cookies, err := session.NewCookies(session.CookieOptions{Name: "bff_session", Keys: [][]byte{make([]byte, 32)}, MaxAge: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	return store, sessions, cookies
}

// liveForwarder is a forwarder of GET /v2/payments to upstream with a live
// token cache on store, as the steady-state benchmarks run it.
func liveForwarder(ctx context.Context, tb testing.TB, store *kv.Redis, upstream string) (*tokens.Cache, *proxy.Forwarder) {
	tb.Helper()
	secret, err := tokens.NewSecret(func() (string, error) { return "secret", nil }, nil)
	if err != nil {
		tb.Fatal(err)
	}
	cache, err := tokens.NewCache(store, staticSource{}, secret, tokens.CacheOptions{
		EncryptionKey: make([]byte, 32), RefreshBefore: time.Minute, MaxTTL: time.Hour, LocalBytes: 1 << 20,
	})
	if err != nil {
		tb.Fatal(err)
	}
	go cache.Run(ctx)
	poll.Until(tb, 10*time.Second, "the token cache live (its subscription up)", cache.Live)
	base, _ := url.Parse(upstream)
	return cache, proxy.New(proxy.Options{
		BaseURL: base, Routes: proxy.NewRoutes([]proxy.Route{{Prefix: "/v2/payments", Methods: []string{"GET"}}}),
		Tokens: cache, Timeout: 5 * time.Second, MaxBodyBytes: 1 << 20, Retry: proxy.Retry{MaxAttempts: 1},
	})
}

// BenchmarkBaselineRequest is the same request through a bare
// httputil.ReverseProxy adding a fixed Bearer, with the same tuned
// transport: what BenchmarkSteadyStateRequest is compared against.
func BenchmarkBaselineRequest(b *testing.B) {
	reply := strings.Repeat("x", 1000)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	}))
	defer upstream.Close()
	base, _ := url.Parse(upstream.URL)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(base)
			pr.Out.Header.Set("Authorization", "Bearer upstream-token")
		},
		Transport: proxy.NewTransport(5 * time.Second),
	}
	req := httptest.NewRequest("GET", "http://bff.local/v2/payments?limit=10", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := httptest.NewRecorder()
		rp.ServeHTTP(w, req)
		if w.Code != 200 {
			b.Fatalf("got %d", w.Code)
		}
	}
}
