package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/problem"
	"github.com/fintech-bff/bff/internal/proxy"
	"github.com/fintech-bff/bff/internal/tokens"
)

// fakeTokens hands out "tok-<user>-<generation>" and counts invalidations.
type fakeTokens struct {
	gen         atomic.Int64
	invalidated atomic.Int64
	err         error
}

func (f *fakeTokens) Token(_ context.Context, userID string) (tokens.Token, error) {
	if f.err != nil {
		return tokens.Token{}, f.err
	}
	return tokens.Token{Value: fmt.Sprintf("tok-%s-%d", userID, f.gen.Load()), Expiry: time.Now().Add(time.Hour)}, nil
}

func (f *fakeTokens) InvalidateToken(context.Context, string, string) error {
	f.invalidated.Add(1)
	f.gen.Add(1)
	return nil
}

type seen struct {
	mu   sync.Mutex
	reqs []*http.Request
	body []string
}

func (s *seen) add(r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
	s.body = append(s.body, string(b))
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

type fixture struct {
	upstream *httptest.Server
	seen     *seen
	tokens   *fakeTokens
	fwd      *proxy.Forwarder
	waits    *waits
}

// waits records the waits the retries ask for, and waits for none: a test
// reads what was asked, never the clock.
type waits struct {
	mu   sync.Mutex
	list []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.list = append(w.list, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) get() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.list...)
}

func newFixture(t *testing.T, h func(n int, w http.ResponseWriter, r *http.Request), timeout time.Duration) *fixture {
	t.Helper()
	f := &fixture{seen: &seen{}, tokens: &fakeTokens{}, waits: &waits{}}
	var n atomic.Int64
	f.upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.seen.add(r)
		h(int(n.Add(1)), w, r)
	}))
	t.Cleanup(f.upstream.Close)
	base, _ := url.Parse(f.upstream.URL + "/root")
	f.fwd = proxy.New(proxy.Options{
		BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: f.tokens,
		Timeout: timeout, MaxBodyBytes: 1024,
		Retry: proxy.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond},
		Sleep: f.waits.sleep,
	})
	return f
}

func (f *fixture) do(method, target, body string, hdr map[string]string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, "http://bff.local"+target, rd)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	path := strings.TrimPrefix(r.URL.EscapedPath(), "/api")
	forward(f.fwd, w, r, proxy.Call{UserID: "alice", RequestID: "req-123", Path: path, ClientIP: "203.0.113.7"})
	return w
}

// forward serves a call as the edge does: Forward, then its failure
// rendered as the envelope. It panics (failing the test) when Forward
// fails with anything but a *problem.Problem, or fails after writing.
func forward(fwd *proxy.Forwarder, w http.ResponseWriter, r *http.Request, c proxy.Call) proxy.Result {
	t, p := fwd.Target(c, r.Method)
	var res proxy.Result
	var err error
	if p != nil {
		res, err = proxy.Result{Route: t.Route}, p
	} else {
		res, err = fwd.Forward(w, r, c, t)
	}
	if err == nil {
		return res
	}
	p, ok := err.(*problem.Problem)
	if !ok {
		panic(fmt.Sprintf("Forward failed with %T %v, not a *problem.Problem", err, err))
	}
	if rec, ok := w.(*httptest.ResponseRecorder); ok && (len(rec.Header()) > 0 || rec.Body.Len() > 0) {
		panic(fmt.Sprintf("Forward wrote a response (%v) and failed with %v", rec.Header(), err))
	}
	problem.Write(w, p, c.RequestID)
	return res
}

func decodeProblem(t *testing.T, w *httptest.ResponseRecorder) problem.Problem {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != problem.ContentType {
		t.Fatalf("got Content-Type %q, want %q (body %s)", ct, problem.ContentType, w.Body)
	}
	var p problem.Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatal(err)
	}
	if p.RequestID != "req-123" || w.Header().Get("X-Request-Id") != "req-123" {
		t.Fatalf("got requestId %q / header %q, want req-123", p.RequestID, w.Header().Get("X-Request-Id"))
	}
	return p
}

