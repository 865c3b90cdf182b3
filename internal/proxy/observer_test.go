package proxy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fintech-bff/bff/internal/proxy"
)

// attempts is a proxy.Observer that records each attempt (its duration
// only as whether it was measured).
type attempts struct {
	mu   sync.Mutex
	list []attempt
}

type attempt struct {
	route  string
	status int
	typ    proxy.ErrorType
}

func (a *attempts) Attempted(route string, status int, typ proxy.ErrorType, took time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if took < 0 {
		route = "negative duration"
	}
	a.list = append(a.list, attempt{route, status, typ})
}

func (a *attempts) get() []attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.list)
}

func observed(t *testing.T, h http.HandlerFunc, base string) (*proxy.Forwarder, *attempts) {
	t.Helper()
	if base == "" {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		base = srv.URL
	}
	u, _ := url.Parse(base)
	obs := &attempts{}
	return proxy.New(proxy.Options{
		BaseURL: u, Routes: proxy.NewRoutes(contractRoutes), Tokens: &fakeTokens{}, Timeout: 5 * time.Second, MaxBodyBytes: 1024,
		Retry: proxy.Retry{MaxAttempts: 3, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }, Observe: obs,
	}), obs
}

// The observer hears of every attempt, retries included, by route
// template, with the upstream's status and its error type bounded to the
// documented ones; a transport failure is status 0; a client that went
// away is not an upstream failure and is not reported.
func TestObserverHearsOfEveryAttempt(t *testing.T) {
	call := proxy.Call{UserID: "u", RequestID: "r", Path: "/v2/payments/p1"}
	t.Run("retries", func(t *testing.T) {
		n := 0
		fwd, obs := observed(t, func(w http.ResponseWriter, r *http.Request) {
			n++
			switch n {
			case 1:
				w.WriteHeader(500)
				_, _ = io.WriteString(w, `{"type":"INTERNAL_ERROR"}`)
			case 2:
				w.WriteHeader(503)
				_, _ = io.WriteString(w, `{"type":"SOMETHING_NEW"}`)
			default:
				_, _ = io.WriteString(w, `{}`)
			}
		}, "")
		forward(fwd, httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v2/payments/p1", nil), call)
		want := []attempt{{"/v2/payments", 500, "INTERNAL_ERROR"}, {"/v2/payments", 503, "OTHER"}, {"/v2/payments", 200, ""}}
		if got := obs.get(); !slices.Equal(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
	t.Run("402 by its status field", func(t *testing.T) {
		fwd, obs := observed(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(402)
			_, _ = io.WriteString(w, `{"status":"insufficient_credits","cost":20}`)
		}, "")
		forward(fwd, httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v2/payments/p1", nil), call)
		want := []attempt{{"/v2/payments", 402, "insufficient_credits"}}
		if got := obs.get(); !slices.Equal(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		fwd, obs := observed(t, nil, "http://"+addr)
		forward(fwd, httptest.NewRecorder(), httptest.NewRequest("POST", "/api/v2/payments", nil), proxy.Call{UserID: "u", RequestID: "r", Path: "/v2/payments"})
		want := []attempt{{"/v2/payments", 0, ""}}
		if got := obs.get(); !slices.Equal(got, want) {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
	t.Run("client gone", func(t *testing.T) {
		arrived := make(chan struct{})
		fwd, obs := observed(t, func(w http.ResponseWriter, r *http.Request) {
			close(arrived)
			<-r.Context().Done()
		}, "")
		ctx, leave := context.WithCancel(context.Background())
		go func() { <-arrived; leave() }()
		forward(fwd, httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v2/payments/p1", nil).WithContext(ctx), call)
		if got := obs.get(); len(got) != 0 {
			t.Fatalf("got %+v, want no attempt reported", got)
		}
	})
}
