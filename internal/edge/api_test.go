//go:build integration

package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/ledger"
	"github.com/fintech-bff/bff/internal/payments"
	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/session"
	"github.com/fintech-bff/bff/internal/testing/syncbuf"
)

// The proxy's failures reach the client through the edge's one renderer:
// the envelope with the request id, the code in the access log, the
// failures an operator acts on logged once with a cause that names no
// address or query, and a replayed refusal logged with its code.
func TestAPIFailuresAreRenderedByTheEdge(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("hangup") != "":
			c, _, _ := http.NewResponseController(w).Hijack()
			_ = c.Close()
		case r.Method == http.MethodPost:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"type":"VALIDATION_ERROR","message":"[\"paymentInformation should not be empty\"]"}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			_, _ = io.WriteString(w, `{"type":"CLIENT_ERROR","message":"Payment ID not valid"}`)
		}
	}))
	defer upstream.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, sessions, cookies := liveSessions(ctx, t)
	led, err := ledger.NewMemory(time.Now, make([]byte, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	base, _ := url.Parse(upstream.URL)
	fwd := proxy.New(proxy.Options{
		BaseURL: base, Routes: proxy.NewRoutes([]proxy.Route{{Prefix: "/v2/payments", Methods: []string{"GET", "POST"}}}),
		Tokens: fixedToken{}, Timeout: 5 * time.Second, MaxBodyBytes: 1 << 20, Retry: proxy.Retry{MaxAttempts: 1},
	})
	pay := payments.New(payments.Options{Upstream: fwd, Timeout: 5 * time.Second, MoneyRoutes: []string{"/v2/payments"}, Ledger: led})
	var logs syncbuf.Buffer
	e := NewPublic(Deps{
		Observability: Observability{Logger: slog.New(slog.NewJSONHandler(&logs, nil))},
		Sessions:      Sessions{Manager: sessions, Cookies: cookies, Tokens: noTokens{}},
		Clients:       Clients{PublicOrigin: "http://bff.local"},
		API:           API{Forwarder: fwd, Payments: pay},
	})
	id, _, err := sessions.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	ck, _ := cookies.New(id)
	var out string // the log lines of the last request
	do := func(t *testing.T, method, target, key string) (*httptest.ResponseRecorder, problem.Problem, map[string]any) {
		t.Helper()
		from := len(logs.String())
		defer func() { out = logs.String()[from:] }()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"paymentInformation":{"amount":1,"currency":"EUR","creditorAccount":{"iban":"DE89370400440532013000"}}}`)
		}
		r := httptest.NewRequest(method, "http://bff.local"+target, body)
		r.AddCookie(ck)
		r.Header.Set("X-CSRF", "1")
		if key != "" {
			r.Header.Set("Idempotency-Key", key)
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, r)
		var p problem.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Header().Get("Content-Type") != problem.ContentType {
			t.Fatalf("%s %s: got %d %q %s, want an envelope", method, target, w.Code, w.Header().Get("Content-Type"), w.Body)
		}
		if p.RequestID == "" || p.RequestID != w.Header().Get("X-Request-Id") {
			t.Fatalf("%s %s: requestId %q, header %q", method, target, p.RequestID, w.Header().Get("X-Request-Id"))
		}
		var access map[string]any
		for _, line := range bytes.Split(bytes.TrimSpace([]byte(logs.String()[from:])), []byte("\n")) {
			var m map[string]any
			if json.Unmarshal(line, &m) == nil && m["msg"] == "request" {
				access = m
			}
		}
		// A replay is the stored answer, the first request's id in it; the
		// access line is this request's.
		replayed := w.Header().Get("Idempotent-Replayed") == "true"
		if access == nil || access["code"] != p.Code || (access["requestId"] == p.RequestID) == replayed || access["route"] != "/api/v2/payments" {
			t.Fatalf("%s %s: access line %v, want code %s, the request id and the route", method, target, access, p.Code)
		}
		return w, p, access
	}

	t.Run("an upstream refusal: the envelope and the access log, no failure line", func(t *testing.T) {
		w, p, access := do(t, "GET", "/api/v2/payments/x", "")
		if w.Code != 404 || p.Code != problem.CodeClientError || access["upstreamStatus"] != float64(404) {
			t.Fatalf("got %d %+v, access %v", w.Code, p, access)
		}
		if strings.Contains(out, "request failed") {
			t.Fatalf("a client error was logged as a failure:\n%s", out)
		}
	})

	t.Run("an upstream hang-up: one warning with a cause that names no address or query", func(t *testing.T) {
		w, p, _ := do(t, "GET", "/api/v2/payments?hangup=secret-query-value", "")
		if w.Code != 502 || p.Code != problem.CodeUpstreamUnreachable {
			t.Fatalf("got %d %+v", w.Code, p)
		}
		if n := strings.Count(out, `"msg":"request failed"`); n != 1 || !strings.Contains(out, `"level":"WARN","msg":"request failed"`) || !strings.Contains(out, `"cause":`) {
			t.Fatalf("want one WARN failure line with its cause, got %d:\n%s", n, out)
		}
		if strings.Contains(out, "secret-query-value") || strings.Contains(out, base.Host) {
			t.Fatalf("the log names the upstream address or the query:\n%s", out)
		}
	})

	t.Run("a payment's stored refusal: the same bytes again, replayed with its code", func(t *testing.T) {
		first, p1, _ := do(t, "POST", "/api/v2/payments", "pay-1")
		if first.Code != 400 || p1.Code != problem.CodeValidationError || len(p1.Fields) == 0 {
			t.Fatalf("got %d %+v", first.Code, p1)
		}
		again, p2, _ := do(t, "POST", "/api/v2/payments", "pay-1")
		if again.Header().Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body.Bytes(), first.Body.Bytes()) || p2.Code != p1.Code {
			t.Fatalf("the repeat: %q %s, want the first answer replayed:\n%s", again.Header().Get("Idempotent-Replayed"), again.Body, first.Body)
		}
	})
}

type noTokens struct{}

func (noTokens) Invalidate(context.Context, string) error { return nil }

// fixedToken is a TokenSource with one token for everyone.

// apiServer is the public edge behind a real HTTP server, forwarding to
// upstream with o (Tokens, body bound and timeout filled in), and the
// cookie of a live session (Redis).
func apiServer(t *testing.T, upstream http.Handler, o proxy.Options) (*httptest.Server, *http.Cookie) {
	t.Helper()
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, sessions, cookies := liveSessions(ctx, t)
	o.BaseURL, _ = url.Parse(up.URL)
	o.Tokens, o.MaxBodyBytes = fixedToken{}, 1<<20
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Second
	}
	e := NewPublic(Deps{
		Observability: Observability{Logger: slog.New(slog.DiscardHandler)},
		Sessions:      Sessions{Manager: sessions, Cookies: cookies, Tokens: noTokens{}},
		Clients:       Clients{PublicOrigin: "http://bff.local"},
		API:           API{Forwarder: proxy.New(o)},
	})
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	id, _, err := sessions.Create(ctx, session.New{UserID: "alice", Method: session.MethodDev})
	if err != nil {
		t.Fatal(err)
	}
	ck, _ := cookies.New(id)
	return srv, ck
}

// send makes one request with the session cookie (and X-CSRF) and reads
// the answer whole.
func send(t *testing.T, srv *httptest.Server, ck *http.Cookie, method, path string) (*http.Response, []byte) {
	t.Helper()
	r, _ := http.NewRequest(method, srv.URL+path, nil)
	r.AddCookie(ck)
	r.Header.Set("X-CSRF", "1")
	resp, err := srv.Client().Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// HEAD is answered wherever GET is (RFC 9110 9.3.2): sent upstream as
// HEAD, the GET's headers back without a body. A route without GET still
// refuses it, and Allow lists HEAD with GET (docs/endpoints.md, "HEAD").
func TestAPIHeadWhereGet(t *testing.T) {
	const accounts = `{"items":[{"id":"a1","balance":12.5}],"nextPage":null}`
	var mu sync.Mutex
	var methods []string
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		methods = append(methods, r.Method)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Etag", `"v1"`)
		_, _ = io.WriteString(w, accounts) // net/http drops it for HEAD, keeping Content-Length
	})
	srv, ck := apiServer(t, upstream, proxy.Options{Routes: proxy.NewRoutes([]proxy.Route{
		{Prefix: "/v2/data/accounts", Methods: []string{"GET"}},
		{Prefix: "/v2/pay", Methods: []string{"POST"}},
	})})
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), methods...)
	}

	get, body := send(t, srv, ck, "GET", "/api/v2/data/accounts?limit=1")
	if get.StatusCode != 200 || string(body) != accounts {
		t.Fatalf("GET: got %d %s, want 200 and the accounts", get.StatusCode, body)
	}
	head, body := send(t, srv, ck, "HEAD", "/api/v2/data/accounts?limit=1")
	if head.StatusCode != 200 || len(body) != 0 {
		t.Fatalf("HEAD: got %d with %d bytes of body, want 200 and none", head.StatusCode, len(body))
	}
	for _, h := range []string{"Content-Type", "Content-Length", "Etag", "Cache-Control", "X-Content-Type-Options"} {
		if got, want := head.Header.Get(h), get.Header.Get(h); got != want || want == "" {
			t.Errorf("HEAD: got %s %q, want the GET's %q", h, got, want)
		}
	}
	if got := seen(); strings.Join(got, " ") != "GET HEAD" {
		t.Fatalf("the upstream saw %v, want GET then HEAD", got)
	}

	t.Run("a route without GET refuses HEAD, before the upstream", func(t *testing.T) {
		resp, _ := send(t, srv, ck, "HEAD", "/api/v2/pay/open-banking-init")
		if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
			t.Fatalf("got %d Allow %q, want 405 Allow POST", resp.StatusCode, resp.Header.Get("Allow"))
		}
		if got := seen(); len(got) != 2 {
			t.Fatalf("the upstream saw %v, want nothing more", got)
		}
	})
	t.Run("405 on a GET route lists HEAD", func(t *testing.T) {
		resp, body := send(t, srv, ck, "DELETE", "/api/v2/data/accounts/a1")
		var p problem.Problem
		if err := json.Unmarshal(body, &p); err != nil || resp.StatusCode != 405 || p.Code != problem.CodeMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
			t.Fatalf("got %d %s Allow %q, want 405 METHOD_NOT_ALLOWED Allow \"GET, HEAD\"", resp.StatusCode, body, resp.Header.Get("Allow"))
		}
	})
}

// An upstream Retry-After on a retried answer is the wait before the next
// attempt when it fits in upstream.timeout; when it does not, the one
// answer goes to the client with its Retry-After. The waits are
// recorded, not slept.
func TestAPIRetryAfter(t *testing.T) {
	cases := []struct {
		name       string
		retryAfter string
		wantCalls  int
		wantStatus int
		wantWaits  string
	}{
		{"within the deadline: waited for, then retried", "1", 2, 200, "[1s]"},
		{"past the deadline: not retried, passed on", "30", 1, 503, "[]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					w.Header().Set("Retry-After", tc.retryAfter)
					w.WriteHeader(503)
					return
				}
				_, _ = io.WriteString(w, `{"items":[]}`)
			})
			var mu sync.Mutex
			waits := []time.Duration{}
			srv, ck := apiServer(t, upstream, proxy.Options{
				Routes:  proxy.NewRoutes([]proxy.Route{{Prefix: "/v2/data/accounts", Methods: []string{"GET"}}}),
				Timeout: 5 * time.Second,
				// A backoff is at most 10 ms: a wait of a second is the upstream's.
				Retry: proxy.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 10 * time.Millisecond},
				Sleep: func(ctx context.Context, d time.Duration) error {
					mu.Lock()
					defer mu.Unlock()
					waits = append(waits, d)
					return ctx.Err()
				},
			})
			resp, body := send(t, srv, ck, "GET", "/api/v2/data/accounts")
			mu.Lock()
			gotWaits := fmt.Sprint(waits)
			mu.Unlock()
			if resp.StatusCode != tc.wantStatus || calls.Load() != int64(tc.wantCalls) || gotWaits != tc.wantWaits {
				t.Fatalf("got %d after %d calls, waits %s; want %d after %d, waits %s (body %s)",
					resp.StatusCode, calls.Load(), gotWaits, tc.wantStatus, tc.wantCalls, tc.wantWaits, body)
			}
			if tc.wantStatus == 503 {
				var p problem.Problem
				if err := json.Unmarshal(body, &p); err != nil || p.Code != problem.CodeUpstreamUnavailable || resp.Header.Get("Retry-After") != tc.retryAfter {
					t.Fatalf("got %s Retry-After %q, want UPSTREAM_UNAVAILABLE with the upstream's Retry-After %q", body, resp.Header.Get("Retry-After"), tc.retryAfter)
				}
			}
		})
	}
}