func TestForwardHeaderHygieneAndPassThrough(t *testing.T) {
	const reply = `{"items":[{"id":"p1","status":"RJCT"}],"nextPage":null}`
	f := newFixture(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "upstream=1")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, reply)
	}, 5*time.Second)
	w := f.do("GET", "/api/v2/payments?limit=5&sort=-1&x=%2F", "", map[string]string{
		"Authorization": "Bearer session-token", "Cookie": "bff_session=abc", "X-CSRF": "1",
		"Connection": "X-Drop", "X-Drop": "1", "X-Forwarded-For": "6.6.6.6", "Accept": "application/json",
	})
	if w.Code != 200 || w.Body.String() != reply {
		t.Fatalf("got %d %q, want 200 and the body byte for byte", w.Code, w.Body)
	}
	if w.Header().Get("Set-Cookie") != "" {
		t.Fatal("upstream Set-Cookie reached the client")
	}
	r := f.seen.reqs[0]
	if r.URL.Path != "/root/v2/payments" || r.URL.RawQuery != "limit=5&sort=-1&x=%2F" {
		t.Fatalf("got %s?%s, want /root/v2/payments with the query as sent", r.URL.Path, r.URL.RawQuery)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer tok-alice-0" {
		t.Fatalf("got Authorization %q, want the user's upstream token", got)
	}
	for _, h := range []string{"Cookie", "X-Csrf", "X-Drop"} {
		if r.Header.Get(h) != "" {
			t.Errorf("header %s was forwarded", h)
		}
	}
	if got := r.Header.Values("X-Forwarded-For"); len(got) != 1 || got[0] != "203.0.113.7" {
		t.Errorf("got X-Forwarded-For %v, want only the edge's client IP (the client's own value dropped)", got)
	}
	if r.Header.Get("X-Request-Id") != "req-123" || r.Header.Get("Accept") != "application/json" {
		t.Fatalf("got X-Request-Id %q Accept %q", r.Header.Get("X-Request-Id"), r.Header.Get("Accept"))
	}
}

func TestForward401RetriesOnceWithANewToken(t *testing.T) {
	t.Run("second attempt succeeds", func(t *testing.T) {
		f := newFixture(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				w.WriteHeader(401)
				_, _ = io.WriteString(w, `{"message":"expired"}`)
				return
			}
			_, _ = io.WriteString(w, `{"id":"p1"}`)
		}, 5*time.Second)
		w := f.do("POST", "/api/v2/payments", `{"paymentInformation":{}}`, map[string]string{"Content-Type": "application/json"})
		if w.Code != 200 || f.seen.count() != 2 || f.tokens.invalidated.Load() != 1 {
			t.Fatalf("got %d after %d calls and %d invalidations, want 200 after 2 and 1", w.Code, f.seen.count(), f.tokens.invalidated.Load())
		}
		if f.seen.body[1] != `{"paymentInformation":{}}` {
			t.Fatalf("retried body %q, want the original", f.seen.body[1])
		}
		if got := f.seen.reqs[1].Header.Get("Authorization"); got != "Bearer tok-alice-1" {
			t.Fatalf("retry carried %q, want the fresh token", got)
		}
	})
	t.Run("second 401 is 502 UPSTREAM_AUTH_FAILED", func(t *testing.T) {
		f := newFixture(t, func(n int, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(401)
			_, _ = io.WriteString(w, `{"message":"no"}`)
		}, 5*time.Second)
		w := f.do("GET", "/api/v2/payments", "", nil)
		p := decodeProblem(t, w)
		if w.Code != 502 || p.Code != problem.CodeUpstreamAuthFailed || f.seen.count() != 2 {
			t.Fatalf("got %d %s after %d calls, want 502 UPSTREAM_AUTH_FAILED after 2", w.Code, p.Code, f.seen.count())
		}
	})
}

func TestForwardRetryPolicy(t *testing.T) {
	cases := []struct {
		name      string
		method    string
		status    int
		body      string
		failures  int // failures before a 200
		wantCalls int
		wantCode  int
	}{
		{"GET 500 twice then success", "GET", 500, `{"type":"INTERNAL_ERROR"}`, 2, 3, 200},
		{"GET 503 twice then success", "GET", 503, ``, 2, 3, 200},
		{"GET PROVIDER_UNAVAILABLE twice then success", "GET", 400, `{"type":"PROVIDER_UNAVAILABLE","message":"down"}`, 2, 3, 200},
		{"GET 500 three times gives up", "GET", 500, `{"type":"INTERNAL_ERROR"}`, 5, 3, 502},
		{"DELETE 503 is retried", "DELETE", 503, ``, 1, 2, 200},
		{"HEAD 503 is retried", "HEAD", 503, ``, 1, 2, 200},
		{"HEAD 500 three times gives up", "HEAD", 500, ``, 5, 3, 502},
		{"POST 500 is never retried", "POST", 500, `{"type":"INTERNAL_ERROR"}`, 1, 1, 502},
		{"POST PROVIDER_UNAVAILABLE is never retried", "POST", 400, `{"type":"PROVIDER_UNAVAILABLE"}`, 1, 1, 503},
		{"GET 400 is never retried", "GET", 400, `{"type":"CLIENT_ERROR","message":"bad id"}`, 1, 1, 400},
		{"GET 402 is never retried", "GET", 402, `{"status":"insufficient_credits","cost":20}`, 1, 1, 402},
		{"GET 403 is never retried", "GET", 403, `{"type":"NOT_AVAILABLE_ON_PLAN"}`, 1, 1, 403},
		{"GET 404 is never retried", "GET", 404, `{"type":"CLIENT_ERROR"}`, 1, 1, 404},
		{"GET 409 is never retried", "GET", 409, `{"status":"no_refreshable_connections"}`, 1, 1, 409},
		{"DELETE 423 is never retried", "DELETE", 423, `locked`, 1, 1, 423},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n <= tc.failures {
					w.WriteHeader(tc.status)
					_, _ = io.WriteString(w, tc.body)
					return
				}
				_, _ = io.WriteString(w, `{"ok":true}`)
			}, 5*time.Second)
			path := "/api/v2/payments"
			if tc.method == "DELETE" {
				path = "/api/v2/connections/c1"
			}
			w := f.do(tc.method, path, "", nil)
			if w.Code != tc.wantCode || f.seen.count() != tc.wantCalls {
				t.Fatalf("got %d after %d calls, want %d after %d (body %s)", w.Code, f.seen.count(), tc.wantCode, tc.wantCalls, w.Body)
			}
		})
	}
}

// A retried answer's Retry-After is the wait before the next attempt, in
// place of the backoff (never shorter than it), when at least as much of
// the deadline (the fixture's 5 s) remains after it for the attempt; one
// that would not leave that is not waited for, and the client gets the
// upstream's answer with its Retry-After.
func TestForwardHonoursRetryAfter(t *testing.T) {
	date := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name, method, path string
		status             int
		header             map[string]string // on the first answer
		wantCalls          int
		wantCode           int
		wantWaits          []time.Duration // nil: one backoff, at most MaxDelay
		wantRetryAfter     string          // on the client's answer
	}{
		{"503 delay-seconds", "GET", "/api/v2/payments", 503, map[string]string{"Retry-After": "2"}, 2, 200, []time.Duration{2 * time.Second}, ""},
		{"500 delay-seconds", "DELETE", "/api/v2/connections/c1", 500, map[string]string{"Retry-After": "1"}, 2, 200, []time.Duration{time.Second}, ""},
		{"503 HTTP-date, from the reply's Date", "GET", "/api/v2/payments", 503,
			map[string]string{"Date": date.Format(http.TimeFormat), "Retry-After": date.Add(2 * time.Second).Format(http.TimeFormat)}, 2, 200, []time.Duration{2 * time.Second}, ""},
		{"503 HTTP-date gone by", "GET", "/api/v2/payments", 503,
			map[string]string{"Date": date.Format(http.TimeFormat), "Retry-After": date.Add(-time.Minute).Format(http.TimeFormat)}, 2, 200, nil, ""},
		{"503 Retry-After 0: the backoff, not a thundering herd", "GET", "/api/v2/payments", 503, map[string]string{"Retry-After": "0"}, 2, 200, nil, ""},
		{"503 leaving the attempt less time than the wait", "GET", "/api/v2/payments", 503, map[string]string{"Retry-After": "3"}, 1, 503, []time.Duration{}, "3"},
		{"503 malformed Retry-After: the backoff", "GET", "/api/v2/payments", 503, map[string]string{"Retry-After": "soon"}, 2, 200, nil, ""},
		{"503 past the deadline", "GET", "/api/v2/payments", 503, map[string]string{"Retry-After": "30"}, 1, 503, []time.Duration{}, "30"},
		// Passed on as seconds, at most an hour (docs/errors.md, "Headers").
		{"503 absurd", "GET", "/api/v2/payments", 503, map[string]string{"Retry-After": "99999999999999999999"}, 1, 503, []time.Duration{}, "3600"},
		{"503 over a Duration", "GET", "/api/v2/payments", 503, map[string]string{"Retry-After": "9999999999"}, 1, 503, []time.Duration{}, "3600"},
		{"503 HTTP-date past the deadline", "GET", "/api/v2/payments", 503,
			map[string]string{"Date": date.Format(http.TimeFormat), "Retry-After": date.Add(20 * time.Second).Format(http.TimeFormat)}, 1, 503, []time.Duration{}, "20"},
		{"503 HTTP-date over an hour", "GET", "/api/v2/payments", 503,
			map[string]string{"Date": date.Format(http.TimeFormat), "Retry-After": date.Add(2 * time.Hour).Format(http.TimeFormat)}, 1, 503, []time.Duration{}, "3600"},
		{"503 HTTP-date in 9999", "GET", "/api/v2/payments", 503,
			map[string]string{"Date": date.Format(http.TimeFormat), "Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"}, 1, 503, []time.Duration{}, "3600"},
		{"429 over an hour", "GET", "/api/v2/payments", 429, map[string]string{"Retry-After": "36000"}, 1, 429, []time.Duration{}, "3600"},
		{"POST is never retried, whatever Retry-After", "POST", "/api/v2/payments", 503, map[string]string{"Retry-After": "1"}, 1, 503, []time.Duration{}, "1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 || tc.wantCalls == 1 {
					for k, v := range tc.header {
						w.Header().Set(k, v)
					}
					w.WriteHeader(tc.status)
					return
				}
				_, _ = io.WriteString(w, `{"ok":true}`)
			}, 5*time.Second)
			w := f.do(tc.method, tc.path, "", nil)
			if w.Code != tc.wantCode || f.seen.count() != tc.wantCalls {
				t.Fatalf("got %d after %d calls, want %d after %d (body %s)", w.Code, f.seen.count(), tc.wantCode, tc.wantCalls, w.Body)
			}
			got := f.waits.get()
			if tc.wantWaits == nil {
				if len(got) != 1 || got[0] > 5*time.Millisecond {
					t.Fatalf("got waits %v, want one backoff of at most MaxDelay (5ms)", got)
				}
			} else if fmt.Sprint(got) != fmt.Sprint(tc.wantWaits) {
				t.Fatalf("got waits %v, want %v", got, tc.wantWaits)
			}
			if got := w.Header().Get("Retry-After"); got != tc.wantRetryAfter {
				t.Fatalf("got Retry-After %q, want %q", got, tc.wantRetryAfter)
			}
		})
	}
}

// A success's Retry-After (a 202 polled later, a redirect) is bounded as an
// error's is: seconds, at most an hour, a malformed one dropped.
func TestForwardBoundsRetryAfterOnSuccess(t *testing.T) {
	date := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name, retryAfter, want string
		status                 int
	}{
		{"202 seconds", "120", "120", 202},
		{"202 over an hour", "36000", "3600", 202},
		{"202 date in 9999", "Fri, 31 Dec 9999 23:59:59 GMT", "3600", 202},
		{"200 date, from the reply's Date", date.Add(45 * time.Second).Format(http.TimeFormat), "45", 200},
		{"200 date gone by", date.Add(-time.Hour).Format(http.TimeFormat), "0", 200},
		{"303 malformed", "soon", "", 303},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Date", date.Format(http.TimeFormat))
				w.Header().Set("Retry-After", tc.retryAfter)
				w.Header().Set("Location", "/v2/payments/p1")
				w.WriteHeader(tc.status)
			}, 5*time.Second)
			w := f.do("GET", "/api/v2/payments", "", nil)
			if w.Code != tc.status || w.Header().Get("Retry-After") != tc.want {
				t.Fatalf("got %d Retry-After %q, want %d %q", w.Code, w.Header().Get("Retry-After"), tc.status, tc.want)
			}
			if _, ok := w.Header()["Retry-After"]; tc.want == "" && ok {
				t.Fatalf("got an empty Retry-After header, want none")
			}
		})
	}
}

func TestForward423KeepsRetryAfter(t *testing.T) {
	f := newFixture(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(423)
		_, _ = io.WriteString(w, "Connection is locked and cannot be deleted currently")
	}, 5*time.Second)
	w := f.do("DELETE", "/api/v2/connections/c1", "", nil)
	p := decodeProblem(t, w)
	if w.Code != 423 || p.Code != problem.CodeResourceLocked || w.Header().Get("Retry-After") != "120" {
		t.Fatalf("got %d %s Retry-After %q, want 423 RESOURCE_LOCKED 120", w.Code, p.Code, w.Header().Get("Retry-After"))
	}
}

func TestForwardRefusesBeforeUpstream(t *testing.T) {
	f := newFixture(t, func(_ int, w http.ResponseWriter, r *http.Request) {}, 5*time.Second)
	cases := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"not allowlisted", "GET", "/api/v2/secret", "", 404, problem.CodeRouteNotFound},
		{"token endpoint", "POST", "/api/oauth/token", "", 404, problem.CodeRouteNotFound},
		{"method", "PUT", "/api/v2/payments", "", 405, problem.CodeMethodNotAllowed},
		{"traversal", "GET", "/api/v2/payments/%2e%2e/%2e%2e/oauth/token", "", 400, problem.CodeBadPath},
		{"encoded slash", "GET", "/api/v2/payments%2Fx", "", 400, problem.CodeBadPath},
		{"body too large", "POST", "/api/v2/payments", strings.Repeat("x", 1025), 413, problem.CodeBodyTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := f.do(tc.method, tc.path, tc.body, nil)
			p := decodeProblem(t, w)
			if w.Code != tc.status || p.Code != tc.code {
				t.Fatalf("got %d %s, want %d %s", w.Code, p.Code, tc.status, tc.code)
			}
		})
	}
	if n := f.seen.count(); n != 0 {
		t.Fatalf("the upstream saw %d requests, want 0", n)
	}
	t.Run("405 names the allowed methods", func(t *testing.T) {
		w := f.do("PUT", "/api/v2/payments", "", nil)
		if got := w.Header().Get("Allow"); got != "DELETE, GET, HEAD, POST" {
			t.Fatalf("got Allow %q, want the route's methods, HEAD with GET", got)
		}
	})
}

// A chunked body (no Content-Length) over the limit is refused as well.
func TestForwardChunkedBodyTooLarge(t *testing.T) {
	f := newFixture(t, func(_ int, w http.ResponseWriter, r *http.Request) {}, 5*time.Second)
	r := httptest.NewRequest("POST", "http://bff.local/api/v2/payments", io.MultiReader(strings.NewReader(strings.Repeat("y", 2000))))
	r.ContentLength = -1
	w := httptest.NewRecorder()
	forward(f.fwd, w, r, proxy.Call{UserID: "alice", RequestID: "req-123", Path: "/v2/payments"})
	if p := decodeProblem(t, w); w.Code != 413 || p.Code != problem.CodeBodyTooLarge || f.seen.count() != 0 {
		t.Fatalf("got %d %s with %d upstream calls, want 413 BODY_TOO_LARGE and none", w.Code, p.Code, f.seen.count())
	}
}

func TestForwardTransportFailures(t *testing.T) {
	t.Run("unreachable is 502", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		base, _ := url.Parse("http://" + addr)
		fwd := proxy.New(proxy.Options{BaseURL: base, Routes: proxy.NewRoutes(contractRoutes), Tokens: &fakeTokens{},
			Timeout: time.Second, MaxBodyBytes: 10, Retry: proxy.Retry{MaxAttempts: 1}})
		w := httptest.NewRecorder()
		forward(fwd, w, httptest.NewRequest("GET", "/api/v2/payments", nil), proxy.Call{UserID: "u", RequestID: "req-123", Path: "/v2/payments"})
		p := decodeProblem(t, w)
		if w.Code != 502 || p.Code != problem.CodeUpstreamUnreachable || strings.Contains(w.Body.String(), addr) {
			t.Fatalf("got %d %s %s, want 502 UPSTREAM_UNREACHABLE without the address", w.Code, p.Code, w.Body)
		}
	})
	t.Run("timeout is 504", func(t *testing.T) {
		release := make(chan struct{})
		f := newFixture(t, func(_ int, w http.ResponseWriter, r *http.Request) { <-release }, 100*time.Millisecond)
		defer close(release)
		w := f.do("GET", "/api/v2/payments", "", nil)
		if p := decodeProblem(t, w); w.Code != 504 || p.Code != problem.CodeUpstreamTimeout {
			t.Fatalf("got %d %s, want 504 UPSTREAM_TIMEOUT", w.Code, p.Code)
		}
	})
	t.Run("token endpoint refusing credentials is 502 UPSTREAM_AUTH_FAILED", func(t *testing.T) {
		f := newFixture(t, func(_ int, w http.ResponseWriter, r *http.Request) {}, time.Second)
		f.tokens.err = &tokens.MintError{Kind: tokens.KindAuth, Status: 401}
		w := f.do("GET", "/api/v2/payments", "", nil)
		if p := decodeProblem(t, w); w.Code != 502 || p.Code != problem.CodeUpstreamAuthFailed || f.seen.count() != 0 {
			t.Fatalf("got %d %s, want 502 UPSTREAM_AUTH_FAILED with no API call", w.Code, p.Code)
		}
	})
	t.Run("another instance's mint that never finishes is 504 UPSTREAM_TIMEOUT", func(t *testing.T) {
		f := newFixture(t, func(_ int, w http.ResponseWriter, r *http.Request) {}, time.Second)
		f.tokens.err = tokens.ErrLockTimeout
		w := f.do("GET", "/api/v2/payments", "", nil)
		if p := decodeProblem(t, w); w.Code != 504 || p.Code != problem.CodeUpstreamTimeout || f.seen.count() != 0 {
			t.Fatalf("got %d %s, want 504 UPSTREAM_TIMEOUT with no API call", w.Code, p.Code)
		}
	})
	t.Run("token store down is 503 SESSION_STORE_UNAVAILABLE", func(t *testing.T) {
		f := newFixture(t, func(_ int, w http.ResponseWriter, r *http.Request) {}, time.Second)
		f.tokens.err = fmt.Errorf("%w: get: dial refused", tokens.ErrStoreUnavailable)
		w := f.do("GET", "/api/v2/payments", "", nil)
		if p := decodeProblem(t, w); w.Code != 503 || p.Code != problem.CodeSessionStoreUnavailable {
			t.Fatalf("got %d %s, want 503 SESSION_STORE_UNAVAILABLE", w.Code, p.Code)
		}
	})
}
